"""The probe of a running vLLM OpenAI server: what it says on /health, /version, /v1/models and /metrics, and how
one tiny completion went. Facts only: the comparison with what was checked is compare.py's job."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from kvdoctor.verify.connection import Connection, ServerUnreachable
from kvdoctor.verify.metrics import MetricsParseError, ServerMetrics, parse_metrics

PROMPT_TOKEN_IDS = (1, 2, 3, 4)
"""The default prompt, as token ids: a server started with --skip-tokenizer-init accepts only ids, any other too."""


@dataclass(frozen=True)
class ServedModel:
    """One entry of /v1/models."""

    id: str
    """The served model name the API takes."""
    root: str | None
    """What the server loaded (the --model it was given)."""
    max_model_len: int | None


@dataclass(frozen=True)
class CompletionResult:
    """One tiny completion, temperature 0, streamed so the first token's arrival is seen."""

    ok: bool
    status: int | None
    """HTTP status; None when nothing was sent (no served model)."""
    model: str | None
    prompt: str
    """What was sent, in words: 'token ids [1, 2, 3, 4]' or the text."""
    max_tokens: int
    completion_tokens: int | None
    """As the server's usage counts them, else as counted in the stream."""
    token_ids: tuple[int, ...] = ()
    """When the server returned them (return_token_ids)."""
    text: str | None = None
    """When the server detokenised (a server with --skip-tokenizer-init sends '')."""
    finish_reason: str | None = None
    ttft_s: float | None = None
    """Time to the first streamed token."""
    total_s: float | None = None
    error: str | None = None
    """The server's error message, one line."""


@dataclass(frozen=True)
class ServerFacts:
    """What the server said about itself, endpoint by endpoint."""

    url: str
    health_status: int
    version: str
    models: tuple[ServedModel, ...]
    metrics: ServerMetrics
    completion: CompletionResult | None
    """None when --no-completion."""
    notes: tuple[str, ...] = ()
    seconds: dict[str, float] = field(default_factory=dict)
    """How long each endpoint took to answer."""


def probe_server(connection: Connection, *, served_model: str | None = None, prompt: str | None = None,
                 max_tokens: int = 4, completion: bool = True) -> ServerFacts:  # fmt: skip
    """Ask the server; raise ServerUnreachable when it cannot be reached or is not a vLLM OpenAI server."""
    notes: list[str] = []
    seconds: dict[str, float] = {}
    health = connection.get("/health")
    seconds["/health"] = health.seconds
    version = _version(connection, seconds)
    models = _models(connection, seconds, notes)
    metrics = _metrics(connection, seconds)
    result = None
    if completion:
        result = complete(connection, _chosen_model(models, served_model), prompt, max_tokens)
    return ServerFacts(connection.base_url, health.status, version, models, metrics, result, tuple(notes), seconds)


def _version(connection: Connection, seconds: dict[str, float]) -> str:
    answer = connection.get("/version")
    seconds["/version"] = answer.seconds
    body = answer.json()
    if answer.status != 200 or not isinstance(body, dict) or not isinstance(body.get("version"), str):
        raise ServerUnreachable(
            f"{connection.base_url} is not a vLLM OpenAI server: GET /version answered {answer.status} "
            f"{_one_line(answer.body, 80)!r}",
            "point kvdoctor verify at vLLM's API server (vllm serve), not a gateway or another server",
        )
    return body["version"]


def _models(connection: Connection, seconds: dict[str, float], notes: list[str]) -> tuple[ServedModel, ...]:
    answer = connection.get("/v1/models")
    seconds["/v1/models"] = answer.seconds
    body = answer.json()
    if answer.status != 200 or not isinstance(body, dict) or not isinstance(body.get("data"), list):
        notes.append(f"GET /v1/models answered {answer.status}: {_one_line(answer.body, 120)}")
        return ()
    models = []
    for entry in body["data"]:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            length = entry.get("max_model_len")
            models.append(ServedModel(entry["id"], entry.get("root"), length if isinstance(length, int) else None))
    return tuple(models)


def _metrics(connection: Connection, seconds: dict[str, float]) -> ServerMetrics:
    answer = connection.get("/metrics")
    seconds["/metrics"] = answer.seconds
    if answer.status == 404:
        raise ServerUnreachable(f"{connection.base_url}/metrics answered 404: metrics are disabled or routed elsewhere",
                                "verify reads the KV-cache configuration from vLLM's /metrics; expose it to kvdoctor")  # fmt: skip
    if answer.status != 200:
        raise ServerUnreachable(f"{connection.base_url}/metrics answered {answer.status}: {_one_line(answer.body, 120)}",
                                "verify reads the KV-cache configuration from vLLM's /metrics")  # fmt: skip
    try:
        metrics = parse_metrics(answer.body)
    except MetricsParseError as exc:
        raise ServerUnreachable(f"{connection.base_url}/metrics is not Prometheus text: {_one_line(str(exc), 120)}",
                                "point kvdoctor verify at vLLM's API server") from None  # fmt: skip
    if metrics.vllm_metric_count == 0:
        raise ServerUnreachable(f"{connection.base_url}/metrics carries no vllm:* metric: not a vLLM server",
                                "point kvdoctor verify at vLLM's API server") from None  # fmt: skip
    return metrics


def _chosen_model(models: tuple[ServedModel, ...], wanted: str | None) -> str | None:
    if wanted is not None:
        return wanted
    return models[0].id if models else None


def complete(connection: Connection, model: str | None, prompt: str | None, max_tokens: int) -> CompletionResult:
    """One streamed completion at temperature 0; `prompt` None sends PROMPT_TOKEN_IDS."""
    said = f"token ids {list(PROMPT_TOKEN_IDS)}" if prompt is None else repr(prompt)
    if model is None:
        return CompletionResult(False, None, None, said, max_tokens, None, error="no served model: /v1/models listed none")
    body: dict[str, Any] = {
        "model": model, "prompt": list(PROMPT_TOKEN_IDS) if prompt is None else prompt, "max_tokens": max_tokens,
        "temperature": 0, "stream": True, "stream_options": {"include_usage": True}, "return_token_ids": True,
    }  # fmt: skip
    started = time.monotonic()
    status, events = connection.stream("/v1/completions", body)
    if isinstance(events, str):
        return CompletionResult(False, status, model, said, max_tokens, None, total_s=time.monotonic() - started,
                                error=_error_message(events, status))  # fmt: skip
    return _read_stream(events, status, model, said, max_tokens, started)


def _read_stream(events, status: int, model: str, said: str, max_tokens: int, started: float) -> CompletionResult:
    ttft = None
    chunks = 0
    text: list[str] = []
    ids: list[int] = []
    usage_tokens = None
    finish = None
    error = None
    for event in events:
        if event.data == "[DONE]":
            break
        try:
            chunk = json.loads(event.data)
        except ValueError:
            error = f"not JSON in the stream: {_one_line(event.data, 120)}"
            break
        if "error" in chunk:
            error = _error_message(event.data, status)
            break
        for choice in chunk.get("choices") or ():
            chunks += 1
            ttft = event.seconds if ttft is None else ttft
            text.append(choice.get("text") or "")
            ids += [i for i in (choice.get("token_ids") or ()) if isinstance(i, int)]
            finish = choice.get("finish_reason") or finish
        usage = chunk.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            usage_tokens = usage["completion_tokens"]
    total = time.monotonic() - started
    tokens = usage_tokens if usage_tokens is not None else (len(ids) or chunks or None)
    ok = error is None and bool(tokens)
    if error is None and not tokens:
        error = "the stream ended without a token"
    return CompletionResult(ok, status, model, said, max_tokens, tokens, tuple(ids), "".join(text), finish, ttft, total,
                            error)  # fmt: skip


def _error_message(body: str, status: int | None) -> str:
    """vLLM's error text ({"error": {"message": ...}} or {"message": ...}), one line."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return f"HTTP {status}: {_one_line(body, 300)}"
    error = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
    message = error.get("message") if isinstance(error, dict) else None
    return f"HTTP {status}: {_one_line(str(message if message is not None else body), 300)}"


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."
