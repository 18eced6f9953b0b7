"""Which attention backend vLLM would pick for these facts, simulated from the release's own checks (the pack).

The answer is a set of `attention.*` facts; rules.yaml says why in people's words. When the vLLM version is
unknown, a fact is decided only if every release the pack read gives the same answer.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvdoctor.data.fact_names import fact_registry
from kvdoctor.model.facts import ANY_RELEASE, Facts
from kvdoctor.vllm_pack.candidates import Candidates, agree


# attention.error_kind as words, for a release split
_OUTCOMES = {"none": "starts", "no_valid_backend": "no valid backend", "forced_invalid": "refuses the forced backend",
             "unknown_backend": "does not know the forced backend", "constructor": "a backend's constructor refuses it"}


def attention_facts(facts: Facts, releases: Candidates) -> dict[str, Any]:
    """attention.* facts; all unknown when an input the selector needs is unknown."""
    inputs = selector_inputs(facts)
    unknown = dict.fromkeys(fact_registry().names(produced_by="attention"))
    unknown["attention.forced"] = facts.serve.attention_backend or "auto"
    unknown["attention.gpu_generation"] = gpu_generation(facts)
    if inputs is None or not releases.releases:
        forced = _unknown_forced_backend(facts.serve.attention_backend, releases)
        if forced and (undecided := _of_a_build_of_any_age(facts, facts.serve.attention_backend, forced)):
            return unknown | undecided
        return unknown | forced
    from kvdoctor.vllm_pack.select import select_backend

    selections = {r.version: select_backend(r, inputs) for r in releases.releases}
    backend = agree(releases.releases, lambda r: selections[r.version].backend or "none")
    error = agree(releases.releases, lambda r: selections[r.version].error or "none")
    kind = agree(releases.releases, lambda r: selections[r.version].error_kind or "none")
    if kind.value == "unknown_backend" and (undecided := _of_a_build_of_any_age(
            facts, inputs.forced_backend, _unknown_forced_backend(inputs.forced_backend, releases))):
        return unknown | undecided
    newest = selections[releases.releases[-1].version]
    picked_by = "; ".join(f"{value}: {span}" for value, span in backend.split) if len(backend.split) > 1 else None
    if facts.versions.vllm_source == "installed" and facts.versions.flashinfer is None and any(
        (s.backend or "").startswith("FLASHINFER") for s in selections.values()
    ):  # the pack assumes the CUDA wheel's hard dependency; this installation lacks it
        why = ("vLLM would pick FlashInfer, which is not installed here (decided by installing the flashinfer-python "
               "your vLLM pins, or by judging the target image with --vllm-version and --target-package)")
        return unknown | {"attention.picked_by": why, "attention.undecided": why}
    assumes, mismatch = modelled_dependency(facts, releases, selections, inputs)
    if mismatch:
        return unknown | {"attention.reasons": _reasons(newest), "attention.picked_by": mismatch,
                          "attention.undecided": mismatch, "attention.assumes": assumes}
    if any(getattr(s, "undecided", ()) for s in selections.values()):
        undecided = "; ".join(sorted({_with_what_decides(u) for s in selections.values() for u in s.undecided}))
        return unknown | {"attention.reasons": _reasons(newest), "attention.picked_by": undecided,
                          "attention.undecided": undecided}
    from kvdoctor.vllm_pack.select import quantizes_query

    query_quant = agree(releases.releases, lambda r: quantizes_query(r, selections[r.version].backend, inputs)).value
    auto = None
    if inputs.forced_backend:
        unforced = replace(inputs, forced_backend=None)
        auto = agree(releases.releases, lambda r: select_backend(r, unforced).backend or "none").value
    return {
        "attention.backend": backend.value,
        "attention.error": error.value,
        "attention.error_kind": kind.value,
        "attention.auto_backend": auto,
        "attention.kv_dtypes_that_work": _working_kv_dtypes(releases, inputs) if kind.value not in (None, "none") else None,
        "attention.forced": facts.serve.attention_backend or "auto",
        "attention.reasons": _reasons(newest),
        "attention.picked_by": picked_by,
        "attention.evidence": ", ".join(getattr(newest, "evidence", ()) or ()) or None,
        "attention.quantizes_query": query_quant,
        "attention.gpu_generation": gpu_generation(facts),
        "attention.assumes": assumes,
        "attention.engine": agree(releases.releases, lambda r: selections[r.version].engine).value,
        "attention.undecided": "none" if kind.value is not None else "vLLM's outcome depends on the release: " + "; ".join(
            f"{_OUTCOMES.get(value, value)}: {span}" for value, span in kind.split) + " (decided by --vllm-version "
            "naming the release you run)",
        **(_unknown_forced_backend(inputs.forced_backend, releases) if kind.value == "unknown_backend" else {}),
    }


def modelled_dependency(facts: Facts, releases: Candidates, selections: dict, inputs) -> tuple[str, str | None]:
    """(the modelled target packages this answer depends on, in words, or 'none'; why it is undecided when a release
    was read with another value of one of them than the target's, else None). kvdoctor/model/modelled.py names them."""
    from kvdoctor.model.modelled import INPUTS
    from kvdoctor.vllm_pack.release import pack_values

    depends: dict[str, None] = {}
    differ: dict[str, list[str]] = {}
    for release in releases.releases:
        selection = selections[release.version]
        for name in _depends_on(inputs, selection):
            depends[name] = None
            if facts.targets.value(name) not in pack_values(release, name):
                differ.setdefault(name, []).append(release.version)
    assumes = "; ".join(facts.targets.describe(n) for n in depends) or "none"
    if not differ:
        return assumes, None
    why = []
    for name, versions in differ.items():
        entry, target = INPUTS[name], facts.targets.value(name)
        built = "absent" if target == "present" else "present"
        how = "stated" if facts.targets.is_stated(name) else "assumed: the official vllm/vllm-openai image has it"
        why.append(f"vLLM's choice here depends on {entry.asks}; the pack read vLLM {_span(versions)} with {name} "
                   f"{built}, and the target has it {target} ({how}); --target-package {name}={built} judges an image "
                   f"like the pack's")
    return assumes, "; ".join(why)


def pack_value(release, name: str) -> str:
    """The value of a modelled input the pack builder read `release` with first (vllm_pack/release.py:
    pack_values also names the values it asked vLLM with again, e.g. flashinfer-cubin present for 0.26.0+)."""
    from kvdoctor.vllm_pack.release import pack_values

    return pack_values(release, name)[0]


def _depends_on(inputs, selection) -> tuple[str, ...]:
    """The modelled inputs whose value could change this selection (vllm/v1/attention/backends/flashinfer.py:
    supports_kv_cache_dtype for nvfp4, supports_sink, get_supported_kernel_block_sizes; has_flashinfer)."""
    forced = (inputs.forced_backend or "").upper()
    chosen = selection.backend or ""
    out = []
    major = inputs.capability[0]
    trtllm = ((major == 10 and inputs.kv_cache_dtype.startswith("nvfp4")) or (inputs.has_sink and major in (9, 10, 12))
              or (major == 10 and (inputs.block_size or 0) >= 128))
    if trtllm and not inputs.use_mla:
        if forced:
            ahead = forced == "FLASHINFER"
        elif selection.priorities:  # FlashInfer tried at or before the backend picked (or none was valid)
            order = list(selection.priorities)
            stop = order.index(chosen) + 1 if chosen in order else len(order)
            ahead = "FLASHINFER" in order[:stop]
        else:  # a grid release: no priority list recorded
            ahead = True
        if ahead:
            out.append("flashinfer-cubin")
    if (forced or chosen).startswith("FLASHINFER"):
        out.append("flashinfer")
    return tuple(out)


def _span(versions: list[str]) -> str:
    return versions[0] if len(versions) == 1 else f"{versions[0]}-{versions[-1]} ({len(versions)} releases)"


# what decides each kind of undecided selection, in words with the flag (issue 27): the pack's reasons name the input
_WHAT_DECIDES = (
    ("the pack did not probe vLLM .*'s constructors with these layer features",
     "--vllm-version 0.20.0 or later, whose constructors the pack probed with layer features"),
    ("TurboQuant KV-cache spec with sliding-window layers",
     "no flag: a real start-up (kvdoctor verify on the running server); --kv-cache-dtype auto or fp8 is judged here"),
    ("constructors could not be probed here",
     "no flag: vLLM's constructor would not build on the pack builder's CPU; a real start-up decides it"),
    ("^capability ", "--gpu naming a GPU of SM 7.0-12.1, the capabilities the pack asked vLLM about"),
    ("^head_size ", "no flag: the head size comes from config.json, and vLLM was not asked about this one"),
    ("^block_size ", "a --block-size vLLM was asked about, or none (vLLM's default)"),
    ("^kv_cache_dtype ", "a --kv-cache-dtype the release accepts and the pack asked about (one the release does not "
                         "accept is a finding of its own)"),
    ("^num_heads", "the model's attention heads (config.json) over --tensor-parallel-size, as vLLM splits them"),
    ("supports_combination: block_size=", "a --block-size vLLM was asked about, or none (vLLM's default)"),
    ("supports_combination: .* is outside the grid", "no flag: vLLM was not asked about this value"),
    ("block size or head count it sets at start-up", "--block-size given explicitly (vLLM picks one at start-up "
                                                      "otherwise)"),
    ("needs run-time state", "no flag: vLLM decides it at start-up from run-time state"),
    ("starts its V0 engine", "--vllm-version 0.11.2 or later (V1 only); vLLM 0.10.2's V0 selector is not read"),
    ("picks its V0 or V1 engine", "--vllm-version 0.11.2 or later (V1 only)"),
    ("^backend .*: not in vLLM", "--attention-backend naming a backend of this release (or none)"),
)


def _with_what_decides(reason: str) -> str:
    """The pack's reason with what would decide it, in words, when kvdoctor knows."""
    import re

    for pattern, decides in _WHAT_DECIDES:
        if re.search(pattern, reason):
            return f"{reason} (decided by {decides})"
    return reason


def gpu_generation(facts: Facts) -> str | None:
    """The deciding GPU's architecture generation from data/gpus.yaml (`generations`), or None when unknown."""
    gpu = facts.gpu.weakest
    if gpu is None or gpu.capability is None:
        return None
    from kvdoctor.base.yaml_safe import load_yaml_cached
    from kvdoctor.data import read_data

    table = load_yaml_cached(read_data("gpus.yaml"), "gpus.yaml").get("generations", {})
    major, minor = gpu.capability
    return table.get(f"{major}.{minor}") or table.get(str(major))


def _of_a_build_of_any_age(facts: Facts, name: str, unknown_backend: dict[str, Any]) -> dict[str, str] | None:
    """For a vLLM of any age (a build of no known release), why a forced backend the judged releases do not know is
    undecided: an older release knew it, or no release knew it nor a name close to it, or it extends a known name
    with a suffix (a backend the build itself adds, as a fork's image does); None when it stays an error (a
    misspelling of a known name)."""
    if older := _older_releases_knowing(facts, name):
        return _known_to_older(name, older)
    closest = [s.strip() for s in unknown_backend.get("attention.forced_suggestion", "none").split(",")]
    variant = next((s for s in closest if s != "none" and name.startswith(s + "_")), None)
    if facts.versions.vllm is not None or facts.versions.vllm_source != ANY_RELEASE or (closest != ["none"] and not variant):
        return None
    near = f"; it extends {variant} as a fork's own variant does (FLASH_ATTN_V100)" if variant else ", nor a name close to it"
    why = (f"no vLLM release kvdoctor read knows the forced backend {name}{near}: a backend this build adds (a fork "
           "of vLLM), or a wrong name (decided by --vllm-version naming the release the image runs)")
    return {"attention.picked_by": why, "attention.undecided": why}


def _known_to_older(name: str, older: str) -> dict[str, str]:
    why = (f"vLLM {older} knew the forced backend {name}, the releases judged here do not; this build's vLLM is of "
           "any age (decided by --vllm-version naming the release it runs)")
    return {"attention.picked_by": why, "attention.undecided": why}


def _older_releases_knowing(facts: Facts, name: str | None) -> str | None:
    """For a vLLM of any age (a build of no known release), the releases the pack read that know a forced backend the
    judged ones do not (TRITON_ATTN_VLLM_V1: 0.8.5-0.10.2), as a range; None otherwise."""
    if not name or facts.versions.vllm is not None or facts.versions.vllm_source != ANY_RELEASE:
        return None
    from kvdoctor.vllm_pack.candidates import describe_range
    from kvdoctor.vllm_pack.release import load_release
    from kvdoctor.vllm_pack.select import forced_backend_unknown
    from kvdoctor.vllm_pack.store import pack_releases

    knowing = [v for v in pack_releases()
               if (r := load_release(v)) is not None and forced_backend_unknown(r, name)[0] is False]
    return describe_range(knowing) if knowing else None


def _unknown_forced_backend(name: str | None, releases: Candidates) -> dict[str, Any]:
    """attention.* facts for a forced backend no candidate release knows: vLLM stops on the name itself, whatever
    the GPU or model, so this is decided even when they are unknown. {} when some release knows the name."""
    if not name or not releases.releases:
        return {}
    from kvdoctor.vllm_pack.select import forced_backend_unknown

    answers = {r.version: forced_backend_unknown(r, name) for r in releases.releases}
    if not all(unknown for unknown, _, _ in answers.values()):
        return {}
    newest = releases.releases[-1].version
    message = agree(releases.releases, lambda r: answers[r.version][1]).value
    if message is None and answers[newest][1]:  # each release lists its own valid options
        message = f"{answers[newest][1]} (vLLM {newest}'s words; each release lists its own valid options)"
    import difflib

    known = sorted({n for _, _, enum in answers.values() for n in enum})
    close = difflib.get_close_matches(name.upper(), known, n=3, cutoff=0.6)
    return {"attention.backend": "none", "attention.error_kind": "unknown_backend", "attention.error": message,
            "attention.forced": name, "attention.forced_suggestion": ", ".join(close) or "none",
            "attention.evidence": f"AttentionBackendEnum of vLLM {releases.releases[0].version}-{newest}, as the pack "
                                  "read it from each release"}


def _working_kv_dtypes(releases: Candidates, inputs) -> str | None:
    """KV-cache dtypes for which every candidate release finds a backend (same GPU, model, forced backend)."""
    from kvdoctor.vllm_pack.select import select_backend

    common = [v for v in releases.releases[-1].kv_cache_dtypes if all(v in r.kv_cache_dtypes for r in releases.releases)]
    working = [
        kv for kv in common
        if kv != inputs.kv_cache_dtype
        and all(_serves(select_backend(r, replace(inputs, kv_cache_dtype=kv))) for r in releases.releases)
    ]
    return ", ".join(working) if working else "none"


def _serves(selection) -> bool:
    return bool(selection.backend) and not selection.error  # a constructor guard refuses a picked backend too


def selector_inputs(facts: Facts):
    """vLLM's AttentionSelectorConfig for these facts, or None when one it needs is unknown."""
    from kvdoctor.vllm_pack.select import SelectorInputs

    gpu, model, serve = facts.gpu.weakest, facts.model, facts.serve
    if gpu is None or gpu.capability is None or model is None or model.dtype is None or model.head_dim is None:
        return None
    return SelectorInputs(
        capability=gpu.capability,
        head_size=model.head_dim,
        model_dtype=model.dtype,
        kv_cache_dtype=serve.kv_cache_dtype,
        block_size=serve.block_size,
        use_mla=bool(model.is_mla),
        has_sink=bool(model.has_sinks),
        use_sparse=bool(model.is_sparse),
        attn_type="decoder",
        forced_backend=serve.attention_backend,
        sliding_window=model.sliding_window or None,
        num_heads=max(1, model.num_attention_heads // serve.tensor_parallel_size) if model.num_attention_heads else None,
        device_name=gpu.name,
        # (the model facts carry these when config.json declares them: Gemma 2's soft cap, ALiBi models)
        logits_soft_cap=getattr(model, "logits_soft_cap", None) or None,
        use_alibi=bool(getattr(model, "use_alibi", False)),
        use_v1_env=dict(serve.env).get("VLLM_USE_V1"),  # 0.7-0.10 pick their engine with it
        flashinfer_cubin=facts.targets.value("flashinfer-cubin"),  # the pack's answers asked with that value
    )


def _reasons(selection) -> str | None:
    reasons = getattr(selection, "reasons", None) or {}
    if not reasons:
        return None
    return "; ".join(f"{name}: {', '.join(why)}" for name, why in reasons.items())
