"""TLS towards the server: the CA that vouches for it (--cacert), the client certificate a mutual-TLS server asks for
(--cert, --key), and --insecure, the one way to skip verifying the server's certificate: given on the command line
and stated in the report (no environment variable or default turns verification off)."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from kvdoctor.base.errors import UsageError


@dataclass(frozen=True)
class TlsSettings:
    """What the user gave for TLS; all unset = the system's CA store, no client certificate."""

    cacert: Path | None = None
    """PEM bundle of the CA(s) that sign the server's certificate (instead of the system store)."""
    cert: Path | None = None
    """PEM client certificate for a server that asks for one (mutual TLS); may hold the key too."""
    key: Path | None = None
    """PEM private key of `cert`, when not inside it."""
    insecure: bool = False
    """--insecure: do not verify the server's certificate or host name (the report says so, and never PASSes)."""

    @property
    def given(self) -> bool:
        return bool(self.cacert or self.cert or self.key or self.insecure)

    def described(self) -> str:
        """'server certificate verified against ca.pem; client certificate client.pem' and the like (paths only)."""
        if self.insecure:
            server = "server certificate NOT verified (--insecure)"
        else:
            server = f"server certificate verified against {self.cacert}" if self.cacert else "server certificate verified against the system CA store"
        client = f"; client certificate {self.cert}" if self.cert else ""
        return server + client


def check_tls_settings(tls: TlsSettings, url: str) -> None:
    """Refuse what cannot be meant: TLS options for an http:// URL, --key without --cert, --insecure beside --cacert."""
    if tls.given and not url.startswith("https://"):
        raise UsageError(f"TLS options given but {url} is not https://", "use the server's https:// URL, or drop them")
    if tls.key and not tls.cert:
        raise UsageError("--key without --cert", "give the client certificate with --cert FILE (and its key with --key FILE)")
    if tls.insecure and tls.cacert:
        raise UsageError("--insecure and --cacert both given",
                         "--cacert verifies the server against that CA; --insecure verifies nothing: keep one")  # fmt: skip


def tls_context(tls: TlsSettings) -> ssl.SSLContext:
    """The client context: verification on (CERT_REQUIRED, host name checked) unless --insecure; unreadable or
    mismatched files are a user error."""
    try:
        context = ssl.create_default_context(cafile=str(tls.cacert) if tls.cacert else None)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"--cacert {tls.cacert}: {_why(exc)}", "give a PEM file of the CA that signs the server") from None
    if tls.cert:
        try:
            context.load_cert_chain(str(tls.cert), str(tls.key) if tls.key else None)
        except (OSError, ssl.SSLError) as exc:
            given = f"--cert {tls.cert}" + (f" --key {tls.key}" if tls.key else "")
            raise UsageError(f"{given}: {_why(exc)}",
                             "give the PEM client certificate and its unencrypted PEM key (--key when not in the same file)") from None  # fmt: skip
    if tls.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _why(exc: Exception) -> str:
    if isinstance(exc, ssl.SSLError):
        return exc.reason or str(exc)
    return getattr(exc, "strerror", None) or str(exc)
