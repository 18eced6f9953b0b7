"""Modelled inputs asked both ways (issue 27): a release whose wheel does not require flashinfer-cubin is read with
FlashInfer's TRT-LLM cubins absent (no stand-in, vLLM's artifactory probe answering False); the official image
installs flashinfer-cubin, so the builder asks the release's attention backends a second time with the cubins
present and stores what differs. The runtime reads that variant for a target with the cubins (the default) and
the first read for `--target-package flashinfer-cubin=absent` (kvdoctor/vllm_pack/release.py: modelled_variant).
"""
from __future__ import annotations

from kvdoctor.vllm_pack.store import apply_variant

NOTE = ("the release's wheel does not require flashinfer-cubin: its first read has FlashInfer's TRT-LLM cubins "
        "absent (no stand-in; vLLM's has_nvidia_artifactory answers False, the builder reaches no network); "
        "`variants` holds what vLLM's attention backends answer with them present (a flashinfer_cubin stand-in, "
        "has_nvidia_artifactory answering True), as the official vllm/vllm-openai image installs it")

__all__ = ["NOTE", "add_variants", "apply_variant", "backends_diff", "make_patch", "variant_requests"]


def variant_requests(request: dict) -> list[tuple[str, dict]]:
    """(variant name, child request) for each modelled input the first read did not have: the backends task
    again with flashinfer-cubin present where the wheel does not require it (releases with a replay only)."""
    if request.get("legacy") or "module:backends" not in request["tasks"]:
        return []
    stubs = request["stub_packages"]
    if "flashinfer_cubin" in stubs:
        return []
    return [("flashinfer-cubin=present", {
        **request, "tasks": ["module:backends"],
        "stub_packages": {**stubs, "flashinfer_cubin": stubs.get("flashinfer", "0")},
        "modelled_inputs": {"flashinfer-cubin": "present"}})]


def backends_diff(base: dict, other: dict) -> dict:
    """What `other` (a release's `backends` facts asked with another modelled input) changes in `base`: per
    capability the answer sets of the backends whose answers differ, and each other part that differs whole."""
    per: dict = {}
    for cap, names in sorted(other["per_capability"].items()):
        for name, index in sorted(names.items()):
            answers = other["answer_sets"][index]
            mine = base["per_capability"].get(cap, {}).get(name)
            if mine is None or base["answer_sets"][mine] != answers:
                per.setdefault(cap, {})[name] = answers
    patch = {key: make_patch(base.get(key), value, PATCH_DEPTH) for key, value in sorted(other.items())
             if key not in ("per_capability", "answer_sets") and value != base.get(key)}
    gone = [key for key in base if key not in other]
    if gone:
        raise ValueError(f"a variant lacks parts of the first read: {gone}")
    diff = {"per_capability": per, "patch": patch}
    if apply_variant(base, diff)["per_capability"].keys() != other["per_capability"].keys():
        raise ValueError("a variant asked other capabilities than the first read")
    return diff


PATCH_DEPTH = 3
"""How deep a differing part is patched rather than stored whole (layer_guards -> refusals -> backend)."""


def make_patch(base, other, depth: int) -> dict:
    """A patch node turning `base` into `other` (kvdoctor/vllm_pack/store.py: apply_patch)."""
    if depth == 0 or not isinstance(base, dict) or not isinstance(other, dict):
        return {"=": other}
    node: dict = {}
    changed = {key: make_patch(base.get(key), value, depth - 1) for key, value in sorted(other.items())
               if key not in base or base[key] != value}
    if changed:
        node["~"] = changed
    dropped = sorted(key for key in base if key not in other)
    if dropped:
        node["-"] = dropped
    return node


def add_variants(data: dict, variants: dict[str, dict]) -> None:
    """Store each variant's differences (normalised `variants`: name -> that read's pack data) in `data`."""
    stored, samples, errors = {}, {}, {}
    for name, alt in sorted(variants.items()):
        if "backends" not in alt or "backends" not in data:
            errors[f"{name}:module:backends"] = (alt.get("build_errors") or {}).get(
                "module:backends", "no backends answers")
            continue
        stored[name] = {"backends": backends_diff(data["backends"], alt["backends"])}
        samples[name] = alt.get("samples", [])
    if errors:
        data.setdefault("build_errors", {}).update(errors)
    if not stored:
        return
    data["variants"] = stored
    data["variant_samples"] = samples
    data["modelled_inputs"] = {"read": {"flashinfer-cubin": "absent"}, "variants": sorted(stored), "note": NOTE}
