"""Paired timings of this tree against another checkout of kvdoctor: the same commands, alternating runs, medians.

    python tools/bench_paired.py BASE_TREE [--repeat 9]      # BASE_TREE: e.g. `git worktree add /tmp/base a9cccbc`

Each tree runs with its own warm kvdoctor cache (copies of ~/.cache/kvdoctor, wheels linked): kvdoctor keeps one
parsed copy per YAML file, so two trees sharing a cache would re-parse each other's files on every run. cwd is
outside both trees; PYTHONPATH picks the tree. Prints the median wall seconds per command and tree.
"""

from __future__ import annotations

import argparse
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
MODEL = str(REPO / "examples" / "qwen2.5-3b-instruct")
AWQ = REPO / "tests" / "fixtures" / "configs" / "quantized" / "llama-3.1-8b-awq-int4.json"


def commands(awq_dir: Path) -> dict[str, list[str]]:
    base = ["check", "--model", MODEL, "--gpu", "L4", "--no-compile", "--format", "json"]
    return {
        "--help": ["--help"],
        "check --no-compile, --vllm-version 0.25.1": [*base, "--kv-cache-dtype", "fp8", "--vllm-version", "0.25.1"],
        "check --no-compile, version unknown": [*base, "--kv-cache-dtype", "fp8"],
        "founding case, warm": ["check", "--model", MODEL, "--kv-cache-dtype", "turboquant_k8v4", "--gpu", "A100",
                                "--vllm-version", "0.25.1", "--format", "json"],
        "quantized checkpoint (AWQ, T4), --no-compile": ["check", "--model", str(awq_dir), "--gpu", "T4",
                                                         "--vllm-version", "0.25.1", "--no-compile", "--format", "json"],
    }


def warm_cache(into: Path) -> None:
    home = Path(os.environ.get("KVDOCTOR_CACHE_DIR", Path.home() / ".cache" / "kvdoctor"))
    into.mkdir(parents=True)
    for entry in home.iterdir() if home.is_dir() else ():
        if entry.name == "wheels":
            (into / "wheels").symlink_to(entry)
        elif entry.is_dir():
            shutil.copytree(entry, into / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, into / entry.name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path, help="the other kvdoctor checkout")
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    trees = {"base": args.base.resolve(), "this": REPO}
    env0 = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory() as tmp:
        awq = Path(tmp) / "awq"
        awq.mkdir()
        shutil.copy(AWQ, awq / "config.json")
        cmds = commands(awq)
        envs = {}
        for name, tree in trees.items():
            warm_cache(Path(tmp) / f"cache-{name}")
            envs[name] = {**env0, "PYTHONPATH": str(tree), "KVDOCTOR_CACHE_DIR": str(Path(tmp) / f"cache-{name}")}
            for argv in cmds.values():  # bytecode and caches warm
                subprocess.run([sys.executable, "-m", "kvdoctor", *argv], env=envs[name], cwd=tmp, capture_output=True)
        times: dict[tuple[str, str], list[float]] = {(c, t): [] for c in cmds for t in trees}
        for _ in range(args.repeat):
            for label, argv in cmds.items():
                for name in trees:
                    started = time.perf_counter()
                    subprocess.run([sys.executable, "-m", "kvdoctor", *argv], env=envs[name], cwd=tmp, capture_output=True)
                    times[(label, name)].append(time.perf_counter() - started)
    print(json.dumps({"load": os.getloadavg(), "base": str(trees["base"]), "repeat": args.repeat}))
    for label in cmds:
        print(f"{label:48s} base {statistics.median(times[(label, 'base')]):.3f}  this "
              f"{statistics.median(times[(label, 'this')]):.3f}")


if __name__ == "__main__":
    main()
