"""Matrix as JSON: every cell with its verdict, rules, dry run and capacity; assumptions stated."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from kvdoctor import __version__
from kvdoctor.matrix.grid import Matrix

MATRIX_SCHEMA_VERSION = "2.0"  # 2.0: capacity is check's fit facts (free_bytes gone)


def to_dict(matrix: Matrix) -> dict[str, Any]:
    cells = []
    for cell in matrix.cells:
        entry = asdict(cell)
        entry["rules"] = [{"rule_id": r, "severity": s, "status": st} for r, s, st in cell.rules]
        if cell.capacity is not None:  # 1.x's name for the concurrency, kept for readers of it
            entry["capacity"]["max_concurrent_seqs"] = cell.capacity.max_concurrency
        cells.append(entry)
    return {
        "schema_version": MATRIX_SCHEMA_VERSION,
        "tool": {"name": "kvdoctor", "version": __version__},
        "command": "matrix",
        "model": matrix.model,
        "vllm_version": matrix.vllm_version,
        "gpus": list(matrix.gpus),
        "kv_cache_dtypes": list(matrix.kv_cache_dtypes),
        "gpu_memory_utilization": matrix.gpu_memory_utilization,
        "max_model_len": matrix.max_model_len,
        "weights": {"bytes": matrix.weights_bytes, "source": matrix.weights_source},
        "seconds": round(matrix.seconds, 3),
        "workers": matrix.workers,
        "assumptions": list(matrix.assumptions),
        "cells": cells,
    }


def render(matrix: Matrix, verbose: bool = False) -> str:
    return json.dumps(to_dict(matrix), indent=2) + "\n"
