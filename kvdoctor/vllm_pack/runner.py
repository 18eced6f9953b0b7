"""Which GPU model runner (V1 or V2) a vLLM release uses for a model, and the runner-specific bugs.

The choice is vLLM's `VllmConfig.use_v2_model_runner` (0.23.0-0.33.0), asked by the pack builder over the inputs it
reads; older releases follow `VLLM_USE_V2_MODEL_RUNNER` alone (default V1), 0.34.0 has removed V1.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data
from kvdoctor.vllm_pack.release import ReleaseFacts
from kvdoctor.vllm_pack.store import load_runtime


@dataclass(frozen=True)
class RunnerBug:
    """A start-up failure that lives in one model runner only (people's knowledge, checked against the pack)."""

    id: str
    runner: str
    releases: tuple[str, ...]
    kv_cache_dtype_prefix: str
    message: str
    where: str
    references: tuple[str, ...]
    layer_feature: str | None = None
    """A kind of layer the model must have (e.g. 'sliding_window'); None: any model."""


def _load_runner_bugs() -> tuple[RunnerBug, ...]:
    text = read_data("runner_bugs.yaml")
    return tuple(RunnerBug(id=bug_id, runner=e["runner"], releases=tuple(e["releases"]),
                           kv_cache_dtype_prefix=e["kv_cache_dtype_prefix"], message=e["message"], where=e["where"],
                           references=tuple(e["references"]), layer_feature=e.get("layer_feature"))
                 for bug_id, e in load_yaml_cached(text, "runner_bugs.yaml").items())  # fmt: skip


RUNNER_BUGS = _load_runner_bugs()
"""kvdoctor/data/runner_bugs.yaml."""


@dataclass(frozen=True)
class RunnerChoice:
    """The runner a release uses, and what follows from it."""

    runner: str | None
    """'V1' or 'V2'; None when undecided or when start-up fails before choosing."""
    error: str | None = None
    """vLLM's own error (0.34.0: VLLM_USE_V2_MODEL_RUNNER=0 is refused)."""
    undecided: tuple[str, ...] = ()
    note: str | None = None
    bugs: tuple[RunnerBug, ...] = ()
    """Runner bugs this configuration hits (with kv_cache_dtype given)."""
    where: str | None = None


def _env_value(env: str | None) -> str | None:
    """VLLM_USE_V2_MODEL_RUNNER as vLLM's maybe_convert_bool reads it: None, '0' or '1'."""
    if env is None or env == "":
        return None
    try:
        return "1" if int(env) else "0"
    except ValueError:
        return f"invalid:{env}"


def model_runner(release: ReleaseFacts, *, architectures: Iterable[str] | None = None, is_moe: bool | None = None,
                 is_hybrid: bool | None = None, is_attention_free: bool | None = False,
                 runner_type: str = "generate", env: str | None = None,
                 v2_unsupported_features: Iterable[str] = (), kv_cache_dtype: str | None = None,
                 layer_features: Iterable[str] = ()) -> RunnerChoice:
    """V1 or V2 for a model (architectures, MoE, hybrid, attention-free), serve flags and VLLM_USE_V2_MODEL_RUNNER.

    `v2_unsupported_features`: features on that V2 does not support (vLLM's own wording, e.g. 'ngram/ngram_gpu
    speculative decoding'); the pack assumes none. A None model input is unknown: undecided if it matters.
    `layer_features`: the model's layer kinds a runner bug may need ('sliding_window')."""
    runtime = load_runtime(release.version)
    if not runtime or "model_runner" not in runtime:
        return RunnerChoice(None, undecided=(f"the pack holds no model-runner facts for vLLM {release.version}",))
    facts = runtime["model_runner"]
    where = runtime.get("where", {}).get("model_runner") or runtime.get("where", {}).get(
        "model_runner.validate_environ")
    value = _env_value(env)
    if value is not None and value.startswith("invalid:"):
        return RunnerChoice(None, error=f"ValueError: invalid literal for int() with base 10: {env!r}", where=where)
    kind = facts["kind"]
    if kind == "v2_only":
        if value == "0":
            return RunnerChoice(None, error=facts["env_errors"].get("0"), where=where)
        choice = RunnerChoice("V2", note="the V1 GPU model runner is removed in this release", where=where)
    elif kind == "env":
        runner = facts["env_values"].get(str(value)) or "V1"
        choice = RunnerChoice(runner, note=f"VLLM_USE_V2_MODEL_RUNNER alone decides (unset: "
                                           f"{facts['env_values'].get('None') or 'V1'})", where=where)
    else:
        choice = _from_table(facts, value, architectures, is_moe, is_hybrid, is_attention_free, runner_type,
                             tuple(v2_unsupported_features), where)
    if kv_cache_dtype and choice.runner:
        bugs = tuple(b for b in RUNNER_BUGS if b.runner == choice.runner and release.version in b.releases
                     and kv_cache_dtype.startswith(b.kv_cache_dtype_prefix)
                     and (b.layer_feature is None or b.layer_feature in set(layer_features)))
        if bugs:
            choice = RunnerChoice(choice.runner, choice.error, choice.undecided, choice.note, bugs, choice.where)
    return choice


def _from_table(facts, value, architectures, is_moe, is_hybrid, is_free, runner_type, unsupported, where):
    table = facts["table"]
    default_arches = set(facts.get("default_v2_architectures") or ())
    default_arch = None if architectures is None else any(a in default_arches for a in architectures)
    inputs = {"is_hybrid": is_hybrid, "is_attention_free": is_free, "is_moe": is_moe, "architectures": default_arch}
    answers = set()
    unknown = [k for k, v in inputs.items() if v is None]
    for combo in _fill(inputs):
        key = (f"{value}|{runner_type}|{int(combo['is_hybrid'])}|{int(combo['is_attention_free'])}|"
               f"{int(combo['is_moe'])}|{int(combo['architectures'])}")
        answers.add(table.get(key))
    if any(isinstance(a, str) and a.startswith("error") for a in answers):
        return RunnerChoice(None, undecided=tuple(f"vLLM's runner choice could not be asked: {a}" for a in answers
                                                  if a and a.startswith("error")), where=where)
    if len(answers) != 1 or None in answers:
        return RunnerChoice(None, undecided=tuple(f"model.{k}: decides V1 vs V2" for k in unknown), where=where)
    runner = answers.pop()
    note = None
    if runner == "V2" and value is None and unsupported:
        runner = "V1"
        note = f"Model Runner V2 does not yet support {', '.join(unsupported)}; using the V1 model runner instead."
    elif value is not None:
        note = f"VLLM_USE_V2_MODEL_RUNNER={value} decides"
    return RunnerChoice(runner, note=note, where=where)


def _fill(inputs: dict):
    keys = list(inputs)
    combos = [{}]
    for k in keys:
        options = (False, True) if inputs[k] is None else (inputs[k],)
        combos = [c | {k: o} for c in combos for o in options]
    return combos


@lru_cache(maxsize=1)
def _v2_unsupported() -> tuple[dict[str, str], ...]:
    return tuple(load_yaml_cached(read_data("runner_v2_unsupported.yaml"), "runner_v2_unsupported.yaml").values())


def v2_unsupported_features(serve) -> tuple[str, ...]:
    """Features these serve settings (a ServeFacts) turn on that vLLM's Model Runner V2 does not support, in vLLM's
    wording (data/runner_v2_unsupported.yaml)."""
    return tuple(entry["feature"] for entry in _v2_unsupported()
                 if entry["contains"] in str(getattr(serve, entry["serve_fact"]) or ""))
