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


def schedule_collected(session) -> None:
    """Schedules the builds of the collected tests that wait on one: the rebuilds of the shipped releases
    (tests/vllm_pack/test_pack_rebuild.py) and the on-the-fly build of a newer one (test_pack_newer.py), in the order
    their tests come."""
    names = {item.name for item in session.items}
    wanted_newer = "test_a_newer_wheel_is_read_on_the_fly_and_cached" in names
    wanted_rebuilds = any(name.startswith("test_rebuild_from_the_wheel_is_byte_identical[") for name in names)
    if session.config.option.collectonly or not (wanted_newer or wanted_rebuilds):
        return
    import test_pack_newer  # imported by the collection already (tests/vllm_pack is on sys.path)
    import test_pack_rebuild

    builds = {}
    command = test_pack_newer.on_the_fly_command() if wanted_newer else None
    if command is not None:
        builds["on-the-fly"] = command[:3]
    for version in test_pack_rebuild.VERSIONS:
        if f"test_rebuild_from_the_wheel_is_byte_identical[{version}]" in names and test_pack_rebuild.runnable(version):
            argv, env, cwd, _ = test_pack_rebuild.rebuild_command(version)
            builds[f"rebuild-{version}"] = (argv, env, cwd)
    if builds:
        schedule(builds)
