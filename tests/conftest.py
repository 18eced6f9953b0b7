"""Shared fixtures: real model configs, an HF cache holding them, and a CLI runner in a subprocess. Under
KVDOCTOR_CI=1 a skip fails the test (ci_support.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ci_support import pytest_make_collect_report, pytest_runtest_makereport, pytest_terminal_summary  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
CONFIGS = FIXTURES / "configs"
EXAMPLE_MODEL = REPO / "examples" / "qwen2.5-3b-instruct"
SCHEMA = REPO / "kvdoctor" / "schemas" / "report.schema.json"


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Starts the slow pack builds the collected tests wait on in the background (builds_ahead.py)."""
    from builds_ahead import schedule_collected

    schedule_collected(session)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes the vllm_wheels fixture reads a wheel: it carries the vllm_wheel marker (-m selects it)."""
    for item in items:
        if "vllm_wheels" in getattr(item, "fixturenames", ()) and item.get_closest_marker("vllm_wheel") is None:
            item.add_marker(pytest.mark.vllm_wheel)


@pytest.fixture
def hf_cache(tmp_path: Path) -> Path:
    """A Hugging Face hub cache holding Qwen/Qwen2.5-3B-Instruct's config.json, laid out as the hub lays it."""
    cache = tmp_path / "hf-hub"
    revision = "aa8e72537993ba99e69dfaafa59ed015b17504d1"
    repo = cache / "models--Qwen--Qwen2.5-3B-Instruct"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    shutil.copy(EXAMPLE_MODEL / "config.json", snapshot / "config.json")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    return cache


@pytest.fixture
def cli_env(tmp_path: Path, hf_cache: Path) -> dict[str, str]:
    """Environment for a kvdoctor run: offline, private caches, no GPU visible."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KVDOCTOR_", "HF_"))}
    env.update(
        HF_HUB_CACHE=str(hf_cache),
        HF_HUB_OFFLINE="1",
        KVDOCTOR_CACHE_DIR=str(tmp_path / "kvdoctor-cache"),
        PYTHONPATH=str(REPO),
    )
    wheels = os.environ.get("KVDOCTOR_VLLM_WHEELS")
    if wheels:
        env["KVDOCTOR_VLLM_WHEELS"] = wheels
    return env


@pytest.fixture
def run_cli(cli_env: dict[str, str]):
    def run(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> CliResult:
        proc = subprocess.run(
            [sys.executable, "-m", "kvdoctor", *args],
            capture_output=True,
            text=True,
            env={**cli_env, **(env or {})},
            input=stdin,
            timeout=300,
            cwd=cli_env.get("KVDOCTOR_TEST_CWD", str(REPO)),
        )
        return CliResult(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture(scope="session")
def report_schema() -> dict:
    return json.loads(SCHEMA.read_text())


def assert_valid_report(document: dict, schema: dict) -> None:
    import jsonschema

    jsonschema.validate(document, schema)
