"""Matrix as CSV: one row per (GPU, KV-cache dtype) cell, for spreadsheets."""

from __future__ import annotations

import csv
import io

from kvdoctor.report.matrix.cells import rule_ids
from kvdoctor.matrix.grid import Matrix

COLUMNS = ("gpu", "gpu_name", "capability", "memory_gib", "kv_cache_dtype", "verdict", "rules_fired", "rules_undecided",
           "rules_ignored", "dry_run", "compile_seconds", "cached", "kv_bytes_per_token", "tokens_fit",
           "max_concurrent_seqs", "error")  # fmt: skip


def render(matrix: Matrix, verbose: bool = False) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for c in matrix.cells:
        cap = c.capacity
        writer.writerow([
            c.gpu, c.gpu_name or "", "" if c.capability is None else f"{c.capability:.1f}", c.memory_gib or "",
            c.kv_cache_dtype, c.verdict, " ".join(rule_ids(c)), " ".join(rule_ids(c, ("undecided",))),
            " ".join(rule_ids(c, ("ignored",))), c.dry_run or "", f"{c.compile_seconds:.3f}", c.cached,
            "" if cap is None else f"{cap.kv_bytes_per_token:g}", "" if cap is None else cap.tokens,
            "" if cap is None or cap.max_concurrent_seqs is None else f"{cap.max_concurrent_seqs:.2f}", c.error or "",
        ])  # fmt: skip
    return buffer.getvalue()
