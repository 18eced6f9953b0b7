"""vLLM's Triton attention kernels (TRITON_ATTN), compiled from released wheels as the dry run plans them."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from dryrun_support import dryrun_cache, unbound_parameters, wheel_at_hand, wheel_dir  # noqa: F401 - fixture
from kvdoctor.dryrun import DryRunRequest, run_dry_run
from kvdoctor.dryrun.plans_attention import RESHAPE_FILE, UNIFIED_FILE, plan_triton_attention
from kvdoctor.dryrun.runner import dry_run_applies, kernel_family

KERNELS = {RESHAPE_FILE: ("reshape_and_cache_kernel_flash",), UNIFIED_FILE: ("kernel_unified_attention", "reduce_segments")}


def _request(version: str, kv: str = "fp8", cap=(8, 0), **changes) -> DryRunRequest:
    fields = dict(kv_cache_dtype=kv, model_dtype="bfloat16", head_dim=128, num_kv_heads=2, capability=cap,
                  vllm_source=str(wheel_at_hand(version)), backend="TRITON_ATTN", num_q_heads=16)  # fmt: skip
    return DryRunRequest(**(fields | changes))


def test_which_kernels_follow_the_backend():
    assert kernel_family("turboquant_k8v4", "TRITON_ATTN") == "turboquant"
    assert kernel_family("fp8", "TRITON_ATTN") == kernel_family("auto", "TRITON_ATTN") == "triton_attention"
    assert kernel_family("fp8", None) == "probe"  # backend unknown: kvdoctor's probe of the conversion
    assert not dry_run_applies("fp8", "FLASH_ATTN") and not dry_run_applies("auto", None)


def test_flash_attn_says_its_kernels_are_not_triton(dryrun_cache):  # noqa: F811
    report = run_dry_run(_request("0.25.1", backend="FLASH_ATTN"), cache_dir=dryrun_cache)
    assert report.status == "skipped" and "not Triton kernels" in report.reason and report.kernels == ()


def test_fp8_on_a100_before_the_guard_fails_on_fp8e4nv_in_vllms_own_kernels(dryrun_cache):  # noqa: F811
    report = run_dry_run(_request("0.23.0"), cache_dir=dryrun_cache)
    assert report.status == "failed" and report.failure_kind == "fp8e4nv_unsupported_arch"
    assert report.vllm_version == "0.23.0" and "guard" not in {k.role for k in report.kernels}
    store = report.kernels[0]
    assert (store.kernel, store.role, store.status) == ("reshape_and_cache_kernel_flash", "store", "failed")
    assert "fp8e4nv not supported" in store.failure.innermost_message
    assert store.failure.kernel_file == RESHAPE_FILE
    roles = {k.role: k.status for k in report.kernels if k.kernel == "kernel_unified_attention"}
    assert roles == {"attention_2d": "failed", "attention_3d": "failed"}
    assert store.inputs["signature"]["key_cache_ptr"] == "*fp8e4nv" and store.inputs["target"] == "sm_80"


def test_fp8_on_h100_compiles(dryrun_cache):  # noqa: F811
    report = run_dry_run(_request("0.23.0", cap=(9, 0)), cache_dir=dryrun_cache)
    assert report.status == "passed", report.reason
    assert [k.kernel for k in report.kernels] == ["reshape_and_cache_kernel_flash", "kernel_unified_attention",
                                                  "kernel_unified_attention", "reduce_segments"]  # fmt: skip


def test_from_0_24_the_guard_is_the_cause_and_the_compile_shows_what_it_protects_from(dryrun_cache):  # noqa: F811
    report = run_dry_run(_request("0.33.0"), cache_dir=dryrun_cache)
    guard = report.kernels[0]
    assert report.failure_kind == "triton_attn_fp8_guard" and guard.role == "guard"
    assert guard.failure.exc_type == "ValueError" and "fp8e4nv" in guard.failure.message
    assert guard.failure.kernel_file == "vllm/v1/attention/backends/triton_attn.py"
    assert "raise ValueError" in guard.failure.kernel_source_line
    assert {k.failure.kind for k in report.kernels[1:] if k.failure} == {"fp8e4nv_unsupported_arch"}


def test_unquantized_kv_is_the_verified_fix(dryrun_cache):  # noqa: F811
    report = run_dry_run(_request("0.33.0", kv="auto"), cache_dir=dryrun_cache)
    assert report.status == "passed" and report.kernels[0].inputs["signature"]["key_cache_ptr"] == "*bf16"


def _tree_with_extra_param(version: str, dest: Path) -> Path:
    with zipfile.ZipFile(wheel_at_hand(version)) as zf:
        for rel in (RESHAPE_FILE, UNIFIED_FILE, "vllm/v1/attention/ops/triton_attention_helpers.py",
                    "vllm/v1/attention/backends/triton_attn.py"):  # fmt: skip
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            (dest / rel).write_bytes(zf.read(rel))
    path = dest / RESHAPE_FILE
    text = path.read_text()
    path.write_text(text.replace("    TILE_SIZE: tl.constexpr,\n", "    TILE_SIZE: tl.constexpr,\n    NEW_KNOB: tl.constexpr,\n", 1))
    return dest


def test_a_parameter_kvdoctor_does_not_know_is_a_changed_layout_not_a_guess(tmp_path, dryrun_cache):  # noqa: F811
    tree = _tree_with_extra_param("0.25.1", tmp_path / "tree")
    report = run_dry_run(_request("0.25.1", vllm_source=str(tree), cap=(9, 0)), cache_dir=dryrun_cache)
    store = report.kernels[0]
    assert store.status == "skipped" and store.failure.kind == "layout_changed" and "NEW_KNOB" in store.failure.message
    assert report.status == "skipped"


def test_every_released_kernel_parameter_is_bound_or_defaulted():
    """Near miss for the layout check: every release at hand binds completely (without compiling)."""
    wheels = sorted(wheel_dir().glob("vllm-*.whl"))
    if not wheels:
        pytest.skip("no vLLM wheels at hand")
    jobs = {j.kernel: j for j in plan_triton_attention("fp8", "bf16", 128, 2, 16, (8, 0), 16, "0.25.1")}
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            names = set(zf.namelist())
            for rel, kernels in KERNELS.items():
                if rel not in names:
                    continue
                source = zf.read(rel).decode()
                for kernel in kernels:
                    if f"def {kernel}(" not in source:
                        continue  # an older layout of the file (before 0.20): not what the plans bind
                    unknown = unbound_parameters(source, kernel, jobs[kernel])
                    assert not unknown, f"{wheel.name} {kernel}: {unknown}"


@pytest.mark.parametrize("version, gpu, code, rule, evidence", [
    ("0.23.0", "A100", 1, "KVD110", "compiled reshape_and_cache_kernel_flash (store): failed"),
    ("0.23.0", "H100", 0, None, None),
    ("0.33.0", "A100", 1, "KVD111", "checked TritonAttentionImpl.__init__ (guard): failed"),
])  # fmt: skip
def test_cli_fp8_on_triton_attention(run_cli, version, gpu, code, rule, evidence):
    wheel_at_hand(version)
    result = run_cli("check", "--model", "examples/qwen2.5-3b-instruct", "--kv-cache-dtype", "fp8",
                     "--attention-backend", "TRITON_ATTN", "--gpu", gpu, "--vllm-version", version,
                     env={"KVDOCTOR_VLLM_WHEELS": str(wheel_dir())})  # fmt: skip
    assert result.code == code, result.stdout + result.stderr
    if rule:
        assert f"ERROR {rule}" in result.stdout and evidence in result.stdout
        assert f"dry run: vLLM {version} kernels" in result.stdout
        assert "--kv-cache-dtype auto  verified by compile" in result.stdout
        assert "FLASHINFER backend's kernels are not Triton kernels" in result.stdout
    other = {"KVD110": "KVD111", "KVD111": "KVD110"}.get(rule)
    assert other is None or f"ERROR {other}" not in result.stdout
