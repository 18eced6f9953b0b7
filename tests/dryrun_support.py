"""Shared fixtures for the dry-run tests: real vLLM wheels and one compile cache per test session.

Import the fixtures into a test module with `from dryrun_support import ...`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kvdoctor.dryrun import DryRunRequest

WHEEL_VERSIONS = ("0.25.1", "0.26.0")


def wheel_dir() -> Path:
    """$KVDOCTOR_VLLM_WHEELS, else ~/.cache/kvdoctor/wheels (where kvdoctor and CI keep them)."""
    return Path(os.environ.get("KVDOCTOR_VLLM_WHEELS", str(Path.home() / ".cache" / "kvdoctor" / "wheels")))


def _find_wheel(directory: Path, version: str) -> Path | None:
    found = sorted(directory.glob(f"vllm-{version}-*.whl"))
    return found[0] if found else None


def wheel_at_hand(version: str) -> Path:
    """The vLLM wheel of `version` in wheel_dir(), or the calling test skips."""
    found = _find_wheel(wheel_dir(), version)
    if found is None:
        pytest.skip(f"no vLLM {version} wheel in {wheel_dir()}")
    return found


def release_sources(version: str, members: tuple[str, ...]) -> dict[str, str]:
    """The text of each member of vLLM `version`'s wheel ('' for one the wheel lacks): read from the wheel at hand,
    else fetched by range requests from the package index (kvdoctor's own wheel_fetch, verified against the wheel's
    RECORD) and kept under wheel_dir()/members/<version>; the calling test skips when neither works (CI fails it)."""
    wheel = _find_wheel(wheel_dir(), version)
    if wheel is not None:
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
            return {m: archive.read(m).decode() if m in names else "" for m in members}
    from kvdoctor.dryrun.package_index import find_wheel
    from kvdoctor.dryrun.wheel_fetch import FetchError, fetch_members

    root = wheel_dir() / "members" / version
    marker = root / "absent.txt"
    absent = set(marker.read_text().split()) if marker.is_file() else set()
    if not all((root / m).is_file() or m in absent for m in members):
        location, why_not = find_wheel(version)
        if location is None:
            pytest.skip(f"no vLLM {version} wheel in {wheel_dir()} and none on the package index: {why_not}")
        root.mkdir(parents=True, exist_ok=True)
        try:
            fetched = fetch_members(location, members, root)
        except (OSError, FetchError) as exc:
            pytest.skip(f"no vLLM {version} wheel in {wheel_dir()} and its files could not be fetched: {exc}")
        marker.write_text("\n".join(sorted(absent | set(fetched["absent"]))))
        absent |= set(fetched["absent"])
    return {m: "" if m in absent else (root / m).read_text() for m in members}


@pytest.fixture(scope="session")
def vllm_wheels() -> dict[str, Path]:
    """Version -> released vLLM wheel; downloaded with pip when missing, skipped if that is impossible."""
    directory = wheel_dir()
    wheels: dict[str, Path] = {}
    for version in WHEEL_VERSIONS:
        wheel = _find_wheel(directory, version)
        if wheel is None:
            directory.mkdir(parents=True, exist_ok=True)
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", f"vllm=={version}", "-d", str(directory)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            wheel = _find_wheel(directory, version)
            if wheel is None:
                pytest.skip(f"vLLM {version} wheel not in {directory} and pip download failed: {done.stderr[-300:]}")
        wheels[version] = wheel
    return wheels


@pytest.fixture(scope="session")
def dryrun_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compile cache for the whole session, so repeated requests compile once."""
    return tmp_path_factory.mktemp("kvdoctor-cache")


def founding_request(wheel: Path, **changes) -> DryRunRequest:
    """The issue's deployment: TurboQuant k8v4, a bf16 model (Qwen2.5-3B: D=128, 2 KV heads), A100."""
    fields = dict(kv_cache_dtype="turboquant_k8v4", model_dtype="bfloat16", head_dim=128, num_kv_heads=2,
                  capability=(8, 0), block_size=16, vllm_source=str(wheel))  # fmt: skip
    fields.update(changes)
    return DryRunRequest(**fields)


def unbound_parameters(source: str, kernel: str, job) -> list[str]:
    """The kernel's parameters (in this release's source) that the job neither binds nor leaves to a default:
    what the dry run's layout check would refuse."""
    import ast

    fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == kernel)
    defaults = [False] * (len(fn.args.args) - len(fn.args.defaults)) + [True] * len(fn.args.defaults)
    return [a.arg for a, has_default in zip(fn.args.args, defaults)
            if a.arg not in job.signature and a.arg not in job.constexprs and not has_default]  # fmt: skip
