"""The comparison of a running server with what was checked: one finding per field, each with both values and where
each came from. Pure: facts in, findings out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvdoctor.verify.checked import CheckedConfig
from kvdoctor.verify.metrics import label_float, label_int
from kvdoctor.verify.probe import ServedModel, ServerFacts

MATCH, MISMATCH, NOT_CHECKED, NOT_EXPOSED = "match", "mismatch", "not_checked", "not_exposed"
CACHE_LABEL = "GET /metrics vllm:cache_config_info{{{}}}"

PREDICTED_TOKENS = "memory.kv_tokens"
"""The check report's prediction of vLLM's 'KV cache size: N tokens' (data/fact_names.yaml, group memory)."""
BUDGET_GIB, BAND_GIB = "memory.kv_budget_gib", "memory.band_gib"
"""The KV budget and its stated error band (± GiB); tokens scale with the budget, so the band is band / budget."""


@dataclass(frozen=True)
class Comparison:
    """One field of the deployment: what check judged, what the server runs."""

    field: str
    """'model', 'vllm_version', 'kv_cache_dtype', 'block_size', 'max_model_len', 'gpu_memory_utilization',
    'kv_cache_size_tokens', 'health', 'completion', or 'server_identity' (under --insecure)."""
    status: str
    """'match', 'mismatch' (gates: exit 1), 'not_checked' (the check did not state it), 'not_exposed' (the server
    does not say)."""
    checked: Any
    served: Any
    checked_from: str
    """Where the checked value is: a fact of the check report."""
    served_from: str
    """Where the served value is: the endpoint (and label)."""
    required: bool = False
    """A field a PASS needs: without it known on both sides the verdict is WARN."""
    note: str | None = None

    @property
    def severity(self) -> str:
        if self.status == MISMATCH:
            return "error"
        return "warning" if self.required and self.status != MATCH else "info"

    def line(self) -> str:
        """'kv_cache_dtype: checked 'fp8', server runs 'auto'' and the like."""
        if self.field == "completion":
            return f"completion: {self.served}"
        if self.field == "health":
            return f"health: GET /health answered {self.served}"
        if self.field == "server_identity":
            return f"server identity: {self.served}"
        if self.status == NOT_CHECKED:
            return f"{self.field}: server {_show(self.served)} (not stated at check)"
        if self.status == NOT_EXPOSED:
            return f"{self.field}: checked {_show(self.checked)}, the server does not say"
        said = "matches" if self.status == MATCH else "MISMATCH"
        return f"{self.field}: checked {_show(self.checked)}, server {_show(self.served)} ({said})"


def compare(checked: CheckedConfig, server: ServerFacts, served_model: str | None = None) -> tuple[Comparison, ...]:
    """Every field verify compares, in the order a reader wants them."""
    labels = server.metrics.cache_config
    model = _served(server.models, served_model)
    return (
        _health(server),
        _version(checked, server),
        _model(checked, model),
        _kv_cache_dtype(checked, labels.get("cache_dtype")),
        _given("block_size", checked, "--block-size", "serve.block_size", label_int(labels, "block_size"),
               CACHE_LABEL.format("block_size")),  # fmt: skip
        _given("max_model_len", checked, "--max-model-len", "serve.max_model_len",
               model.max_model_len if model else None, f"GET /v1/models max_model_len of {model.id if model else '?'}"),
        _given("gpu_memory_utilization", checked, "--gpu-memory-utilization", "serve.gpu_memory_utilization",
               label_float(labels, "gpu_memory_utilization"), CACHE_LABEL.format("gpu_memory_utilization")),
        _capacity(checked, labels),
        _completion(server),
    )


def _served(models: tuple[ServedModel, ...], wanted: str | None) -> ServedModel | None:
    return next((m for m in models if m.id == wanted), None) if wanted else (models[0] if models else None)


def _health(server: ServerFacts) -> Comparison:
    ok = server.health_status == 200
    note = None if ok else "the engine is not healthy: vLLM answers /health with 503 once its engine has died"
    return Comparison("health", MATCH if ok else MISMATCH, 200, server.health_status, "a running server",
                      "GET /health", required=True, note=note)  # fmt: skip


def _model(checked: CheckedConfig, model: ServedModel | None) -> Comparison:
    """By name only (the last path part, any case): a path on the server and a hub id or local folder at check name
    the same model differently, so a difference is said, never gated."""
    want = checked.fact("model.model_id")
    served = (model.root or model.id) if model else None
    where = f"model.model_id in the {checked.source}"
    served_from = f"GET /v1/models root of {model.id!r}" if model else "GET /v1/models"
    if want is None or served is None:
        return Comparison("model", NOT_CHECKED if want is None else NOT_EXPOSED, want, served, where, served_from)
    if _name(str(want)) == _name(served):
        return Comparison("model", MATCH, want, served, where, served_from)
    return Comparison("model", NOT_CHECKED, want, served, where, served_from,
                      note=f"named differently ({want!r} at check, {served!r} served): models are not compared by content")


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1].lower()


def _version(checked: CheckedConfig, server: ServerFacts) -> Comparison:
    from packaging.version import InvalidVersion, Version

    want = checked.fact("vllm.version")
    where = f"vllm.version in the {checked.source}"
    if want is None:
        judged = checked.fact("vllm.judged")
        note = f"the check judged against {judged}" if judged else None
        return Comparison("vllm_version", NOT_CHECKED, None, server.version, where, "GET /version", True, note)
    try:
        same = Version(str(want)).public == Version(server.version).public
    except InvalidVersion:
        same = str(want) == server.version
    note = None
    if same and str(want) != server.version:
        note = f"same release, build {server.version!r}"
    return Comparison("vllm_version", MATCH if same else MISMATCH, want, server.version, where, "GET /version", True, note)


def _kv_cache_dtype(checked: CheckedConfig, served: str | None) -> Comparison:
    """Exact, except that 'auto' is the model's dtype (vLLM's CacheConfig: auto = the model dtype)."""
    found = _exact("kv_cache_dtype", checked, "serve.kv_cache_dtype", served, CACHE_LABEL.format("cache_dtype"),
                   required=True)  # fmt: skip
    model_dtype = checked.fact("model.dtype")
    if found.status == MISMATCH and model_dtype and {found.checked, served} == {"auto", model_dtype}:
        return Comparison(found.field, MATCH, found.checked, served, found.checked_from, found.served_from, True,
                          f"'auto' is the model dtype, {model_dtype} (model.dtype)")  # fmt: skip
    return found


def _exact(name: str, checked: CheckedConfig, fact: str, served: Any, served_from: str, *, required: bool) -> Comparison:
    want = checked.fact(fact)
    where = f"{fact} in the {checked.source}"
    if served is None:
        return Comparison(name, NOT_EXPOSED, want, None, where, served_from, required,
                          "this vLLM release's metrics carry no such label")  # fmt: skip
    if want is None:
        return Comparison(name, NOT_CHECKED, None, served, where, served_from, required)
    return Comparison(name, MATCH if str(want) == str(served) else MISMATCH, want, served, where, served_from, required)


def _given(name: str, checked: CheckedConfig, flag: str, fact: str, served: Any, served_from: str) -> Comparison:
    """A field compared only when the check was given its flag; otherwise the server's own choice is shown."""
    want = checked.fact(fact)
    where = f"{fact} in the {checked.source}"
    if not checked.gave(flag):
        want = None  # a fact for a flag nobody gave is kvdoctor's default; vLLM picks its own (per platform, release)
    if want is None:
        note = f"{flag} was not given at check: vLLM chose {_show(served)}" if served is not None else None
        return Comparison(name, NOT_CHECKED, None, served, where, served_from, note=note)
    if served is None:
        return Comparison(name, NOT_EXPOSED, want, None, where, served_from, note="the server does not say")
    same = abs(float(want) - float(served)) < 1e-9 if isinstance(want, float) or isinstance(served, float) else want == served
    return Comparison(name, MATCH if same else MISMATCH, want, served, where, served_from)


def _capacity(checked: CheckedConfig, labels: dict[str, str]) -> Comparison:
    served, served_from = label_int(labels, "kv_cache_size_tokens"), CACHE_LABEL.format("kv_cache_size_tokens")
    if served is None and label_int(labels, "num_gpu_blocks") and label_int(labels, "block_size"):
        served = label_int(labels, "num_gpu_blocks") * label_int(labels, "block_size")
        served_from = CACHE_LABEL.format("num_gpu_blocks") + " x block_size"
    where = f"{PREDICTED_TOKENS} in the {checked.source}"
    want = checked.fact(PREDICTED_TOKENS)
    if want is None:
        why = checked.fact("memory.why_not")
        note = f"the check predicted no KV capacity{': ' + str(why) if why and why != 'none' else ''}"
        return Comparison("kv_cache_size_tokens", NOT_CHECKED, None, served, where, served_from, note=note)
    want = int(want)
    if served is None:
        return Comparison("kv_cache_size_tokens", NOT_EXPOSED, want, None, where, served_from)
    budget, band_gib = checked.fact(BUDGET_GIB), checked.fact(BAND_GIB)
    band = float(band_gib) / float(budget) if budget and band_gib is not None else 0.0
    error = (served - want) / want if want else float("inf")
    inside = abs(error) <= band + 1e-9
    note = f"server is {error:+.1%} of the prediction; the stated band is ±{band:.1%} ({BAND_GIB} / {BUDGET_GIB})"
    return Comparison("kv_cache_size_tokens", MATCH if inside else MISMATCH, want, served, where, served_from, note=note)


def _completion(server: ServerFacts) -> Comparison:
    done = server.completion
    if done is None:
        return Comparison("completion", NOT_CHECKED, None, "not sent (--no-completion)", "", "POST /v1/completions")
    if done.ok:
        ttft = f", first token after {done.ttft_s:.3f} s" if done.ttft_s is not None else ""
        said = f"{done.completion_tokens} token(s) back in {done.total_s:.3f} s{ttft} (model {done.model!r}, prompt {done.prompt})"
        return Comparison("completion", MATCH, "tokens back", said, "", "POST /v1/completions", True)
    said = f"failed: {done.error} (model {done.model!r}, prompt {done.prompt}, max_tokens {done.max_tokens})"
    return Comparison("completion", MISMATCH, "tokens back", said, "", "POST /v1/completions", True)


def _show(value: Any) -> str:
    return "?" if value is None else repr(value) if isinstance(value, str) else str(value)


def unverified_identity() -> Comparison:
    """Under --insecure nobody vouches for who answered: a field a PASS needs, left undecided (WARN)."""
    return Comparison("server_identity", NOT_CHECKED, None, "certificate not verified (--insecure)", "",
                      "the TLS handshake", required=True,
                      note="whoever answered was not proven to be the server: verify with --cacert instead")  # fmt: skip
