"""On the GPU machine: real `vllm serve` start-ups of fit_grid.py's cases, one at a time (memory profiling
must not see another process's memory), each until it serves or stops; the memory lines vLLM logged come back.

    python -m gpu_verify.startups.fit_run --stage /tmp/kvd-stage --version 0.25.1 --part a \
        [--deadline 540] --out $OUT/fit-0.25.1-a.json [--logs $OUT/fit-0.25.1-a.log]

A served case also answers /version, /v1/models and /metrics (vllm:cache_config_info); a case with `verify`
runs `kvdoctor check --format json` for the same command and then `kvdoctor verify URL --report` against the
running server (kvdoctor from this checkout, no network). The JSON is rewritten after every case.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from gpu_verify.startups.fit_grid import CONFIGS, grid
from gpu_verify.startups.run_startups import BASE_ENV, machine_facts, release_facts

REPO = Path(__file__).resolve().parents[2]
READY = re.compile(r"Application startup complete|Uvicorn running on")
MEMORY_LINE = re.compile(r"GiB|KV cache|concurrency|memory|num_gpu_blocks|# GPU blocks|CUDA graph|cudagraph", re.I)
NUMBERS = {
    "weights_gib": re.compile(r"Model loading took ([\d.]+) ?GiB"),
    "available_kv_gib": re.compile(r"Available KV cache memory: ([\d.]+) ?GiB"),
    "kv_tokens": re.compile(r"GPU KV cache size: ([\d,]+) tokens"),
    "concurrency": re.compile(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x"),
    "torch_peak_increase_gib": re.compile(r"torch peak memory increase:? ([\d.]+) ?GiB"),
    "non_torch_gib": re.compile(r"non-torch (?:forward increase )?memory:? ([\d.]+) ?GiB"),
    "cudagraph_gib": re.compile(r"(?:CUDA graph|cudagraph)[^\n]*?([\d.]+) ?GiB", re.I),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_dir(stage: Path, model: str) -> tuple[Path, bool]:
    """The served directory and whether its weights are dummy (config only)."""
    if model.startswith("tiny:"):
        return stage / "models" / model.split(":", 1)[1], False
    out = stage / "fit-models" / model
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / CONFIGS[model], out / "config.json")
    return out, True


def numbers(text: str) -> dict:
    found = {}
    for key, rx in NUMBERS.items():
        hits = rx.findall(text)
        if hits:
            found[key] = float(hits[-1].replace(",", ""))
    return found


def get(url: str, timeout: float = 10) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.read().decode(errors="replace")
    except Exception as e:  # noqa: BLE001 - recorded
        return f"ERROR {type(e).__name__}: {e}"


def kvdoctor(args: list[str], timeout: float = 120) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", KVDOCTOR_OFFLINE="1")
    p = subprocess.run([sys.executable, "-m", "kvdoctor", *args], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=timeout)
    return {"argv": args, "exit": p.returncode, "stdout": p.stdout[-20000:], "stderr": p.stderr[-3000:]}


def wait_gpu_free(limit: float = 30) -> float | None:
    """GPU memory in use (MiB) once it drops below 2 GiB, or the last reading."""
    used = None
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        q = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True).stdout.strip()
        try:
            used = float(q.splitlines()[0])
        except (ValueError, IndexError):
            return None
        if used < 2048:
            break
        time.sleep(1)
    return used


def run_case(case: dict, site: Path, stage: Path, logs: Path, version: str) -> dict:
    directory, dummy = model_dir(stage, case["model"])
    port = free_port()
    argv = ["serve", str(directory), "--port", str(port), "--host", "127.0.0.1", "--skip-tokenizer-init",
            *(["--load-format", "dummy"] if dummy else []), *case["flags"]]
    env = dict(os.environ)
    env.update(BASE_ENV)
    env.pop("VLLM_ENABLE_V1_MULTIPROCESSING", None)  # a real server: engine core in its own process
    env.update(PYTHONPATH=f"{site}{os.pathsep}{REPO}", VLLM_LOGGING_LEVEL="DEBUG",
               TRITON_CACHE_DIR=str(stage / "triton-cache"), VLLM_CACHE_ROOT=str(stage / "vllm-cache"))
    log = logs / f"{case['id']}.log"
    code = ("import site,sys; site.addsitedir(sys.argv[1]); sys.argv=['vllm']+sys.argv[2:]; "
            "from vllm.entrypoints.cli.main import main; main()")
    t0 = time.monotonic()
    with open(log, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-c", code, str(site), *argv], cwd=str(stage), env=env,
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    record = dict(case, argv=argv, dummy_weights=dummy)
    outcome = None
    while outcome is None:
        time.sleep(1)
        text = log.read_text(errors="replace")
        if READY.search(text):
            outcome = "served"
        elif proc.poll() is not None:
            outcome = "stopped"
        elif time.monotonic() - t0 > case["limit_s"]:
            outcome = "timeout"
    record["startup_s"] = round(time.monotonic() - t0, 1)
    if outcome == "served":
        base = f"http://127.0.0.1:{port}"
        record["version"] = get(base + "/version")
        record["models"] = get(base + "/v1/models")
        metrics = get(base + "/metrics") or ""
        record["cache_config_info"] = [ln for ln in metrics.splitlines() if ln.startswith("vllm:cache_config_info")]
        if case.get("verify"):
            serve = ["--", "vllm", "serve", str(directory), *case["flags"]]
            checked = kvdoctor(["check", "--no-compile", "--gpu", "H200", "--vllm-version", version, "--format",
                                "json", *serve])
            report = stage / "check-report.json"
            report.write_text(checked["stdout"])
            record["kvdoctor_check"] = {k: checked[k] for k in ("exit", "stderr")}
            record["kvdoctor_verify"] = kvdoctor(["verify", base, "--report", str(report), "--format", "json"])
            record["kvdoctor_verify_text"] = kvdoctor(["verify", base, "--report", str(report)])
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
    except Exception:  # noqa: BLE001
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    text = log.read_text(errors="replace")
    record.update(outcome=outcome, exit=proc.returncode, wall_s=round(time.monotonic() - t0, 1), **numbers(text))
    record["memory_lines"] = [ln[-300:] for ln in text.splitlines() if MEMORY_LINE.search(ln)][-60:]
    errors = [ln[-400:] for ln in text.splitlines() if re.search(r"Error|error:|Exception|raise ", ln)]
    record["error_lines"] = errors[-15:]
    if outcome != "served":
        record["log_tail"] = [ln[-400:] for ln in text.splitlines()[-40:]]
    record["gpu_used_after_mib"] = wait_gpu_free()
    return record


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage", type=Path, default=Path("/tmp/kvd-stage"))
    ap.add_argument("--version", required=True)
    ap.add_argument("--part", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--deadline", type=float, default=540.0)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--logs", type=Path, help="all cases' logs, concatenated, written here at the end")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    site = args.stage / f"site-{args.version}"
    logs = args.stage / "fit-logs" / args.version
    logs.mkdir(parents=True, exist_ok=True)
    cases = grid(args.part)
    if args.only:
        cases = [c for c in cases if c["id"] in set(args.only.split(","))]
    if any(c["model"].startswith("tiny:") for c in cases):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        made = subprocess.run([sys.executable, "-m", "gpu_verify.startups.models", str(args.stage / "models")],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        print("models:", made.stdout.strip()[-400:], made.stderr.strip()[-400:], flush=True)
    doc = {"machine": machine_facts(), "release": release_facts(site, args.version), "part": args.part,
           "results": []}
    for c in cases:
        if time.monotonic() - t0 + min(c["limit_s"], 60) > args.deadline:
            doc["results"].append(dict(c, outcome="cut"))
            continue
        if c["model"].startswith("tiny:") and not (args.stage / "models" / c["model"][5:] / "config.json").exists():
            doc["results"].append(dict(c, outcome="not_run", reason="the tiny model could not be made"))
            continue
        c = dict(c, limit_s=min(c["limit_s"], max(30.0, args.deadline - (time.monotonic() - t0) - 25)))
        r = run_case(c, site, args.stage, logs, args.version)
        doc["results"].append(r)
        doc["seconds"] = round(time.monotonic() - t0, 1)
        args.out.write_text(json.dumps(doc, indent=1))
        print(f"{time.monotonic() - t0:6.0f}s {r['id']}: {r['outcome']} kv={r.get('available_kv_gib')} "
              f"tokens={r.get('kv_tokens')} w={r.get('weights_gib')} {(r.get('error_lines') or [''])[-1][:160]}",
              flush=True)
    args.out.write_text(json.dumps(doc, indent=1))
    if args.logs:
        with open(args.logs, "w") as out:
            for log in sorted(logs.glob("*.log")):
                out.write(f"===== {log.name}\n{log.read_text(errors='replace')[-400000:]}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
