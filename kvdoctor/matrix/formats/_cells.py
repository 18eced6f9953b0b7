"""Words and numbers every matrix format shows the same way (not itself a format)."""

from __future__ import annotations

from kvdoctor.matrix.grid import Cell


def rule_ids(cell: Cell, states: tuple[str, ...] = ("fired",)) -> list[str]:
    return [rule for rule, _, state in cell.rules if state in states]


def short_count(n: float) -> str:
    """1234567 -> '1.23M'."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return f"{n:.0f}"


def capacity_text(cell: Cell) -> str:
    cap = cell.capacity
    if cap is None:
        return "capacity n/a"
    if cap.tokens == 0:
        return "weights do not fit"
    seqs = f" / {cap.max_concurrent_seqs:.1f} seq" if cap.max_concurrent_seqs is not None else ""
    return f"{short_count(cap.tokens)} tok{seqs}"


def gpu_label(cell: Cell) -> str:
    sm = f" (SM {cell.capability:.1f})" if cell.capability is not None else ""
    return f"{cell.gpu_name or cell.gpu}{sm}"
