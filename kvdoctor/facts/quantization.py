"""Weight quantization as the judged release (or every candidate) decides it at start-up: the checkpoint's
quant_method and `--quantization` replayed against each release's own quantization code
(kvdoctor/vllm_pack/quantization.py), and the fixes replayed again: a GPU that meets the method's minimum
capability, `--dtype float16`, a checkpoint format the GPU serves. Fact names: data/fact_names.yaml."""

from __future__ import annotations

import json
from typing import Any

from kvdoctor.data.fact_names import fact_registry
from kvdoctor.data.gpus import gpu_table
from kvdoctor.model.facts import Facts
from kvdoctor.vllm_pack.candidates import Candidates, agree, describe_range
from kvdoctor.vllm_pack.dtypes import resolve_dtype
from kvdoctor.vllm_pack.quantization import (QuantVerdict, judge_quantization, release_quantization,
                                             without_checkpoint)
from kvdoctor.vllm_pack.quantization_moe import (backend_answer, dense_kind, dense_method_kind, moe_kind,
                                                  native_capabilities)
from kvdoctor.vllm_pack.quantization_mixed import judge_mixed, quantized_layers
from kvdoctor.vllm_pack.quantization_schemes import kv_cache_scheme
from kvdoctor.vllm_pack.store import pack_releases

FLOAT16_FIX = "float16"
# vLLM's GPTQ configs list the quantized layers from the checkpoint's safetensors metadata when config.json does not
# name them (maybe_update_config: gptq.py:196 / gptq_marlin.py:302 in 0.11.2-0.18.1, auto_gptq.py:278 in 0.25.1;
# absent in 0.10.2): a layer counts as quantized only when one of its tensors has a non-float dtype
# (get_safetensors_params_metadata, transformers_utils/config.py:1142 in 0.25.1). A local directory with no
# safetensors file gives an empty list, and every linear layer then gets UnquantizedLinearMethod
# (utils/gptq_utils.py:137-140 in 0.25.1): weights at the model dtype. Measured: 0.25.1 on the H200, Llama-3.1-8B
# GPTQ config.json only, --load-format dummy: "Model loading took 15.0 GiB" (the bf16 size;
# docs/real-startup-results/fit-h200-2026-12-04).
GPTQ_METHODS = frozenset({"gptq", "gptq_marlin", "auto_gptq"})
GPTQ_LAYER_LIST_SINCE = "0.11.2"


def gptq_served_unquantized(facts: Facts, method: str | None, quant_config: dict, version: str | None) -> bool:
    """True where vLLM (release `version`; None: unknown, taken as a release that lists layers) builds every linear
    layer of this GPTQ checkpoint unquantized: config.json has no modules_in_block_to_quantize, the model is a local
    path (vLLM reads the directory's safetensors, not the hub's) with no *.safetensors file, served with
    --load-format dummy (a real load needs the weights, whose metadata names the quantized layers)."""
    from pathlib import Path

    from kvdoctor.base.versions import release_numbers

    if method not in GPTQ_METHODS or quant_config.get("modules_in_block_to_quantize"):
        return False
    if _flag_value(facts.serve.argv, "--load-format") != "dummy" or facts.model is None:
        return False
    if version is not None and release_numbers(version) < release_numbers(GPTQ_LAYER_LIST_SINCE):
        return False
    source = facts.model.source
    if source.startswith(("hf-cache:", "hub:")) or not Path(source).exists():
        return False
    folder = Path(source) if Path(source).is_dir() else Path(source).parent
    return not any(folder.glob("*.safetensors"))


def quantization_facts(facts: Facts, releases: Candidates) -> dict[str, Any]:
    """quant.*: what vLLM does with this checkpoint's quantization and `--quantization` (see data/fact_names.yaml)."""
    names = fact_registry().names(produced_by="quantization")
    model = facts.model
    requested = facts.serve.quantization
    checkpoint = model.quant_method if model is not None else None
    if requested is None and checkpoint is None:
        known = model is not None  # no model read: whether it is quantized is unknown
        return dict.fromkeys(names) | ({"quant.method": "none", "quant.error_kind": "none", "quant.error": "none",
                                        "quant.undecided": "none", "quant.scheme": "none", "quant.fallback": "none",
                                        "quant.kv_scales": "none", "quant.moe_backend": "none",
                                        "quant.moe_refusal": "none", "quant.moe_slow_path": "none",
                                        "quant.dense_slow_path": "none", "quant.dense_method": "none",
                                        "quant.dense_refusal": "none", "quant.mixed_layers": "none",
                                        "quant.mixed_unbuilt": "none", "quant.mixed_fix_releases": "none"} if known else {})  # fmt: skip
    gpu = facts.gpu.weakest
    capability = gpu.capability[0] * 10 + gpu.capability[1] if gpu and gpu.capability else None
    allow = "--allow-deprecated-quantization" in facts.serve.argv
    quant_config = _checkpoint_config(model.quant_config) if model is not None else None
    read = [r for r in releases.releases if release_quantization(r.version) is not None]
    if not read:
        why = releases.note or "the knowledge pack holds no quantization facts for this vLLM release"
        return dict.fromkeys(names) | {"quant.undecided": why, "quant.checkpoint_method": checkpoint or "none"}

    # what vLLM's model-type overrides and architecture hooks compare with (hf_config.model_type, architectures)
    identity = {"model_type": model.model_type, "architectures": tuple(model.architectures)} if model else {}

    def judge(release, dtype: str | None = None, cap: int | None = capability) -> QuantVerdict:
        if dtype is None and model is not None:  # on another GPU the model dtype is resolved again (bf16 there)
            dtype = model.dtype if cap == capability else resolve_dtype(
                release, model.config_dtype, facts.serve.dtype, divmod(cap, 10), model.model_type)[0]
        return judge_quantization(release_quantization(release.version), checkpoint=checkpoint, requested=requested,
                                  capability=cap, model_dtype=dtype, allow_deprecated=allow,
                                  quant_config=quant_config, moe=bool(model and model.is_moe), **identity)  # fmt: skip

    verdicts = {r.version: judge(r) for r in read}
    if model is None and requested is not None:  # the checkpoint's own quantization_config is unknown
        verdicts = {v: without_checkpoint(release_quantization(v), requested, x) for v, x in verdicts.items()}
    refused = [v for v, x in verdicts.items() if x.error_kind not in (None, "none")]
    newest = verdicts[refused[-1]] if refused else None
    pick = lambda attr: agree(read, lambda r: getattr(verdicts[r.version], attr)).value  # noqa: E731
    undecided = [f"vLLM {v}: {x.undecided}" for v, x in verdicts.items() if x.undecided != "none"]
    if not undecided and pick("error_kind") is None:  # every release decided, and they disagree
        kinds = agree(read, lambda r: verdicts[r.version].error_kind).split
        undecided = ["the candidate releases disagree: " + "; ".join(f"{kind} in {span}" for kind, span in kinds)]
    minimum = pick("min_capability")
    mixed = _mixed_facts([r.version for r in releases.releases], pick("method"), quant_config or {},
                         bool(model and model.is_moe))
    if mixed.get("quant.undecided") and not refused:  # a release that refuses the method decides without it
        undecided.append(mixed["quant.undecided"])
    mixed.pop("quant.undecided", None)
    return dict.fromkeys(names) | mixed | {
        "quant.checkpoint_method": checkpoint or ("none" if model is not None else None),
        "quant.method": pick("method"),
        "quant.error_kind": pick("error_kind"),
        "quant.error": newest.error if newest else pick("error"),
        "quant.undecided": "; ".join(dict.fromkeys(undecided))[:400] if undecided else "none",
        "quant.min_capability": minimum / 10 if minimum is not None else None,
        "quant.refused_by": describe_range(refused),
        "quant.accepted_by": describe_range([v for v, x in verdicts.items() if x.error_kind == "none"]),
        "quant.evidence": "; ".join(f"vLLM {v}: {x.where}" for v, x in _last_of_each(verdicts).items()),
        "quant.fix_gpus": _serving_gpus(read, verdicts, judge),
        "quant.fix_dtype": _float16_fix(read, verdicts, judge, facts),
        "quant.fix_releases": _serving_releases(verdicts, lambda q: judge_quantization(
            q, checkpoint=checkpoint, requested=requested, capability=capability,
            model_dtype=model.dtype if model is not None else None, allow_deprecated=allow, quant_config=quant_config,
            moe=bool(model and model.is_moe), **identity)),
        "quant.formats_here": _formats_here(read[-1], capability, checkpoint, requested),
        "quant.registered_in": _registered_in(pick("method") or requested or checkpoint)
        if any(v.error_kind == "unknown_method" for v in verdicts.values()) else None,
        "quant.scheme": _schemes(pick("schemes")),
        "quant.fallback": pick("fallback"),
        "quant.kv_scales": (kv_cache_scheme(quant_config) or "none") if quant_config is not None else None,
    } | _backend_facts([r.version for r in releases.releases], pick("method"), quant_config or {}, capability,
                       model.model_type if model is not None else None, bool(model and model.is_moe),
                       _flag_value(facts.serve.argv, "--moe-backend") or "auto",
                       _dense_method_facts([r.version for r in releases.releases], pick("method"), capability,
                                           bool(model and model.is_moe)))


def _flag_value(argv, flag: str) -> str | None:
    """The value of `flag X` / `flag=X` in the serve argv (the last one wins, as argparse does)."""
    value = None
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif word.startswith(flag + "="):
            value = word.split("=", 1)[1]
    return value


def _backend_facts(versions: list[str], method: str | None, quant_config: dict, capability: int | None,
                   model_type: str | None, is_moe: bool, moe_backend: str = "auto",
                   dense_method: dict[str, Any] | None = None) -> dict[str, Any]:
    """quant.moe_* and quant.dense_slow_path: the kernel each candidate release's own selection code picks for the
    experts (fused_moe/oracle) and for dense NVFP4 layers on this GPU (vllm_pack/quantization_moe.py). Decided only
    when every candidate was asked and they agree; 'none' where no such layer is judged."""
    out: dict[str, Any] = {"quant.moe_backend": "none", "quant.moe_refusal": "none", "quant.moe_slow_path": "none",
                           "quant.dense_slow_path": "none", "quant.backend_evidence": "none",
                           "quant.backend_native": "none"}  # fmt: skip
    parts = [("moe", moe_kind(method, quant_config, model_type) if is_moe else None), ("dense", dense_kind(method, quant_config))]
    evidence, native = [], []
    if dense_method:  # a dense model's MXFP4 linear layers (_dense_method_facts)
        dense_method = dict(dense_method)
        if dense_method.get("evidence"):
            evidence.append(dense_method.pop("evidence"))
        dense_method.pop("evidence", None)
        out |= dense_method
    for part, kind in parts:
        if kind is None:
            continue
        answers = [backend_answer(v, part, kind, capability, moe_backend) if capability is not None else None
                   for v in versions]
        if not answers or None in answers:
            asked = "not asked for SM {0}.{1}".format(*divmod(capability, 10)) if capability else "no GPU capability"
            asked += f" with --moe-backend {moe_backend}" if part == "moe" and moe_backend != "auto" else ""
            undecided = f"undecided: the {kind} {part} kernel choice of {describe_range(versions)} was {asked}"
            keys = ["quant.moe_backend", "quant.moe_refusal", "quant.moe_slow_path"] if part == "moe" else \
                ["quant.dense_slow_path"]
            out |= dict.fromkeys(keys)
            evidence.append(undecided)
            continue
        backends = {a.backend for a in answers}
        refused = {a.error is not None for a in answers}
        slow = {a.slow is not None for a in answers}  # all slow: the newest one's words (Marlin vs Humming may differ)
        change = (answers[-1].what_changes() if slow == {True} else "none") if len(slow) == 1 else None
        last = answers[-1]
        if part == "moe":  # candidates that all refuse are quoted in the newest one's words
            out["quant.moe_backend"] = (last.backend or "none") if len(backends) == 1 else None
            out["quant.moe_refusal"] = (last.error or "none") if len(refused) == 1 else None
            out["quant.moe_slow_path"] = change
        else:
            out["quant.dense_slow_path"] = change if not last.error else None
        sm = "SM {0}.{1}".format(*divmod(capability, 10))
        flag = f", --moe-backend {moe_backend}" if part == "moe" and moe_backend != "auto" else ""
        evidence.append(f"vLLM {last.version}: {last.where} ({part} {kind}, asked with {sm}{flag}: "
                        f"{last.backend or 'refused'})")
        sms = native_capabilities(last.version, part, kind, moe_backend if part == "moe" else "auto")
        if sms:
            native.append(f"{kind} {part}: " + ", ".join("SM {0}.{1}".format(*divmod(c, 10)) for c in sms)
                          + f" (vLLM {last.version})")
    if evidence:
        out["quant.backend_evidence"] = "; ".join(evidence)
    if native:
        out["quant.backend_native"] = "; ".join(native)
    return out


def _dense_method_facts(versions: list[str], method: str | None, capability: int | None,
                        is_moe: bool) -> dict[str, Any]:
    """quant.dense_method / quant.dense_refusal: what each candidate release's Mxfp4Config.get_quant_method builds
    for a dense model's linear layer (asked of the release in the pack builder's child). Decided only when every
    candidate was asked and they agree; 'none' where no such layer is judged."""
    kind = dense_method_kind(method, is_moe)
    if kind is None:
        return {"quant.dense_method": "none", "quant.dense_refusal": "none"}
    answers = [backend_answer(v, "dense", kind, capability) if capability is not None else None for v in versions]
    if not answers or None in answers:
        missing = [v for v, a in zip(versions, answers) if a is None]
        return {"quant.dense_method": None, "quant.dense_refusal": None,
                "evidence": f"undecided: what Mxfp4Config builds for dense linear layers was not asked of "
                            f"{describe_range(missing)}"}
    built = {a.backend for a in answers}
    refused = {a.error for a in answers}
    last = answers[-1]
    return {"quant.dense_method": (last.backend or "none") if len(built) == 1 else None,
            "quant.dense_refusal": (last.error or "none") if len(refused) == 1 else None,
            "evidence": f"vLLM {last.version}: {last.where} (dense linear layers under mxfp4: "
                        f"{last.backend or 'refused'})"}


def _mixed_facts(versions: list[str], method: str | None, quant_config: dict, is_moe: bool) -> dict[str, Any]:
    """quant.mixed_layers / quant.mixed_unbuilt: what each candidate release's ModelOptMixedPrecisionConfig builds for
    the checkpoint's per-layer quant_algo values (vllm_pack/quantization_mixed.py). Decided when every candidate read
    its class and they build the same; 'none' for other checkpoints."""
    if method != "modelopt_mixed":
        return {"quant.mixed_layers": "none", "quant.mixed_unbuilt": "none", "quant.mixed_fix_releases": "none"}
    verdicts = {}
    for version in versions:
        release = release_quantization(version)
        verdicts[version] = judge_mixed(release, quant_config, is_moe) if release is not None else None
    if not verdicts or None in verdicts.values():
        missing = [v for v, x in verdicts.items() if x is None]
        why = "the checkpoint names no quantized_layers" if not quantized_layers(quant_config) else \
            f"no ModelOptMixedPrecisionConfig read in {describe_range(missing)}"
        return {"quant.mixed_layers": None, "quant.mixed_unbuilt": None, "quant.mixed_fix_releases": None,
                "quant.undecided": f"undecided: the per-layer MIXED_PRECISION dispatch: {why}"}
    strip = lambda items: tuple(i.split(" (")[0] for i in items)  # noqa: E731  (the same branches, lines aside)
    kinds = {(strip(x.built), tuple(i.split(":")[0] for i in x.unbuilt)) for x in verdicts.values()}
    last = verdicts[versions[-1]]
    if len(kinds) > 1:
        groups: dict[tuple, list[str]] = {}
        for version, x in verdicts.items():
            groups.setdefault(tuple(i.split(":")[0] for i in x.unbuilt), []).append(version)
        split = "; ".join(f"{describe_range(vs)}: " + (", ".join(k) or "every layer built") for k, vs in groups.items())
        return {"quant.mixed_layers": None, "quant.mixed_unbuilt": None, "quant.mixed_fix_releases": None,
                "quant.undecided": f"undecided: the candidate releases build the MIXED_PRECISION layers differently "
                                   f"({split})"[:400]}  # fmt: skip
    builds_all = []  # the fix replayed: pack releases whose class builds every listed algo
    for version in pack_releases() if last.unbuilt else ():
        release = release_quantization(version)
        verdict = judge_mixed(release, quant_config, is_moe) if release is not None else None
        if verdict is not None and not verdict.unbuilt:
            builds_all.append(version)
    return {"quant.mixed_layers": f"vLLM {last.version}: " + "; ".join(last.built) if last.built else "none",
            "quant.mixed_unbuilt": f"vLLM {last.version}: " + "; ".join(last.unbuilt) if last.unbuilt else "none",
            "quant.mixed_fix_releases": describe_range(builds_all) if last.unbuilt else "none"}


def _schemes(schemes: tuple[str, ...] | None) -> str | None:
    """The compressed-tensors scheme classes every candidate builds ('none' for other methods; None: they differ)."""
    if schemes is None:
        return None
    return ", ".join(s.removeprefix("CompressedTensors") for s in schemes) or "none"


def _checkpoint_config(text: str | None) -> dict:
    """The checkpoint's quantization config the probe kept as JSON ({} when it has none)."""
    if not text or text == "none":
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _registered_in(method: str | None) -> str:
    """The pack releases whose own code registers this method ('none')."""
    return describe_range(v for v in pack_releases()
                          if (q := release_quantization(v)) is not None and method in q.methods)


def _last_of_each(verdicts: dict[str, QuantVerdict]) -> dict[str, QuantVerdict]:
    """The newest release of each distinct answer (evidence stays short when 20 releases agree)."""
    seen: dict[tuple, str] = {}
    for version, verdict in verdicts.items():
        seen[(verdict.error_kind, verdict.where)] = version
    return {v: verdicts[v] for v in sorted(set(seen.values()), key=list(verdicts).index)}


def _serving_gpus(read, verdicts, judge) -> str:
    """GPUs (one per compute capability, from data/gpus.yaml) on which every candidate release starts with this
    quantization, checked by replaying it there; 'none' when none does."""
    refused = [v.min_capability for v in verdicts.values() if v.error_kind in ("capability", "scheme")]
    if not refused or None in refused:
        return "none"
    needed = max(refused)
    by_capability: dict[tuple[int, int], str] = {}
    for device in gpu_table().values():
        if device.capability[0] * 10 + device.capability[1] >= needed:  # below it the replay refuses anyway
            by_capability.setdefault(device.capability, device.name)
    good: list[str] = []
    for c, name in sorted(by_capability.items()):
        if all(judge(r, cap=c[0] * 10 + c[1]).error_kind == "none" for r in reversed(read)):
            good.append(f"{name} (SM {c[0]}.{c[1]})")
            if len(good) == 6:
                break
    return ", ".join(good) if good else "none"


def _serving_releases(verdicts, judge_release) -> str:
    """Pack releases that start with it on this GPU (replayed), when a candidate refuses it for the GPU."""
    if not any(v.error_kind in ("capability", "scheme", "moe_scheme") for v in verdicts.values()):
        return "none"
    good = [v for v in pack_releases() if (q := release_quantization(v)) is not None
            and judge_release(q).error_kind == "none"]  # fmt: skip
    return describe_range(good) if good else "none"


def _float16_fix(read, verdicts, judge, facts: Facts) -> str:
    """'--dtype float16' when the refusal is the activation dtype and every candidate starts with float16."""
    if not any(v.error_kind == "act_dtype" for v in verdicts.values()) or facts.serve.dtype == FLOAT16_FIX:
        return "none"
    return "--dtype float16" if all(judge(r, dtype=FLOAT16_FIX).error_kind == "none" for r in read) else "none"


def _formats_here(release, capability: int | None, checkpoint: str | None, requested: str | None) -> str:
    """The methods the newest candidate release registers whose minimum capability this GPU meets (the other
    checkpoint formats it could serve; online shorthands left out), as 'name (SM x.y+)'."""
    quant = release_quantization(release.version)
    if capability is None or quant is None:
        return "none"
    online = quant.methods["online"].config_class if "online" in quant.methods else None  # not a checkpoint format
    here = [f"{m.name} (SM {m.min_capability / 10:.1f}+)" for m in quant.methods.values()
            if m.min_capability is not None and 0 <= m.min_capability <= capability
            and m.name not in (checkpoint, requested) and (online is None or m.config_class != online)]  # fmt: skip
    return ", ".join(sorted(here)) or "none"
