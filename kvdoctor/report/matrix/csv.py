"""Matrix as CSV: one row per (GPU, KV-cache dtype) cell, for spreadsheets."""

from __future__ import annotations

import csv
import io

from kvdoctor.report.matrix.cells import rule_ids
from kvdoctor.matrix.grid import Matrix

COLUMNS = ("gpu", "gpu_name", "capability", "memory_gib", "kv_cache_dtype", "verdict", "rules_fired", "rules_undecided",
           "rules_ignored", "dry_run", "compile_seconds", "cached", "fit", "kv_budget_gib", "band_gib",
           "kv_bytes_per_token", "tokens_fit", "max_concurrent_seqs", "max_model_len", "fit_not_judged", "error")  # fmt: skip


def render(matrix: Matrix, verbose: bool = False) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for c in matrix.cells:
        cap = c.capacity

        def num(value) -> str:
            return "" if value is None else f"{value:g}"

        writer.writerow([
            c.gpu, c.gpu_name or "", "" if c.capability is None else f"{c.capability:.1f}", c.memory_gib or "",
            c.kv_cache_dtype, c.verdict, " ".join(rule_ids(c)), " ".join(rule_ids(c, ("undecided",))),
            " ".join(rule_ids(c, ("ignored",))), c.dry_run or "", f"{c.compile_seconds:.3f}", c.cached,
            "" if cap is None else cap.fit or "", num(cap and cap.kv_budget_gib), num(cap and cap.band_gib),
            num(cap and cap.kv_bytes_per_token), "" if cap is None or cap.tokens is None else cap.tokens,
            num(cap and cap.max_concurrency), "" if cap is None or cap.max_model_len is None else cap.max_model_len,
            "" if cap is None else cap.why_not or "", c.error or "",
        ])  # fmt: skip
    return buffer.getvalue()
