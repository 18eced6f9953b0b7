"""Wall and CPU time of the founding check, `kvdoctor check --model examples/qwen2.5-3b-instruct
--kv-cache-dtype turboquant_k8v4 --gpu A100 --vllm-version 0.25.1`, with the kernel files already cached.

    python tools/bench_founding.py [--repeat 5] [--wheels DIR] [--profile]

cold = a fresh kvdoctor cache holding only the fetched kernel files of 0.25.1 and 0.26.0 (the release the
version fix is verified with): no compile results, no Triton cache. warm = the same cache after one run.
The kernel files are taken from local wheels through wheel_fetch (file: URL, the same range reads and RECORD
checks as over HTTP), so no network is needed. CPU = user + sys of the whole process tree (getrusage of
children); on a shared machine the CPU time is the steadier figure. --profile prints where one cold run's
time goes (kvdoctor's own KVDOCTOR_TRACE timings when it has them, else cProfile's top of the parent).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODEL = str(REPO / "examples" / "qwen2.5-3b-instruct")
FOUNDING = ["check", "--model", MODEL, "--kv-cache-dtype", "turboquant_k8v4", "--gpu", "A100", "--vllm-version",
            "0.25.1", "--format", "json"]  # fmt: skip
RELEASES = ("0.25.1", "0.26.0")


def prefetch(wheels: Path, into: Path) -> Path:
    """<into>/vllm-kernels/<version>/ for RELEASES, read from local wheels exactly as from an index."""
    from kvdoctor.dryrun.kernel_source import KERNEL_FILES
    from kvdoctor.dryrun.package_index import WheelLocation
    from kvdoctor.dryrun.wheel_fetch import fetch_release

    for version in RELEASES:
        wheel = sorted(wheels.glob(f"vllm-{version}-*.whl"))
        if not wheel:
            raise SystemExit(f"no vLLM {version} wheel in {wheels}")
        location = WheelLocation(wheel[0].name, wheel[0].resolve().as_uri(), None)
        result = fetch_release(version, into, KERNEL_FILES, offline=False, location=location)
        if result.root is None:
            raise SystemExit(result.note)
    return into / "vllm-kernels"


def run_once(env: dict[str, str], args: list[str]) -> tuple[float, float, int]:
    """(wall s, CPU s of the process tree, exit code)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "kvdoctor", *args], env=env, cwd=REPO, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc.returncode


def measure(kernels: Path, env: dict[str, str], repeat: int, cold: bool) -> list[tuple[float, float]]:
    out = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="kvd-bench-") as cache:
            shutil.copytree(kernels, Path(cache) / "vllm-kernels")
            run_env = {**env, "KVDOCTOR_CACHE_DIR": cache}
            if not cold:
                run_once(run_env, FOUNDING)
            wall, cpu, code = run_once(run_env, FOUNDING)
            if code not in (0, 1):
                raise SystemExit(f"kvdoctor exited {code}")
            out.append((wall, cpu))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--wheels", type=Path, default=Path(os.environ.get(
        "KVDOCTOR_VLLM_WHEELS", str(Path.home() / ".cache" / "kvdoctor" / "wheels"))))  # fmt: skip
    parser.add_argument("--profile", action="store_true")
    options = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KVDOCTOR_", "VLLM_", "TRITON_"))}
    env |= {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO), "KVDOCTOR_VLLM_WHEELS": "/nonexistent"}
    with tempfile.TemporaryDirectory(prefix="kvd-kernels-") as staging:
        kernels = prefetch(options.wheels, Path(staging))
        if options.profile:
            with tempfile.TemporaryDirectory(prefix="kvd-bench-") as cache:
                shutil.copytree(kernels, Path(cache) / "vllm-kernels")
                run_env = {**env, "KVDOCTOR_CACHE_DIR": cache, "KVDOCTOR_TRACE": "1"}
                proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "kvdoctor", *FOUNDING], env=run_env,
                                      cwd=REPO, capture_output=True, text=True)  # fmt: skip
                imports = [line for line in proc.stderr.splitlines() if line.startswith("import time:")
                           and line.split("|")[1].strip().isdigit()]  # not the header line
                heavy = sorted(imports, key=lambda line: -int(line.split("|")[1]))[:15]
                print("\n".join(heavy))
                print("\n".join(line for line in proc.stderr.splitlines() if line.startswith("kvdoctor-trace")))
        load = os.getloadavg()[0]
        rows = {"cold": measure(kernels, env, options.repeat, True), "warm": measure(kernels, env, options.repeat, False)}
    import triton

    print(f"{os.cpu_count()} cores, load {load:.1f} at the start, Python {sys.version.split()[0]}, Triton "
          f"{triton.__version__}, {options.repeat} runs each\n")  # fmt: skip
    print("| founding check | wall median s | wall max s | CPU median s |\n|---|---|---|---|")
    for label, times in rows.items():
        walls, cpus = [w for w, _ in times], [c for _, c in times]
        print(f"| {label} | {statistics.median(walls):.2f} | {max(walls):.2f} | {statistics.median(cpus):.2f} |")


if __name__ == "__main__":
    main()
