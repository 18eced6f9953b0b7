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


def start_child(payload: list[dict[str, Any]], timeout_s: float, triton_cache: Path) -> ChildOutcome:
    """Run `python -m kvdoctor.dryrun.child` on the payload; kill its process group at timeout_s."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH")) if p)
    env["TRITON_CACHE_DIR"] = str(triton_cache)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvdoctor.dryrun.child"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env, text=True, start_new_session=True,
    )  # fmt: skip
    timed_out = False
    try:
        out, err = proc.communicate(json.dumps({"jobs": payload}), timeout=max(timeout_s, 0.01))
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


def run_jobs(payload: list[dict[str, Any]], timeout_s: float, triton_cache: Path) -> list[dict[str, Any]]:
    """Result dict per job. Each child compiles for one target only (Triton 3.6.0 carries state from one
    target's compile into the next in the same process: an sm_90 fp8e5 compile made a later sm_80 one emit
    sm_89 instructions); a target's jobs are dealt round-robin over up to one child per core."""
    by_target: dict[tuple[int, ...], list[int]] = {}
    for index, job in enumerate(payload):
        by_target.setdefault(tuple(job.get("capability", ())), []).append(index)
    shares: list[list[int]] = []
    for indices in by_target.values():
        children = max(1, min(os.cpu_count() or 1, -(-len(indices) // JOBS_PER_CHILD)))
        shares += [indices[start::children] for start in range(children)]
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
