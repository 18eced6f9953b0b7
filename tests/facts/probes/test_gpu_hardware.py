"""On a real NVIDIA GPU: kvdoctor's dry-run verdicts equal what the hardware does (gpu_verify/).

Marked `gpu`; skipped where torch sees no CUDA GPU (CI) or no vLLM kernel trees can be had. Trees come from
$KVDOCTOR_GPU_TREES (one unpacked vLLM tree per version), else .gpu-carry/, else the wheels in
$KVDOCTOR_VLLM_WHEELS (extracted to a temporary directory).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from dryrun_support import wheel_dir

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO))

pytestmark = pytest.mark.gpu

MEMBERS = ("vllm/v1/attention/ops/triton_turboquant_store.py", "vllm/v1/attention/ops/triton_turboquant_decode.py",
           "vllm/v1/attention/ops/triton_decode_attention.py")  # fmt: skip


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if not _cuda():
        pytest.skip("no CUDA GPU visible to torch")
    from gpu_verify.run_on_gpu import _trees

    for root in (os.environ.get("KVDOCTOR_GPU_TREES"), REPO / ".gpu-carry"):
        if root and Path(root).is_dir() and _trees(Path(root)):
            return _trees(Path(root))
    wheels = sorted(wheel_dir().glob("vllm-*.whl"))
    if not wheels:
        pytest.skip("no vLLM kernel trees or wheels (set KVDOCTOR_GPU_TREES or KVDOCTOR_VLLM_WHEELS)")
    root = tmp_path_factory.mktemp("vllm-trees")
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist() if n in MEMBERS or n.endswith(".dist-info/METADATA")]
            zf.extractall(root / wheel.name.split("-")[1], names)
    return _trees(root)


@pytest.fixture(scope="module")
def dry_run_rows(trees) -> list[dict]:
    from gpu_verify.run_on_gpu import dry_runs

    return dry_runs(trees)["rows"]


def test_check_without_gpu_flag_reads_this_gpu_through_nvml(tmp_path):
    if not _cuda():
        pytest.skip("no CUDA GPU visible to torch")
    import torch

    out = tmp_path / "report.json"
    env = {**os.environ, "KVDOCTOR_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "kvdoctor", "check", "--model", str(REPO / "examples/qwen2.5-3b-instruct"),
                    "--kv-cache-dtype", "turboquant_k8v4", "--no-compile", "--offline", "-f", "json", "-o", str(out)],
                   env=env, cwd=REPO, capture_output=True, timeout=300)  # fmt: skip
    facts = json.loads(out.read_text())["facts"]
    props = torch.cuda.get_device_properties(0)
    assert facts["gpu.source"] == "nvml"
    assert facts["gpu.name"] == props.name
    assert facts["gpu.capability"] == float(f"{props.major}.{props.minor}")
    assert abs(facts["gpu.memory_gib"] - props.total_memory / 2**30) < 1.0
    assert facts["gpu.driver_version"]


def test_every_dry_run_verdict_equals_the_launch(trees, dry_run_rows):
    from gpu_verify.run_on_gpu import launches

    rows = launches(trees, dry_run_rows)
    assert rows
    disagree = [r for r in rows if r["comparable"] and not r["agree"]]
    assert not disagree, disagree


def test_forced_e4b15_on_this_gpu_fails_for_unfixed_bf16_and_passes_when_fixed(trees):
    from gpu_verify.run_on_gpu import launchers

    if not {"0.25.1", "0.26.0"} <= set(trees):
        pytest.skip("needs vLLM 0.25.1 and 0.26.0 trees")
    rows = {(r["vllm"], r["dtype"], r["fp8_e4b15"]): r for r in launchers(trees)}
    assert rows[("0.25.1", "bfloat16", 1)]["store"].startswith("failed")
    for key in [("0.25.1", "float16", 1), ("0.26.0", "bfloat16", 1), ("0.26.0", "float16", 1), ("0.25.1", "bfloat16", 0)]:
        assert rows[key]["store"] == "passed" and rows[key]["decode"] == "passed", rows[key]


def test_e4b15_keys_lose_more_than_e4nv_keys(trees):
    from gpu_verify.roundtrip import measure
    from gpu_verify.vllm_kernels import load_kernels

    kernels = load_kernels(trees[max(trees)])
    e4nv = measure(kernels, "fp16", 0, [1.0, 2.0], tokens=512)
    e4b15 = measure(kernels, "fp16", 1, [1.0, 2.0], tokens=512)
    for nv, b15 in zip(e4nv, e4b15):
        assert nv["torch_vs_vllm_decode_max_diff"] == 0.0 and b15["torch_vs_vllm_decode_max_diff"] == 0.0
        assert b15["rel_error"] > 2 * nv["rel_error"]
