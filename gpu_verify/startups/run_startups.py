"""On the GPU machine: start real vLLM for each configuration of the grid, several processes at a time.

    python -m gpu_verify.startups.run_startups --stage /tmp/kvd-stage --version 0.25.1 [--grid full|short|drawn:S:N]
        [--only ID,ID] [--skip-done FILE] [--parallel 10] [--limit 240] [--deadline 540] --out $OUT/startups-0.25.1.json

Each case runs in a fresh process (one_startup.py) with the release's site directory first on PYTHONPATH and
the case's VLLM_* variables, under a time limit; a case still running at its limit gets SIGUSR1 (every
thread's stack goes to its log) and is then killed: that stack is the answer to "why no tokens". A case that
the command's own deadline cuts short is recorded as `cut`, never as a verdict. The JSON is rewritten after
every case, so whatever finished comes back even when the command is stopped.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gpu_verify.startups.drawn import drawn
from gpu_verify.startups.grid import grid
from gpu_verify.startups.models import BUILDERS
from gpu_verify.startups.outcome import classify, log_tail, stack_dump

REPO = Path(__file__).resolve().parents[2]
BASE_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # engine in this process: the e4b15 patch reaches it, errors stay whole
    "VLLM_USE_FLASHINFER_SAMPLER": "0",     # FlashInfer's sampler autotuning alone took 82 s on 0.25.1
    "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
    "VLLM_LOGGING_LEVEL": "INFO", "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false",
}


def machine_facts() -> dict:
    """Date, GPU, driver and the machine's own torch / Triton / Python (what every start-up ran on)."""
    facts: dict = {"date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap",
                            "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout.strip()
        name, driver, mem, cap = [s.strip() for s in q.splitlines()[0].split(",")]
        facts.update(gpu=name, driver=driver, gpu_memory=mem, compute_capability=cap)
    except Exception as e:  # noqa: BLE001 - recorded, not fatal
        facts["gpu_error"] = str(e)
    code = ("import json,sys,torch,triton,platform;print(json.dumps({'torch':torch.__version__,"
            "'torch_cuda':torch.version.cuda,'triton':triton.__version__,'python':platform.python_version()}))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    facts.update(json.loads(out.stdout.strip().splitlines()[-1]))
    return facts


def release_facts(site: Path, version: str) -> dict:
    """vLLM's version from the installed metadata and the torch / Triton it pins."""
    meta = (site / f"vllm-{version}.dist-info" / "METADATA").read_text()
    pins = [line.split(":", 1)[1].strip() for line in meta.splitlines()
            if line.startswith("Requires-Dist:") and line.split(":", 1)[1].strip().split("=")[0] in ("torch", "triton")]
    version_line = next(line for line in meta.splitlines() if line.startswith("Version:"))
    return {"vllm": version_line.split(":", 1)[1].strip(), "pins": pins}


def case_env(case: dict, site: Path, stage: Path) -> dict:
    env = dict(os.environ)
    env.update(BASE_ENV)
    env["PYTHONPATH"] = f"{site}{os.pathsep}{REPO}"
    env["KVD_SITE"] = str(site)  # one_startup.py processes its .pth files (PYTHONPATH entries skip them)
    env["TRITON_CACHE_DIR"] = str(stage / "triton-cache")
    env["VLLM_CACHE_ROOT"] = str(stage / "vllm-cache")
    if case.get("runner") is not None:
        env["VLLM_USE_V2_MODEL_RUNNER"] = case["runner"]
    else:
        env.pop("VLLM_USE_V2_MODEL_RUNNER", None)
    return env


class Running:
    def __init__(self, case: dict, proc: subprocess.Popen, log: Path, limit: float):
        self.case, self.proc, self.log, self.limit = case, proc, log, limit
        self.started = time.monotonic()
        self.signalled: float | None = None


def start(case: dict, site: Path, stage: Path, logs: Path, limit: float) -> Running:
    payload = dict(case, model=str(stage / "models" / case["model"]))
    log = logs / f"{case['id']}.log"
    f = open(log, "wb")
    proc = subprocess.Popen([sys.executable, "-m", "gpu_verify.startups.one_startup", json.dumps(payload)],
                            cwd=REPO, env=case_env(case, site, stage), stdout=f, stderr=subprocess.STDOUT,
                            start_new_session=True)
    f.close()
    return Running(case, proc, log, limit)


def finish(run: Running, cut: bool) -> dict:
    text = run.log.read_text(errors="replace")
    record = dict(run.case)
    record.update(classify(text, run.proc.returncode, timed_out=run.signalled is not None, cut=cut))
    record["wall_s"] = round(time.monotonic() - run.started, 1)
    record["limit_s"] = run.limit
    record["log_tail"] = log_tail(text, 25 if record["outcome"] == "started" else 60)
    if run.signalled is not None:
        record["stack_at_limit"] = stack_dump(text)
    return record


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage", type=Path, default=Path("/tmp/kvd-stage"))
    ap.add_argument("--version", required=True)
    ap.add_argument("--grid", default="full", help="full, short, or drawn:SEED:COUNT (drawn.py)")
    ap.add_argument("--only", default="", help="comma-separated case ids (default: the whole grid)")
    ap.add_argument("--skip-done", type=Path, action="append", default=[],
                    help="an earlier results JSON: its finished cases are not run again")
    ap.add_argument("--parallel", type=int, default=10)
    ap.add_argument("--limit", type=float, default=240.0, help="seconds per case unless the case says otherwise")
    ap.add_argument("--deadline", type=float, default=540.0, help="seconds for this whole command")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    site = args.stage / f"site-{args.version}"
    logs = args.stage / "logs" / args.version
    logs.mkdir(parents=True, exist_ok=True)
    if args.grid.startswith("drawn:"):
        _, seed, count = args.grid.split(":")
        cases = drawn(int(seed), int(count))
    else:
        cases = grid(args.version, args.grid)
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in cases if c["id"] in wanted]
    done_ids = set()
    for path in args.skip_done:
        if path.exists():
            done_ids |= {r["id"] for r in json.loads(path.read_text())["results"] if r["outcome"] != "cut"}
    cases = [c for c in cases if c["id"] not in done_ids]
    models = args.stage / "models"
    if not all((models / m / "config.json").exists() for m in {c["model"] for c in cases} | {"dense", "moe"}):
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        made = subprocess.run([sys.executable, "-m", "gpu_verify.startups.models", str(models)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=300)
        print("models:", made.stdout.strip()[-600:], made.stderr.strip()[-600:], flush=True)
    available = {name for name, _ in BUILDERS if (models / name / "config.json").exists()}
    doc = {"machine": machine_facts(), "release": release_facts(site, args.version), "grid": args.grid,
           "parallel": args.parallel, "env": BASE_ENV,
           "models": {m: json.loads((models / m / "config.json").read_text()) for m in sorted(available)},
           "results": []}
    doc["results"] += [dict(c, outcome="not_run", reason=f"no {c['model']} model") for c in cases
                       if c["model"] not in available]
    queue = [c for c in cases if c["model"] in available]
    running: list[Running] = []

    def write() -> None:
        doc["seconds"] = round(time.monotonic() - t0, 1)
        args.out.write_text(json.dumps(doc, indent=1))

    while queue or running:
        now = time.monotonic() - t0
        while queue and len(running) < args.parallel:
            limit = queue[0].get("limit_s") or args.limit
            if now + min(limit, 60) > args.deadline:  # not enough time left to mean anything
                doc["results"] += [dict(c, outcome="cut", reason="not started: command deadline") for c in queue]
                queue = []
                break
            running.append(start(queue.pop(0), site, args.stage, logs, limit))
        time.sleep(0.5)
        now = time.monotonic() - t0
        for run in list(running):
            age = time.monotonic() - run.started
            over_deadline = now > args.deadline
            if run.proc.poll() is None and run.signalled is None and (age > run.limit or over_deadline):
                os.killpg(run.proc.pid, signal.SIGUSR1)  # stacks into the log, then the kill below
                run.signalled = time.monotonic()
                run.cut = over_deadline and age <= run.limit
            if run.proc.poll() is None and run.signalled is not None and time.monotonic() - run.signalled > 4:
                os.killpg(run.proc.pid, signal.SIGKILL)
                run.proc.wait()
            if run.proc.poll() is not None:
                running.remove(run)
                doc["results"].append(finish(run, cut=getattr(run, "cut", False)))
                write()
                r = doc["results"][-1]
                print(f"{time.monotonic() - t0:6.0f}s {r['id']}: {r['outcome']} {r.get('summary', '')}"[:300],
                      flush=True)
    write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
