"""Which attention backend a release before 0.20.0 picks on CUDA, looked up in vLLM's own answers (the pack).

The builder (builders/vllm_pack/child_backend_grid.py) asked these releases' selector over a grid of inputs and
stored only its answer (no per-backend reasons); this module finds the grid cells the inputs stand for and
reads the answer, undecided when the cells disagree or lie outside the grid.
"""

from __future__ import annotations

from dataclasses import replace

from kvdoctor.vllm_pack.release import ReleaseFacts
from kvdoctor.vllm_pack.selector import (
    Selection,
    SelectorInputs,
    cap_key,
    config_repr,
    constructor_error,
    layer_error,
    tree_has,
)
from kvdoctor.vllm_pack.store import load_selection, releases_with

_GRID_FLAGS = {"use_mm_prefix", "use_per_head_quant_scales", "use_non_causal", "use_batch_invariant",
               "use_kv_connector", "use_pcp", "use_dcp", "has_sliding_window"}


def _grid_cells(grid: dict, inputs: SelectorInputs) -> tuple[list[list] | None, str | None]:
    """Every grid cell these inputs stand for (several when vLLM's value is set at start-up), or (None, why)."""
    g, fields = grid["grid"], set(grid["params"]) | set(grid.get("config_fields") or ())
    cap = cap_key(inputs.capability)
    if cap not in g["capability"]:
        return None, f"capability {cap}: not among the capabilities the pack asked vLLM about"
    if inputs.attn_type != "decoder" and "attn_type" in fields:
        return None, f"attn_type {inputs.attn_type}: the pack asked vLLM about decoder layers only"
    for flag in sorted(_GRID_FLAGS & fields):
        if inputs.flag(flag):
            return None, f"{flag}: the pack asked vLLM's selector with it off only"
    forced = inputs.forced_backend.upper() if inputs.forced_backend else None
    values = {"capability": [cap], "forced": [forced], "use_mla": [inputs.use_mla], "use_sparse": [inputs.use_sparse],
              "head_size": [inputs.head_size], "dtype": [inputs.model_dtype], "kv_cache_dtype": [inputs.kv_cache_dtype],
              "has_sink": [inputs.has_sink]}
    for axis in ("use_sparse", "has_sink"):  # a release whose selector does not take it ignores it
        if g[axis] == [False]:
            values[axis] = [False]
    if inputs.block_size in g["block_size"] and (inputs.block_size is not None or "attn_selector_config" in fields):
        values["block_size"] = [inputs.block_size]
    elif inputs.block_size is None:  # 0.10-0.12 get the block size vLLM sets at start-up: every one it may be
        values["block_size"] = [b for b in g["block_size"] if b is not None]
    else:
        return None, f"block_size {inputs.block_size}: not among the sizes the pack asked vLLM about"
    heads = g["num_heads"]
    values["num_heads"] = [inputs.num_heads] if inputs.num_heads in heads else heads
    for axis in ("forced", "use_mla", "use_sparse", "head_size", "dtype", "kv_cache_dtype", "has_sink"):
        for value in values[axis]:
            if value not in g[axis]:
                return None, f"{axis} {value}: not among the values the pack asked vLLM about"
    cells = [[]]
    for axis in grid["axes"]:
        cells = [c + [v] for c in cells for v in values[axis]]
    return cells, None


def _grid_answer(grid: dict, cell: list) -> str | None:
    for index, tree in grid["trees"].items():
        if tree_has(tree, cell):
            return grid["answers"][int(index)]
    return None


def select_from_grid(release: ReleaseFacts, grid: dict, inputs: SelectorInputs) -> Selection:
    """The backend an older release picks, looked up in vLLM's own answers (no per-backend reasons stored)."""
    evidence = (f"{grid['where']} (vLLM {release.version}: its own answers over a grid of inputs)",)
    forced = inputs.forced_backend.upper() if inputs.forced_backend else None
    if forced is not None and forced not in grid["enum"]:
        message = (grid.get("unknown_backend") or "").replace("{name}", inputs.forced_backend) or None
        if message is None:
            return Selection(None, {}, None, (f"backend {forced}: not in vLLM {release.version}'s enum",), evidence)
        return Selection(None, {}, message, (), evidence, (), "unknown_backend")
    engine, why = _engine(grid, inputs, release.version)
    if why:
        return Selection(None, {}, None, (why,), evidence + (f"{grid['engine']['where']} (vLLM {release.version})",),
                         engine=None)
    if engine is not None:  # V0 starts: its own selector's answers decide
        chosen = select_from_grid(release, v0_grid(grid), inputs)
        started = (f"{grid['engine']['where']} (vLLM {release.version}: starts its V0 engine here, {engine}; "
                   f"the V0 selector's own answers over a grid of inputs)",)
        return replace(chosen, evidence=started + chosen.evidence, engine="V0")
    cells, why = _grid_cells(grid, inputs)
    if cells is None:
        return Selection(None, {}, None, (why,), evidence)
    answers = {_grid_answer(grid, c) for c in cells}
    if None in answers:
        return Selection(None, {}, None, ("the pack's grid has no answer for this cell",), evidence)
    if len(answers) > 1:
        return Selection(None, {}, None, ("vLLM's answer depends on the block size or head count it sets at start-up "
                                          f"({', '.join(sorted(a.split(':', 1)[1][:40] for a in answers))})",), evidence)
    answer = answers.pop()
    kind, _, value = answer.partition(":")
    if kind == "backend":
        raw = value.rsplit(".", 1)[-1] if "." in value else value
        guard = constructor_error(grid, raw, inputs)
        name = _canonical_backend(value, inputs.capability)
        if not guard:
            guard, why = layer_error(grid, raw, inputs, release.version)
            if why:
                return Selection(None, {}, None, (why,), evidence)
        if guard:
            evidence += (f"{guard[1]} (vLLM {release.version})",)
        return Selection(name, {}, guard[0] if guard else None, (), evidence, (), "constructor" if guard else None,
                         (name,))
    if kind != "error":
        return Selection(None, {}, None, (f"vLLM's selector answered {answer!r}",), evidence)
    if "{config" in value and grid.get("repr_template"):
        shown = {"selector_config": {"repr_template": grid["repr_template"], "fields": grid["config_fields"]}}
        value = value.replace("{config}", config_repr(shown, inputs)).replace(
            "{config_no_block}", config_repr(shown, replace(inputs, block_size=None)))
    if inputs.device_name:
        value = value.replace("{device_name}", inputs.device_name)
    return Selection(None, {}, value, (), evidence, (), "forced_invalid" if forced else "no_valid_backend")


def v0_grid(grid: dict) -> dict | None:
    """The V0 engine's side of a release's grid (0.7-0.10: its selector asked with `use_v1=False`), in the same form
    as the grid (the enum, parameters and messages shared); None when the release has no V0 grid."""
    if "v0" not in grid:
        return None
    # V1's layer probes are not V0's: a V0 backend's layer features stay undecided
    return {**{k: v for k, v in grid.items() if k not in ("engine", "v0", "layer_guards")}, **grid["v0"]}


def _engine(grid: dict, inputs: SelectorInputs, version: str) -> tuple[str | None, str | None]:
    """(V0 reason, None) when the release starts its V0 engine here (0.8-0.10 have both: their own
    `_is_v1_supported_oracle` decides per configuration; 0.7 starts V0 unless VLLM_USE_V1=1), (None, None) when it
    starts V1 or has no V0, (None, why undecided) when the pack cannot say or did not read V0's selector."""
    engine = grid.get("engine")
    if engine is None:
        return None, None
    values = {"capability": cap_key(inputs.capability), "forced": (inputs.forced_backend or "-").upper(),
              "use_mla": str(int(inputs.use_mla)), "kv_cache_dtype": inputs.kv_cache_dtype,
              "dtype": inputs.model_dtype}
    key = "|".join(values[k] for k in engine.get("key", ("capability", "forced", "use_mla", "kv_cache_dtype")))
    answer = next((a for a, cells in engine["answers"].items() if key in cells or "*" in cells), None)
    env = inputs.use_v1_env
    if env is not None and env.strip() == "0":  # vLLM reads bool(int(...)): V0 whatever the oracle says
        return "VLLM_USE_V1=0 is set", None
    if env is not None and env.strip() == "1":
        if answer == "V1" or "*" in engine["answers"].get(answer or "", ()):  # 0.7: V1 on request
            return None, None
        return None, (f"VLLM_USE_V1=1 is set and vLLM {version}'s oracle falls back to V0 here ({answer}): vLLM "
                      "refuses to start instead (its _raise_or_fallback), in words the pack did not record")
    if env is not None:
        return None, f"VLLM_USE_V1={env!r}: not a value the pack models (0 or 1)"
    if answer == "V1":
        return None, None
    if answer is None or answer.startswith("error"):
        return None, (f"vLLM {version} picks its V0 or V1 engine per configuration; the pack did not ask its oracle "
                      f"about this one ({answer or key})")
    reason = answer.removeprefix("V0: ")
    if "v0" not in grid:
        return None, (f"vLLM {version} starts its V0 engine here ({reason}); the pack reads only its V1 attention "
                      "selector, so the V0 backend (XFormers, FlashAttention V0, ...) is not judged")
    return reason, None


def _canonical_backend(value: str, capability: tuple[int, int]) -> str:
    """The backend's name as vLLM 0.11+ and rules.yaml spell it: 0.10.x answers `TRITON_ATTN_VLLM_V1` (its V1
    engine's name for TRITON_ATTN) or a class path (`...flashinfer.FlashInferBackend`: FLASHINFER)."""
    if "." in value:
        full = releases_with("backend_replay")
        classes = (load_selection(full[0], capability) or {}).get("classes", {}) if full else {}
        cls = value.rsplit(".", 1)[-1]
        return next((n for n, c in classes.items() if c.get("path", "").rsplit(".", 1)[-1] == cls), cls)
    return value.removesuffix("_VLLM_V1")
