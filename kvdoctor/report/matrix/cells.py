"""Words and numbers every matrix format shows the same way (not itself a format)."""

from __future__ import annotations

from kvdoctor.matrix.grid import Cell, Matrix


def rule_ids(cell: Cell, states: tuple[str, ...] = ("fired",)) -> list[str]:
    return [rule for rule, _, state in cell.rules if state in states]


def reasons(cell: Cell) -> list[str]:
    """What makes the verdict: fired rule ids, then undecided ones marked '?' (a WARN may rest on those alone)."""
    return rule_ids(cell) + [f"{rule}?" for rule in rule_ids(cell, ("undecided",))]


def version_label(matrix: Matrix) -> str:
    return f"vLLM {matrix.vllm_version}" if matrix.vllm_version else "vLLM version unknown (judged against every release kvdoctor read)"


def compile_label(matrix: Matrix) -> str:
    """What the dry runs compiled, said as it was: vLLM's own kernels, kvdoctor's probe kernel, or nothing."""
    sources = {c.dry_run_source for c in matrix.cells if c.dry_run_source}
    if sources == {"vllm"}:
        return "real dry-run compiles of vLLM's own kernels"
    if sources == {"probe"}:
        return "dry-run compiles of kvdoctor's probe kernel (not vLLM's own kernels: no wheel of this release at hand)"
    if sources:
        return "dry-run compiles of vLLM's own kernels where a wheel was at hand, kvdoctor's probe kernel elsewhere"
    return "no dry-run compiles (none ran)"


def short_count(n: float) -> str:
    """1234567 -> '1.23M'."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.0f}"


def capacity_text(cell: Cell) -> str:
    """Tokens and concurrent requests as check's fit facts give them (vLLM's own log figures)."""
    cap = cell.capacity
    if cap is None or cap.fit == "not_modelled" or cap.fit is None and cap.tokens is None:
        return "capacity n/a"
    if cap.tokens is None:  # the judged releases agree on the fit, not on the size (no --vllm-version)
        return f"{cap.fit.replace('_', ' ')}; size differs by release"
    if cap.fit == "no_memory":
        return "no KV memory left"
    seqs = f" / {cap.max_concurrency:.2f} seq" if cap.max_concurrency is not None else ""
    short = " (< 1 request)" if cap.fit == "does_not_fit" else ""
    if cap.fit == "within_band":  # WARN: the budget's error band decides whether one request fits
        short = f" (1 request fits at one edge of the +-{cap.band_gib or 0:g} GiB band, not the other)"
    return f"{short_count(cap.tokens)} tok{seqs}{short}"


def capacity_detail(cell: Cell) -> str:
    """One line for a tooltip or a note: the fit, vLLM's log lines, or why the fit was not judged."""
    cap = cell.capacity
    if cap is None:
        return "fit not judged"
    if cap.why_not:
        return f"fit not judged: {cap.why_not}"
    parts = [f"fit {cap.fit or 'undecided (releases disagree)'}"]
    if cap.kv_budget_gib is not None:
        parts.append(f"{cap.kv_budget_gib:g} +- {cap.band_gib or 0:g} GiB for the KV cache")
    if cap.kv_bytes_per_token is not None:
        parts.append(f"{cap.kv_bytes_per_token:g} KV bytes/token")
    if cap.vllm_log:
        parts.append(cap.vllm_log)
    if cap.fitting_max_model_len:
        parts.append(f"fits up to --max-model-len {cap.fitting_max_model_len}")
    return "; ".join(parts)


def gpu_label(cell: Cell) -> str:
    sm = f" (SM {cell.capability:.1f})" if cell.capability is not None else ""
    return f"{cell.gpu_name or cell.gpu}{sm}"
