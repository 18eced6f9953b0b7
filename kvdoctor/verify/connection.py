"""Speaking HTTP to a running server (urllib: no dependency): GET a path, POST JSON, read a streamed completion.

Only the network lives here. A server that cannot be reached or spoken to (refused, timed out, TLS, 401/403) is a
`ServerUnreachable`, a user-facing error (one line, exit 2); any other status is handed back for the probe to judge.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Iterator

from kvdoctor.base.errors import KvdoctorError


class ServerUnreachable(KvdoctorError):
    """The server cannot be reached or spoken to: refused, timed out, TLS, refused credentials, not vLLM."""


@dataclass(frozen=True)
class Response:
    """One HTTP answer."""

    status: int
    body: str
    seconds: float
    """From sending the request to the last byte of the body."""

    def json(self) -> Any:
        """The body as JSON; None when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None


@dataclass(frozen=True)
class StreamEvent:
    """One `data:` line of a server-sent event stream, with when it arrived."""

    data: str
    seconds: float
    """Since the request was sent."""


@dataclass(frozen=True)
class Connection:
    """Where the server is and how to talk to it. `headers` may hold secrets: nothing here prints them."""

    base_url: str
    """Scheme, host, port and any path prefix, without a trailing '/'."""
    headers: tuple[tuple[str, str], ...] = ()
    timeout_s: float = 30.0
    tls: ssl.SSLContext | None = None
    """The client TLS context (verify/tls.py); None: the system's CA store, verification on."""

    def get(self, path: str) -> Response:
        """GET base_url + path."""
        return self._send(urllib.request.Request(self.url(path), headers=dict(self.headers), method="GET"))

    def post_json(self, path: str, body: dict[str, Any]) -> Response:
        """POST a JSON body."""
        return self._send(self._post(path, body))

    def stream(self, path: str, body: dict[str, Any]) -> tuple[int, Iterator[StreamEvent] | str]:
        """POST a JSON body and read a server-sent event stream: (status, the `data:` events) on 2xx, else
        (status, the error body)."""
        started = time.monotonic()
        try:
            answer = urllib.request.urlopen(self._post(path, body), timeout=self.timeout_s, context=self.tls or _tls())
        except urllib.error.HTTPError as exc:
            status, text = exc.code, _read(exc)
            self._refuse_credentials(status, path, text)
            return status, text
        except (urllib.error.URLError, OSError) as exc:
            raise self._unreachable(exc, path) from None
        return answer.status, self._events(answer, started, path)

    def url(self, path: str) -> str:
        return self.base_url + path

    def _post(self, path: str, body: dict[str, Any]) -> urllib.request.Request:
        headers = dict(self.headers) | {"Content-Type": "application/json"}
        return urllib.request.Request(self.url(path), data=json.dumps(body).encode(), headers=headers, method="POST")

    def _send(self, request: urllib.request.Request) -> Response:
        started = time.monotonic()
        path = urllib.parse.urlsplit(request.full_url).path
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s, context=self.tls or _tls()) as answer:
                text = answer.read().decode("utf-8", "replace")
                return Response(answer.status, text, time.monotonic() - started)
        except urllib.error.HTTPError as exc:
            text = _read(exc)
            self._refuse_credentials(exc.code, path, text)
            return Response(exc.code, text, time.monotonic() - started)
        except (urllib.error.URLError, OSError) as exc:
            raise self._unreachable(exc, path) from None

    def _events(self, answer: Any, started: float, path: str) -> Iterator[StreamEvent]:
        try:
            with answer:
                for raw in answer:
                    line = raw.decode("utf-8", "replace").strip()
                    if line.startswith("data:"):
                        yield StreamEvent(line[5:].strip(), time.monotonic() - started)
        except (urllib.error.URLError, OSError) as exc:
            raise self._unreachable(exc, path) from None

    def _refuse_credentials(self, status: int, path: str, text: str) -> None:
        if status in (401, 403):
            sent = "an API key was sent" if any(k.lower() == "authorization" for k, _ in self.headers) else "no API key was sent"
            raise ServerUnreachable(
                f"{self.base_url}{path} answered {status} {'Unauthorized' if status == 401 else 'Forbidden'} "
                f"({sent}): {_short(text)}",
                "give the server's key with --api-key-file FILE or --api-key-env VAR (e.g. VLLM_API_KEY)",
            )

    def _unreachable(self, exc: Exception, path: str) -> ServerUnreachable:
        reason = getattr(exc, "reason", exc)
        where = f"{self.base_url}{path}"
        if isinstance(reason, ssl.SSLError) or isinstance(exc, ssl.SSLError):
            text = str(reason)
            # TLS 1.3 servers that refuse the client's certificate (or its absence) often just close the connection:
            # the client then reads an EOF in the handshake instead of an alert
            dropped = isinstance(reason, ssl.SSLEOFError) or "EOF occurred in violation of protocol" in text \
                or "UNEXPECTED_EOF" in text
            if (dropped or any(word in text for word in ("CERTIFICATE_REQUIRED", "HANDSHAKE_FAILURE", "BAD_CERTIFICATE",
                                                         "UNKNOWN_CA"))) and "CERTIFICATE_VERIFY_FAILED" not in text:
                hint = "the server asks for a client certificate it trusts (mutual TLS): give --cert FILE and --key FILE"
            else:
                hint = "give the CA that signs the server's certificate with --cacert FILE (or --insecure, stated in the report)"
            return ServerUnreachable(f"TLS failed talking to {where}: {_short(text)}", hint)
        if isinstance(reason, (ConnectionResetError, BrokenPipeError)) and self.base_url.startswith("https://"):
            return ServerUnreachable(f"{where} closed the TLS connection: {_short(str(exc))}",
                                     "a mutual-TLS server drops clients without a certificate it trusts: give --cert FILE "
                                     "and --key FILE")  # fmt: skip
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return ServerUnreachable(f"{where} did not answer within {self.timeout_s:g} s", "raise --timeout, or check the address")
        if isinstance(reason, ConnectionRefusedError):
            return ServerUnreachable(f"connection refused: nothing listens at {self.base_url}",
                                     "is the server up, and is this its host and port?")
        if isinstance(reason, socket.gaierror):
            return ServerUnreachable(f"cannot resolve the host of {self.base_url}: {reason.strerror or reason}",
                                     "check the URL")
        return ServerUnreachable(f"cannot reach {where}: {_short(str(reason))}", "check the URL and that the server is up")


def _read(exc: urllib.error.HTTPError) -> str:
    try:
        return exc.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _short(text: str, limit: int = 200) -> str:
    one_line = " ".join(str(text).split())
    return one_line if len(one_line) <= limit else one_line[: limit - 3] + "..."


def _tls() -> ssl.SSLContext:
    return ssl.create_default_context()


def base_url(url: str) -> str:
    """The server's base URL from what the user typed: 'host:8000' gets http://, a trailing '/' or '/v1' goes."""
    from kvdoctor.base.errors import UsageError

    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"not a server URL: {url!r}", "e.g. http://vllm.default.svc:8000")
    if any(char.isspace() or ord(char) < 32 or ord(char) == 127 for char in text):  # http.client refuses these
        raise UsageError(f"not a server URL: {url!r} (a space or control character inside)",
                         "e.g. http://vllm.default.svc:8000")
    try:
        parts.port
    except ValueError:
        raise UsageError(f"not a server URL: {url!r} (bad port)", "e.g. http://vllm.default.svc:8000") from None
    if parts.username or parts.password:
        raise UsageError("the URL carries credentials", "give the key with --api-key-file or --api-key-env instead")
    path = parts.path.rstrip("/").removesuffix("/v1")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))
