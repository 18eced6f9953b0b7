"""Whole-process timings of `kvdoctor` as a user runs it: --help, check without and with the dry run.

    python tools/bench_check.py [--repeat 5] [--wheels DIR]

Cold = a fresh, empty kvdoctor cache (nothing compiled yet); warm = the same cache again.
Prints a Markdown table (median and max seconds) for README.
"""

from __future__ import annotations

import argparse
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
FOUNDING = ["check", "--model", MODEL, "--kv-cache-dtype", "turboquant_k8v4", "--gpu", "A100", "--format", "json"]


def timed(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kvdoctor", *args], env=env, cwd=REPO, capture_output=True)
    return time.perf_counter() - started


def measure(label: str, args: list[str], repeat: int, env: dict[str, str], cold: bool,
            kernels: Path | None = None) -> tuple[str, list[float]]:  # fmt: skip
    """kernels: a vllm-kernels/ directory copied into each fresh cache (fetched kernel files, no compiles)."""
    times = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as cache:
            run_env = {**env, "KVDOCTOR_CACHE_DIR": cache}
            if kernels is not None:
                shutil.copytree(kernels, Path(cache) / "vllm-kernels")
            if not cold:
                timed(args, run_env)  # fill the cache
            times.append(timed(args, run_env))
    return label, times


def fetched_kernels(versions: tuple[str, ...], env: dict[str, str], into: Path) -> tuple[Path, list[float]]:
    """Fetch each release's kernel files once from the package index (timed, in-process); their folder."""
    from kvdoctor.dryrun.kernel_source import KERNEL_FILES
    from kvdoctor.dryrun.wheel_fetch import fetch_release

    seconds = []
    for version in versions:
        result = fetch_release(version, into, KERNEL_FILES, offline=False)
        if result.root is None:
            raise SystemExit(f"cannot fetch vLLM {version}: {result.note}")
        seconds.append(result.seconds)
    return into / "vllm-kernels", seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--wheels", default=os.environ.get("KVDOCTOR_VLLM_WHEELS", str(Path.home() / ".cache/kvdoctor-wheels")))
    parser.add_argument("--fetch", action="store_true", help="also time fetched kernel files (uses the package index)")
    options = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KVDOCTOR_", "VLLM_"))}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    wheel = sorted(Path(options.wheels).glob("vllm-0.25.1-*.whl"))
    rows = [
        measure("`kvdoctor --help`", ["--help"], options.repeat, env, cold=True),
        measure("check, no dry run (`--no-compile`)", FOUNDING + ["--vllm-version", "0.25.1", "--no-compile"], options.repeat, env, cold=True),
        measure("check + dry run, probe kernel (no vLLM at hand) + fixes, cold", FOUNDING + ["--vllm-version", "0.25.1"], options.repeat, env, cold=True),
        measure("check + dry run, probe kernel, warm", FOUNDING + ["--vllm-version", "0.25.1"], options.repeat, env, cold=False),
    ]
    if wheel:
        source = FOUNDING[:-4] + ["--gpu", "H100", "--format", "json", "--vllm-source", str(wheel[0])]
        rows += [
            measure("check + dry run, vLLM 0.25.1 kernels, H100, cold (3 kernels)", source, options.repeat, env, cold=True),
            measure("check + dry run, vLLM 0.25.1 kernels, A100, cold (3 kernels + 2 fixes)",
                    FOUNDING + ["--vllm-source", str(wheel[0])], options.repeat, env, cold=True),
            measure("check + dry run, vLLM 0.25.1 kernels, A100, warm",
                    FOUNDING + ["--vllm-source", str(wheel[0])], options.repeat, env, cold=False),
        ]
    if options.fetch:
        online = {**env, "HF_HUB_OFFLINE": "0", "KVDOCTOR_VLLM_WHEELS": "/nonexistent"}
        what_if = FOUNDING + ["--vllm-version", "0.25.1"]
        attention = ["check", "--model", MODEL, "--kv-cache-dtype", "fp8", "--attention-backend", "TRITON_ATTN",
                     "--gpu", "A100", "--format", "json", "--vllm-version", "0.23.0"]  # fmt: skip
        with tempfile.TemporaryDirectory() as prefetch:
            kernels, fetch_s = fetched_kernels(("0.25.1", "0.26.0"), online, Path(prefetch))
            size = max(sum(f.stat().st_size for f in d.rglob("*") if f.is_file()) for d in kernels.iterdir())
            rows.append((f"first fetch of one release's kernel files (range requests; {size // 1024} KB cached)", fetch_s))
            rows += [
                measure("founding what-if, empty cache: fetch 0.25.1 + 0.26.0, compile, fixes", what_if, options.repeat, online, cold=True),
                measure("founding what-if, kernel files cached, compile cache empty (cold)", what_if, options.repeat, online,
                        cold=True, kernels=kernels),
                measure("founding what-if, kernel files cached, warm", what_if, options.repeat, online, cold=False, kernels=kernels),
            ]
            kernels_023, _ = fetched_kernels(("0.23.0", "0.27.0"), online, Path(prefetch))
            rows += [
                measure("fp8 + TRITON_ATTN, A100, vLLM 0.23.0 (4 attention kernels + fixes), kernel files cached, cold",
                        attention, options.repeat, online, cold=True, kernels=kernels_023),
                measure("fp8 + TRITON_ATTN, A100, vLLM 0.23.0, warm", attention, options.repeat, online, cold=False,
                        kernels=kernels_023),
            ]
    print(f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, {options.repeat} runs each\n")
    print("| command | median s | max s |\n|---|---|---|")
    for label, times in rows:
        print(f"| {label} | {statistics.median(times):.2f} | {max(times):.2f} |")


if __name__ == "__main__":
    main()
