"""The shipped pack is what the builder makes from vLLM's released wheels, byte for byte (issue 11 acceptance)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from dryrun_support import wheel_dir

from kvdoctor.builders.vllm_pack.build import is_legacy
from kvdoctor.builders.vllm_pack.wheel import find_wheel

REPO = Path(__file__).resolve().parents[2]
WHEELS = wheel_dir()
PACK_PYTHON = os.environ.get("KVDOCTOR_PACK_PYTHON")


@pytest.mark.vllm_wheel
@pytest.mark.parametrize("version", ["0.25.1", "0.34.0", "0.6.6.post1"])  # 0.6: the pre-0.7 path (~20 s)
def test_rebuild_from_the_wheel_is_byte_identical(version, tmp_path):
    if not PACK_PYTHON:
        pytest.skip("KVDOCTOR_PACK_PYTHON (the builder's venv, made by .ci/run) is not set")
    if find_wheel(WHEELS, version) is None:
        pytest.skip(f"no vllm-{version} wheel in {WHEELS}")
    proc = subprocess.run(
        [PACK_PYTHON, "-m", "kvdoctor.builders.vllm_pack", "--python", PACK_PYTHON, "--wheels", str(WHEELS),
         "--versions", version, "--out", str(tmp_path), "--samples-out", str(tmp_path / "samples")],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shipped = REPO / "kvdoctor" / "data" / "vllm_pack"
    core = f"{version}.json.gz" if is_legacy(version) else f"{version}.json"
    for name in (core, f"{version}.detail.json.gz"):
        assert (tmp_path / name).read_bytes() == (shipped / name).read_bytes(), f"{name} differs from the rebuild"
    samples = REPO / "tests" / "vllm_pack" / "samples" / f"{version}.json.gz"
    if samples.exists() or (tmp_path / "samples" / f"{version}.json.gz").exists():  # none before 0.7: no selector read
        assert (tmp_path / "samples" / f"{version}.json.gz").read_bytes() == samples.read_bytes()
