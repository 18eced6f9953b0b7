"""Run compile jobs in a child process with a time limit; a hang or a crash becomes a result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvdoctor.dryrun import warm_children
from kvdoctor.dryrun.protocol import RESULT, START

_STDERR_TAIL = 1500


@dataclass(frozen=True)
class ChildOutcome:
    """What one child process left behind."""

    returncode: int | None
    """Exit status; negative = killed by that signal; None = killed by kvdoctor after the time limit."""
    started: list[int]
    """Indices of the jobs it began."""
    results: dict[int, dict[str, Any]]
    """Index -> result dict of the jobs it finished."""
    stderr: str
    """Everything it wrote to stderr."""


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def child_env() -> dict[str, str]:
    """The environment of a compiler child, less TRITON_CACHE_DIR (spawn_child's argument)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_CACHE_DIR"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH")) if p)
    return env


def spawn_child(env: dict[str, str], triton_cache: str) -> subprocess.Popen:
    """`python -m kvdoctor.dryrun.child` in its own process group (a timeout kills it and its ptxas); it
    compiles the payload it reads after importing Triton (whose TRITON_CACHE_DIR the payload may change)."""
    return subprocess.Popen(
        [sys.executable, "-m", "kvdoctor.dryrun.child"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env | {"TRITON_CACHE_DIR": triton_cache}, text=True, start_new_session=True,
    )  # fmt: skip


def start_child(payload: list[dict[str, Any]], timeout_s: float, triton_cache: Path) -> ChildOutcome:
    """Run `python -m kvdoctor.dryrun.child` on the payload (a pre-started one when there is one, see
    warm_children); kill its process group at timeout_s."""
    env = child_env()
    proc = warm_children.take(env) or spawn_child(env, str(triton_cache))
    timed_out = False
    try:
        message = {"jobs": payload, "triton_cache": str(triton_cache)}
        out, err = proc.communicate(json.dumps(message), timeout=max(timeout_s, 0.01))
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the child and any ptxas it started
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
    started, results = _parse(out)
    return ChildOutcome(None if timed_out else proc.returncode, started, results, err or "")


def _parse(out: str) -> tuple[list[int], dict[int, dict[str, Any]]]:
    started: list[int] = []
    results: dict[int, dict[str, Any]] = {}
    for line in (out or "").splitlines():
        head, _, body = line.partition(" ")
        try:
            if head == START:
                started.append(int(body))
            elif head == RESULT:
                result = json.loads(body)
                results[int(result.pop("index"))] = result
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line from a dying child
    return started, results


def _stderr_tail(stderr: str) -> str | None:
    """Last distinct stderr lines (LLVM repeats its warnings once per function)."""
    lines: list[str] = []
    for line in stderr.splitlines():
        if line.strip() and line not in lines:
            lines.append(line)
    return "\n".join(lines)[-_STDERR_TAIL:] or None


def _signal_name(returncode: int | None) -> str:
    if returncode is None:
        return "killed after the time limit"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


def _lost(kind: str, kernel: str, returncode: int | None, stderr: str, seconds: float, limit: float) -> dict:
    how = _signal_name(returncode)
    if kind == "timeout":
        message = f"compiling {kernel} did not finish within {limit:.1f} s; the compiler process was {how}"
    else:
        message = f"the compiler process {how} while compiling {kernel}"
    failure = {"kind": kind, "message": message, "innermost_message": _stderr_tail(stderr)}
    return {"status": kind if kind == "timeout" else "crashed", "failure": failure, "note": None, "seconds": seconds}


JOBS_PER_CHILD = 2  # fewer, and a second child's ~0.35 s start-up costs more than it saves

# Relative compile cost of a kernel (Triton 3.7.1, sm_80, this project's 2-core machine; an unlisted kernel
# counts 1): only to balance the children, never part of a verdict. Measured: the k8v4 store 0.16-0.20 s,
# the TurboQuant decode stage 1 0.32 s, the MLA grouped stage 1 ~1.5 s and its plain stage 1 ~6.6 s.
COMPILE_COST = {
    "_tq_decode_stage1": 3.0, "_tq_fused_store_fp8": 1.8, "_tq_fused_store_mse": 1.5, "_tq_full_dequant_kv": 1.0,
    "kernel_unified_attention": 4.0, "reshape_and_cache_kernel_flash": 1.0, "reduce_segments": 1.0,
    "_fwd_grouped_kernel_stage1": 15.0, "_fwd_kernel_stage1": 60.0, "_fwd_kernel_stage2": 1.0,
}  # fmt: skip


def _balanced(indices: list[int], payload: list[dict[str, Any]], children: int) -> list[list[int]]:
    """indices dealt over children, costliest first, each to the least loaded child (LPT scheduling)."""
    loads = [0.0] * children
    shares: list[list[int]] = [[] for _ in range(children)]
    for index in sorted(indices, key=lambda i: -COMPILE_COST.get(payload[i]["kernel"], 1.0)):
        child = loads.index(min(loads))
        shares[child].append(index)
        loads[child] += COMPILE_COST.get(payload[index]["kernel"], 1.0)
    return [share for share in shares if share]


def run_jobs(payload: list[dict[str, Any]], timeout_s: float, triton_cache: Path) -> list[dict[str, Any]]:
    """Result dict per job. Each child compiles for one target only (Triton 3.6.0 carries state from one
    target's compile into the next in the same process: an sm_90 fp8e5 compile made a later sm_80 one emit
    sm_89 instructions); a target's jobs are dealt over up to one child per core by their compile cost."""
    by_target: dict[tuple[int, ...], list[int]] = {}
    for index, job in enumerate(payload):
        by_target.setdefault(tuple(job.get("capability", ())), []).append(index)
    shares: list[list[int]] = []
    for indices in by_target.values():
        children = max(1, min(os.cpu_count() or 1, -(-len(indices) // JOBS_PER_CHILD)))
        shares += _balanced(indices, payload, children)
    if len(shares) == 1:
        return _run_serially(payload, timeout_s, triton_cache)
    from concurrent.futures import ThreadPoolExecutor

    workers = min(len(shares), os.cpu_count() or 1)
    with ThreadPoolExecutor(workers) as pool:
        outcomes = list(pool.map(lambda share: _run_serially([payload[i] for i in share], timeout_s, triton_cache), shares))
    results: dict[int, dict[str, Any]] = {}
    for share, outcome in zip(shares, outcomes):
        results.update(zip(share, outcome))
    return [results[i] for i in range(len(payload))]


def _run_serially(payload: list[dict[str, Any]], timeout_s: float, triton_cache: Path) -> list[dict[str, Any]]:
    """Result dict per job. A crash costs only the kernel being compiled: the rest go to a fresh child.

    timeout_s bounds the whole call; a timeout marks every unfinished job "timeout".
    """
    results: dict[int, dict[str, Any]] = {}
    pending = list(range(len(payload)))
    deadline = time.monotonic() + timeout_s
    while pending:
        left = deadline - time.monotonic()
        began = time.monotonic()
        outcome = start_child([payload[i] for i in pending], left, triton_cache) if left > 0 else None
        if outcome is None or outcome.returncode is None:
            spent = time.monotonic() - began
            for i in pending:
                done = outcome.results.get(pending.index(i)) if outcome else None
                results[i] = done or _lost("timeout", payload[i]["kernel"], None, outcome.stderr if outcome else "",
                                           spent, timeout_s)  # fmt: skip
            break
        for local, i in enumerate(pending):
            if local in outcome.results:
                results[i] = outcome.results[local]
        unfinished = [local for local in range(len(pending)) if local not in outcome.results]
        if not unfinished:
            break
        # the first unfinished job is the one that killed the child (or the child died before it)
        culprit = pending[unfinished[0]]
        results[culprit] = _lost("crashed", payload[culprit]["kernel"], outcome.returncode, outcome.stderr,
                                 time.monotonic() - began, timeout_s)  # fmt: skip
        pending = [pending[local] for local in unfinished[1:]]
    return [results[i] for i in range(len(payload))]
