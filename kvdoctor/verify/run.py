"""`kvdoctor verify`'s flow: probe the server (facts), compare with what was checked (findings), one report."""

from __future__ import annotations

import time
from dataclasses import dataclass

from kvdoctor.verify.checked import CheckedConfig
from kvdoctor.verify.compare import compare, unverified_identity
from kvdoctor.verify.connection import Connection
from kvdoctor.verify.credentials import Credentials
from kvdoctor.verify.probe import probe_server
from kvdoctor.verify.result import VerifyReport
from kvdoctor.verify.tls import TlsSettings, tls_context


@dataclass(frozen=True)
class VerifySettings:
    """How to talk to the server and what to send it."""

    timeout_s: float = 30.0
    served_model: str | None = None
    """The served model name to complete with; default: the first /v1/models lists."""
    prompt: str | None = None
    """A text prompt; default: token ids (works with --skip-tokenizer-init servers too)."""
    max_tokens: int = 4
    completion: bool = True
    fail_on: str = "error"
    """--fail-on: recorded in the report, which states its exit code under it."""
    tls: TlsSettings = TlsSettings()


def run_verify(url: str, checked: CheckedConfig, credentials: Credentials, settings: VerifySettings) -> VerifyReport:
    """Probe the server at `url` (a base URL) and compare it with `checked`; ServerUnreachable when it cannot be
    spoken to."""
    started = time.monotonic()
    context = tls_context(settings.tls) if url.startswith("https://") else None
    connection = Connection(url, credentials.headers, settings.timeout_s, context)
    server = probe_server(connection, served_model=settings.served_model, prompt=settings.prompt,
                          max_tokens=settings.max_tokens, completion=settings.completion)  # fmt: skip
    comparisons = compare(checked, server, settings.served_model)
    if settings.tls.insecure:
        comparisons = (*comparisons, unverified_identity())
    notes = list(server.notes)
    if url.startswith("https://"):
        notes.append(f"TLS: {settings.tls.described()}")
    if checked.verdict == "FAIL":
        notes.append(f"the check itself was FAIL ({checked.source}): the server runs a configuration check refused")
    if server.metrics.engines > 1:
        notes.append(f"{server.metrics.engines} engines report vllm:cache_config_info; the first was compared")
    return VerifyReport(url, server, checked, comparisons, credentials.described, tuple(notes),
                        time.monotonic() - started, settings.fail_on,
                        settings.tls.described() if url.startswith("https://") else None)  # fmt: skip
