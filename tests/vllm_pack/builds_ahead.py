"""The pack builds the slowest tests wait on (about two minutes each), started in the background as soon as the session
has collected those tests: one subprocess at a time on a core the rest of the suite leaves idle, so that they are done
(or nearly) when their tests come. A test asks `result(key, argv, env, cwd)`: the build's CompletedProcess, run ahead
when it was scheduled, else run now. The builds are the tests' own commands; nothing is shared between them but time.
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

TIMEOUT_S = 900


@dataclass
class _Build:
    argv: list[str]
    env: dict[str, str] | None
    cwd: str | None
    done: threading.Event = field(default_factory=threading.Event)
    result: subprocess.CompletedProcess | None = None


_scheduled: dict[str, _Build] = {}
_root: Path | None = None


def scratch() -> Path:
    """A folder for the builds' outputs, removed when the session ends."""
    global _root
    if _root is None:
        _root = Path(tempfile.mkdtemp(prefix="kvdoctor-builds-ahead-"))
        atexit.register(shutil.rmtree, _root, True)
    return _root


def schedule(builds: dict[str, tuple[list[str], dict[str, str] | None, str | None]]) -> None:
    """Run these builds one after another in a background thread (keys name them for `result`)."""
    for key, (argv, env, cwd) in builds.items():
        _scheduled[key] = _Build(argv, env, cwd)
    pending = [_scheduled[key] for key in builds]
    threading.Thread(target=_run_all, args=(pending,), daemon=True, name="pack-builds-ahead").start()


def _run_all(pending: list[_Build]) -> None:
    for build in pending:
        try:
            build.result = _run(build.argv, build.env, build.cwd)
        except Exception as error:  # reported by the test that waits for it
            build.result = subprocess.CompletedProcess(build.argv, -1, "", f"{type(error).__name__}: {error}")
        finally:
            build.done.set()


def _run(argv: list[str], env: dict[str, str] | None, cwd: str | None) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=TIMEOUT_S)


def result(key: str, argv: list[str], env: dict[str, str] | None, cwd: str | None) -> subprocess.CompletedProcess:
    """The build's result: the one run ahead when it was scheduled with the same command, else this command run now."""
    build = _scheduled.get(key)
    if build is None or build.argv != argv:
        return _run(argv, env, cwd)
    if not build.done.wait(TIMEOUT_S + 60):
        raise TimeoutError(f"the background build {key} did not finish")
    return build.result
