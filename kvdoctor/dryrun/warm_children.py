"""Compiler children started before the jobs are known, so their Python start and `import triton` (~0.3 s)
overlap kvdoctor's own facts stage instead of following it.

A warm child has imported Triton and waits for its payload on stdin (kvdoctor.dryrun.child reads it after the
imports); compiler_process.start_child takes one when its environment is the one it would have spawned with,
else starts a fresh child as before. Unused children are killed at exit. Whether to pre-start at all follows
a hint kept in the cache: a run of the same command line (same directory) pre-started before, and what it
compiled is cached now, so this run most likely compiles nothing and starts no child early; a run that left
something uncached (a crash or a timeout) drops the hint. The hint only decides whether to start children
early: the verdict still comes from the full plan and the result cache, and a run that does need to compile
starts its children then, as without this module.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

HINTS = "prestart-hints"
_warm: list[tuple[subprocess.Popen, dict[str, str]]] = []


def _hint_path(cache_dir: Path, argv: list[str]) -> Path:
    key = hashlib.sha256("\0".join([os.getcwd(), *argv]).encode()).hexdigest()[:32]
    return cache_dir / HINTS / key


def prestart(cache_dir: Path | None, argv: list[str], env: dict[str, str],
             spawn: Callable[[dict[str, str], str], subprocess.Popen], count: int | None = None) -> int:  # fmt: skip
    """Start up to count (default: one per core, at most 2) children with spawn(env, TRITON_CACHE_DIR) unless
    the hint says all was cached."""
    if os.environ.get("KVDOCTOR_NO_PRESTART") or (cache_dir and _hint_path(cache_dir, argv).is_file()):
        return 0
    triton_cache = str(cache_dir / "triton") if cache_dir is not None else os.devnull  # replaced by the payload's
    for _ in range(count or min(2, os.cpu_count() or 1)):
        try:
            _warm.append((spawn(env, triton_cache), env))
        except OSError:
            break
    if cache_dir is not None:  # what this run compiles is cached after it, so the next one will not need them
        try:
            _hint_path(cache_dir, argv).parent.mkdir(parents=True, exist_ok=True)
            _hint_path(cache_dir, argv).touch()
        except OSError:
            pass
    return len(_warm)


def take(env: dict[str, str]) -> subprocess.Popen | None:
    """A warm child started with exactly env (and still alive), or None."""
    while _warm:
        proc, warm_env = _warm.pop(0)
        if warm_env == env and proc.poll() is None:
            return proc
        _kill(proc)
    return None


def forget(cache_dir: Path | None, argv: list[str]) -> None:
    """This run left something uncached (a crash, a timeout, no cache): pre-start again next time."""
    if cache_dir is not None:
        try:
            _hint_path(cache_dir, argv).unlink(missing_ok=True)
        except OSError:
            pass


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=5)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        pass


def discard() -> None:
    """Kill every warm child not taken."""
    while _warm:
        _kill(_warm.pop()[0])


atexit.register(discard)
