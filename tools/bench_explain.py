"""Cold timings of `kvdoctor explain` on long logs (issue 28's bars: a 5 MB log <= 0.8 s, a 20 MB log of 100k lines
<= 2 s, `.gz` read as it is), for this tree and optionally another, alternating runs.

    python tools/bench_explain.py [--base OTHER_TREE] [--repeat 5]

The logs are written here, the same every time: engine-stat records of a running server (`(APIServer pid=1) INFO
... Engine 000: Avg prompt throughput ...`) ending in an EngineCore traceback no rule knows (so every step of explain
runs, the message index and the similar reports included); 5 MB (21,307 lines) and 23.5 MB (100,005 lines), the
larger also gzip-compressed. Cold: a fresh kvdoctor cache each run (the parsed rules and signature literals are
rebuilt). Runs from a temporary directory with PYTHONPATH naming the tree: `python -m` run inside a checkout imports
that checkout first, whatever PYTHONPATH says.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAILURE = [
    "EngineCore encountered a fatal error.",
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 701, in run_engine_core',
    "    engine_core.run_busy_loop()",
    '  File "/usr/local/lib/python3.12/dist-packages/frobnicator/zap.py", line 12, in spin',
    '    raise FrobError("the flux capacitor wobbled at 88 mph")',
    "frobnicator.FrobError: the flux capacitor wobbled at 88 mph",
]


def engine_stats_log(lines: int) -> str:
    out = []
    for i in range(lines):
        out.append(f"(APIServer pid=1) INFO 05-20 14:{(i // 60) % 60:02d}:{i % 60:02d} [loggers.py:123] Engine 000: "
                   f"Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: {12 + (i % 100) / 100:.2f} "
                   "tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%, Prefix cache hit rate: 0.0%")
    out += [f"(EngineCore_DP0 pid=2) ERROR 05-20 15:03:01 [core.py:710] {line}" for line in FAILURE]
    return "\n".join(out) + "\n"


def write_logs(folder: Path) -> dict[str, Path]:
    small, large = folder / "5mb.log", folder / "23mb.log"
    small.write_text(engine_stats_log(21_300))
    large.write_text(engine_stats_log(99_998))
    packed = folder / "23mb.log.gz"
    packed.write_bytes(gzip.compress(large.read_bytes(), compresslevel=6))
    return {"5 MB log": small, "23 MB, 100k lines": large, "23 MB as .gz": packed}


def run_cold(tree: Path, log: Path, workdir: Path) -> float:
    cache = workdir / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "KVDOCTOR_CACHE_DIR": str(cache)}
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kvdoctor", "explain", str(log)], env=env, cwd=workdir,
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 1:  # the logs end in a failure: anything else is a broken run, not a timing
        sys.exit(f"bench_explain: error: {tree} exited {proc.returncode} on {log.name}: {proc.stderr.strip()[-300:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", type=Path, help="another kvdoctor checkout to time beside this one")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    trees = {"this": REPO, **({"base": args.base.resolve()} if args.base else {})}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        logs = write_logs(workdir)
        for tree in trees.values():  # bytecode compiled once, outside the timings
            run_cold(tree, logs["5 MB log"], workdir)
        times: dict[tuple[str, str], list[float]] = {(label, name): [] for label in logs for name in trees}
        for _ in range(args.repeat):
            for label, log in logs.items():
                for name, tree in trees.items():
                    times[(label, name)].append(run_cold(tree, log, workdir))
    print(json.dumps({"load": os.getloadavg(), "repeat": args.repeat, **{k: str(v) for k, v in trees.items()}}))
    for label in logs:
        cells = [f"{name} {statistics.median(times[(label, name)]):.3f} s (max {max(times[(label, name)]):.3f})"
                 for name in trees]
        print(f"{label:20s} " + "   ".join(cells))


if __name__ == "__main__":
    main()
