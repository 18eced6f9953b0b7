"""Benchmark: the full default matrix (every GPU in the table x every kv dtype the target vLLM accepts), cold and warm.

    python tools/bench_matrix.py [--vllm-source WHEEL] [--model DIR] [--workers N]

Cold = an empty compile cache; warm = the same run again. Prints one JSON line with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kvdoctor.check.run import CheckSettings  # noqa: E402
from kvdoctor.facts.collect import CheckOptions  # noqa: E402
from kvdoctor.commands.matrix import default_gpus, default_kv_dtypes, target_vllm_version  # noqa: E402
from kvdoctor.matrix import MatrixRequest, run_matrix  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    wheels = sorted(Path(os.environ.get("KVDOCTOR_VLLM_WHEELS", "/root/.cache/kvdoctor-wheels")).glob("vllm-0.25.1-*.whl"))
    parser.add_argument("--vllm-source", default=str(wheels[0]) if wheels else None)
    parser.add_argument("--model", default=str(REPO / "examples" / "qwen2.5-3b-instruct"))
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        request = MatrixRequest(
            model=args.model,
            gpus=default_gpus(),
            kv_cache_dtypes=default_kv_dtypes(target_vllm_version(None, args.vllm_source)),
            options=CheckOptions(model=args.model, vllm_source=args.vllm_source, cache_dir=Path(cache)),
            settings=CheckSettings(),
            workers=args.workers,
        )
        cold = run_matrix(request)
        warm = run_matrix(request)
    compiled = sum(1 for c in cold.cells if c.dry_run and not c.cached)
    print(json.dumps({
        "gpus": len(request.gpus), "kv_cache_dtypes": len(request.kv_cache_dtypes), "cells": len(cold.cells),
        "cells_compiled_cold": compiled, "workers": cold.workers, "cpu_count": os.cpu_count(),
        "cold_seconds": round(cold.seconds, 1), "warm_seconds": round(warm.seconds, 1),
        "vllm_version": cold.vllm_version, "verdicts": {v: sum(1 for c in cold.cells if c.verdict == v)
                                                         for v in ("PASS", "WARN", "FAIL", "ERROR")},
    }))  # fmt: skip


if __name__ == "__main__":
    main()
