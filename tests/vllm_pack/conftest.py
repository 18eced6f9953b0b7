"""Starts the slow pack builds in the background once the session has collected the tests that wait on them
(builds_ahead.py): the rebuilds of the shipped releases and the on-the-fly build of a newer one."""

from __future__ import annotations

import builds_ahead
import pytest


def pytest_collection_finish(session: pytest.Session) -> None:
    import test_pack_newer
    import test_pack_rebuild

    names = {item.name for item in session.items}
    builds = {}  # in the order their tests come
    command = test_pack_newer.on_the_fly_command() if "test_a_newer_wheel_is_read_on_the_fly_and_cached" in names \
        else None
    if command is not None:
        builds["on-the-fly"] = command[:3]
    for version in test_pack_rebuild.VERSIONS:
        if f"test_rebuild_from_the_wheel_is_byte_identical[{version}]" in names and test_pack_rebuild.runnable(version):
            argv, env, cwd, _ = test_pack_rebuild.rebuild_command(version)
            builds[f"rebuild-{version}"] = (argv, env, cwd)
    if builds and not session.config.option.collectonly:
        builds_ahead.schedule(builds)
