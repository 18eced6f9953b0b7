"""The API key and extra headers verify sends. Secrets come from a file or the environment, never the command line
(where `ps` and shell history would keep them); what the report says of them is only where they came from."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kvdoctor.base.errors import UsageError

DEFAULT_KEY_ENV = "KVDOCTOR_API_KEY"
"""Read when neither --api-key-file nor --api-key-env is given (vLLM's own server reads VLLM_API_KEY)."""


@dataclass(frozen=True)
class Credentials:
    """Headers to send, and a description of them that is safe to print."""

    headers: tuple[tuple[str, str], ...]
    described: tuple[str, ...]
    """e.g. 'Authorization: Bearer <from $VLLM_API_KEY>', 'X-Team: <from --header>': names and sources, no values."""

    @property
    def secret_values(self) -> tuple[str, ...]:
        """Every header value, so a report can be checked never to contain one."""
        return tuple(v for _, v in self.headers if v)


def read_credentials(api_key_file: Path | None, api_key_env: str | None, headers: list[str],
                     environ: dict[str, str] | None = None) -> Credentials:  # fmt: skip
    """The Authorization header from a file or an environment variable (KVDOCTOR_API_KEY by default), plus each
    `--header 'Name: value'` (a value `@FILE` is read from FILE, `$VAR` from the environment)."""
    env = os.environ if environ is None else environ
    sent: list[tuple[str, str]] = []
    described: list[str] = []
    if api_key_file is not None and api_key_env is not None:
        raise UsageError("--api-key-file and --api-key-env both given", "give the key one way")
    key, source = None, None
    if api_key_file is not None:
        key, source = _read_secret_file(api_key_file, "--api-key-file"), f"file {api_key_file}"
    elif api_key_env is not None:
        if not env.get(api_key_env):
            raise UsageError(f"--api-key-env {api_key_env}: the variable is not set or empty",
                             f"export {api_key_env}=... or use --api-key-file")  # fmt: skip
        key, source = env[api_key_env].strip(), f"${api_key_env}"
    elif env.get(DEFAULT_KEY_ENV):
        key, source = env[DEFAULT_KEY_ENV].strip(), f"${DEFAULT_KEY_ENV}"
    if key:
        sent.append(("Authorization", f"Bearer {key}"))
        described.append(f"Authorization: Bearer <from {source}>")
    for header in headers:
        name, value, source = _header(header, env)
        sent.append((name, value))
        described.append(f"{name}: <{source}>")
    return Credentials(tuple(sent), tuple(described))


def _header(text: str, env: dict[str, str]) -> tuple[str, str, str]:
    name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not name or any(c.isspace() for c in name):
        raise UsageError(f"--header {name or text!r}: expected 'Name: value'", "e.g. --header 'X-Team: $TEAM_TOKEN'")
    if value.startswith("@"):
        return name, _read_secret_file(Path(value[1:]), f"--header {name}"), f"from file {value[1:]}"
    if value.startswith("$"):
        if not env.get(value[1:]):
            raise UsageError(f"--header {name}: {value} is not set or empty", f"export {value[1:]}=...")
        return name, env[value[1:]].strip(), f"from {value}"
    return name, value, "given on the command line"


def _read_secret_file(path: Path, flag: str) -> str:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise UsageError(f"{flag} {path}: {exc.strerror or exc}", "give a readable file holding the key") from None
    if not text or "\n" in text:
        raise UsageError(f"{flag} {path}: expected one line holding the key", "the file holds the key alone")
    return text
