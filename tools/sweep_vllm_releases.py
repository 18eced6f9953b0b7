"""Dry-run every vLLM release's TurboQuant kernels for Ampere and Hopper; prints a Markdown table.

    python tools/sweep_vllm_releases.py 0.20.0 0.20.1 ... [--wheels DIR]

Downloads each wheel with `pip download --no-deps` into DIR (default $KVDOCTOR_VLLM_WHEELS or
~/.cache/kvdoctor/wheels) when it is missing. Nothing from the wheels is kept in the repository.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from kvdoctor.dryrun import DryRunRequest, run_dry_runs

CASES = [
    ("turboquant_k8v4", "bfloat16", (8, 0)),
    ("turboquant_k8v4", "float16", (8, 0)),
    ("turboquant_k8v4", "bfloat16", (9, 0)),
    ("turboquant_4bit_nc", "bfloat16", (8, 0)),
]


def wheel_for(version: str, directory: Path) -> Path | None:
    found = sorted(directory.glob(f"vllm-{version}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"vllm=={version}", "-d", str(directory)],
                       check=False)  # fmt: skip
        found = sorted(directory.glob(f"vllm-{version}-*.whl"))
    return found[0] if found else None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("versions", nargs="+")
    parser.add_argument("--wheels", default=os.environ.get("KVDOCTOR_VLLM_WHEELS", str(Path.home() / ".cache/kvdoctor/wheels")))
    options = parser.parse_args()
    directory = Path(options.wheels)
    directory.mkdir(parents=True, exist_ok=True)
    header = " | ".join(f"{kv.removeprefix('turboquant_')} {dtype[:4]} sm_{cap[0]}{cap[1]}" for kv, dtype, cap in CASES)
    print(f"| vLLM | {header} |\n|---|" + "---|" * len(CASES))
    with tempfile.TemporaryDirectory() as cache:
        for version in options.versions:
            wheel = wheel_for(version, directory)
            if wheel is None:
                print(f"| {version} | " + " | ".join(["no wheel"] * len(CASES)) + " |", flush=True)
                continue
            requests = [DryRunRequest(kv, dtype, 128, 2, cap, vllm_source=str(wheel)) for kv, dtype, cap in CASES]
            cells = []
            for report in run_dry_runs(requests, cache_dir=Path(cache)):
                kind = report.failure_kind
                cells.append(report.status + (f" ({kind})" if kind else ""))
            print(f"| {version} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
