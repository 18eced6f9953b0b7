"""vLLM's Triton MLA decode kernels (TRITON_MLA), compiled from released wheels as TritonMLAImpl launches them."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from conftest import assert_valid_report
from dryrun_support import dryrun_cache, unbound_parameters, wheel_at_hand, wheel_dir  # noqa: F401 - fixture
from kvdoctor.dryrun import DryRunRequest, run_dry_run
from kvdoctor.dryrun.kernel_source import KERNEL_FILES
from kvdoctor.dryrun.plans_mla import DECODE_ATTENTION_FILE, MLA_BACKEND_FILE, plan_triton_mla
from kvdoctor.dryrun.runner import dry_run_applies, kernel_family, why_nothing_to_compile
from kvdoctor.dryrun.wheel_fetch import fetch_release

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "deepseek-v2-lite-chat"
KERNELS = ("_fwd_grouped_kernel_stage1", "_fwd_kernel_stage1", "_fwd_kernel_stage2")


def _request(version: str, kv: str = "fp8", cap=(8, 0), **changes) -> DryRunRequest:
    """DeepSeek-V2-Lite on one GPU: 576 = 512 latent + 64 rope, one latent head, 16 query heads."""
    fields = dict(kv_cache_dtype=kv, model_dtype="bfloat16", head_dim=576, num_kv_heads=1, capability=cap,
                  vllm_source=str(wheel_at_hand(version)), backend="TRITON_MLA", num_q_heads=16, kv_lora_rank=512)  # fmt: skip
    return DryRunRequest(**(fields | changes))


def test_example_config_is_deepseek_v2_lite():
    config = json.loads((EXAMPLE / "config.json").read_text())
    assert (config["kv_lora_rank"], config["qk_rope_head_dim"], config["num_attention_heads"]) == (512, 64, 16)


def test_which_kernels_follow_the_mla_backend():
    assert kernel_family("fp8", "TRITON_MLA") == kernel_family("auto", "TRITON_MLA") == "triton_mla"
    assert not dry_run_applies("fp8_e5m2", "TRITON_MLA")  # not in TritonMLABackend.supported_kv_cache_dtypes
    assert "does not list --kv-cache-dtype fp8_e5m2" in why_nothing_to_compile("fp8_e5m2", "TRITON_MLA")
    assert not dry_run_applies("fp8", "FLASHMLA")
    assert DECODE_ATTENTION_FILE in KERNEL_FILES and MLA_BACKEND_FILE in KERNEL_FILES  # fetched with the rest


def test_plan_follows_the_launcher():
    stage1, stage2 = plan_triton_mla("fp8", "bf16", 512, 64, 16, (8, 0), 16)
    assert stage1.kernel == "_fwd_grouped_kernel_stage1" and (stage1.num_warps, stage1.num_stages) == (4, 2)
    c = stage1.constexprs
    assert (c["BLOCK_DMODEL"], c["BLOCK_DPE"], c["BLOCK_DV"], c["BLOCK_H"], c["Lk"], c["Lv"]) == (512, 64, 512, 16, 576, 512)
    assert c["IS_MLA"] is True and c["kv_group_num"] == 16
    assert stage1.signature["K_Buffer"] == "*fp8e4nv" and stage1.signature["Q"] == "*bf16"
    assert stage2.signature["o"] == stage2.signature["lse"] == "*bf16" and stage2.signature["Mid_O"] == "*fp32"
    plain, _ = plan_triton_mla("auto", "fp16", 512, 64, 1, (9, 0), 16)  # TP = num_heads: one head per rank
    assert plain.kernel == "_fwd_kernel_stage1" and plain.constexprs["BLOCK_DMODEL"] == 1024
    assert plain.signature["K_Buffer"] == "*fp16"


def test_fp8_on_a100_before_the_guard_fails_on_fp8e4nv_in_vllms_own_decode_kernel(dryrun_cache):  # noqa: F811
    report = run_dry_run(_request("0.23.0"), cache_dir=dryrun_cache)
    assert report.status == "failed" and report.failure_kind == "fp8e4nv_unsupported_arch"
    assert "guard" not in {k.role for k in report.kernels}
    stage1, stage2 = report.kernels
    assert (stage1.kernel, stage1.status) == ("_fwd_grouped_kernel_stage1", "failed")
    assert "fp8e4nv not supported" in stage1.failure.innermost_message
    assert stage1.failure.kernel_file == DECODE_ATTENTION_FILE and stage2.status == "passed"


def test_fp8_on_h100_compiles(dryrun_cache):  # noqa: F811
    report = run_dry_run(_request("0.25.1", cap=(9, 0)), cache_dir=dryrun_cache)
    assert report.status == "passed", report.reason
    assert [k.kernel for k in report.kernels] == ["_fwd_grouped_kernel_stage1", "_fwd_kernel_stage2"]


def test_from_0_26_the_guard_is_the_cause_and_the_compile_shows_what_it_protects_from(dryrun_cache):  # noqa: F811
    report = run_dry_run(_request("0.33.0"), cache_dir=dryrun_cache)
    guard = report.kernels[0]
    assert report.failure_kind == "triton_mla_fp8_guard" and guard.kernel == "TritonMLAImpl.__init__"
    assert guard.failure.kernel_file == MLA_BACKEND_FILE and "raise ValueError" in guard.failure.kernel_source_line
    assert "Triton MLA backend" in guard.failure.message
    assert report.kernels[1].failure.kind == "fp8e4nv_unsupported_arch"
    before = run_dry_run(_request("0.25.1"), cache_dir=dryrun_cache)  # 0.25.1 has no MLA guard yet
    assert before.failure_kind == "fp8e4nv_unsupported_arch" and before.kernels[0].role == "decode"


def test_unquantized_kv_is_the_verified_fix(dryrun_cache):  # noqa: F811
    report = run_dry_run(_request("0.33.0", kv="auto"), cache_dir=dryrun_cache)
    assert report.status == "passed" and report.kernels[0].inputs["signature"]["K_Buffer"] == "*bf16"


def test_without_the_latent_width_nothing_is_guessed(dryrun_cache):  # noqa: F811
    report = run_dry_run(_request("0.25.1", kv_lora_rank=None), cache_dir=dryrun_cache)
    assert report.status == "skipped" and "kv_lora_rank" in report.reason and report.kernels == ()


def test_a_parameter_kvdoctor_does_not_know_is_a_changed_layout_not_a_guess(tmp_path, dryrun_cache):  # noqa: F811
    tree = tmp_path / "tree"
    with zipfile.ZipFile(wheel_at_hand("0.25.1")) as zf:
        for rel in (DECODE_ATTENTION_FILE, MLA_BACKEND_FILE):
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).write_bytes(zf.read(rel))
    path = tree / DECODE_ATTENTION_FILE
    path.write_text(path.read_text().replace("    BLOCK_H: tl.constexpr,\n", "    BLOCK_H: tl.constexpr,\n    NEW_KNOB: tl.constexpr,\n", 1))
    report = run_dry_run(_request("0.25.1", vllm_source=str(tree), cap=(9, 0)), cache_dir=dryrun_cache)
    stage1 = report.kernels[0]
    assert stage1.status == "skipped" and stage1.failure.kind == "layout_changed" and "NEW_KNOB" in stage1.failure.message


def test_every_released_kernel_parameter_is_bound_or_defaulted():
    """Near miss for the layout check: every release at hand binds completely (without compiling)."""
    wheels = sorted(wheel_dir().glob("vllm-*.whl"))
    if not wheels:
        pytest.skip("no vLLM wheels at hand")
    jobs = {j.kernel: j for heads in (16, 1) for j in plan_triton_mla("fp8", "bf16", 512, 64, heads, (8, 0), 16)}
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            if DECODE_ATTENTION_FILE not in zf.namelist():
                continue  # before 0.14 it lived under vllm/attention/ops/: the dry run says it is not there
            source = zf.read(DECODE_ATTENTION_FILE).decode()
        for kernel in KERNELS:
            unknown = unbound_parameters(source, kernel, jobs[kernel])
            assert not unknown, f"{wheel.name} {kernel}: {unknown}"


def test_a_release_fetched_before_mla_is_fetched_again_with_the_mla_files(tmp_path):
    """A cache an older kvdoctor filled (no MLA files in its marker) is not taken as complete."""
    root = tmp_path / "vllm-kernels" / "0.25.1"
    (root / "vllm").mkdir(parents=True)
    (root / "kvdoctor-fetch.json").write_text(json.dumps({"members": {"vllm/x.py": "0"}, "absent": []}))
    offline = fetch_release("0.25.1", tmp_path, KERNEL_FILES, offline=True)
    assert offline.root == root and not offline.fetched  # offline: what is there, the rest said per kernel
    from kvdoctor.dryrun.wheel_fetch import cached_release

    assert cached_release("0.25.1", tmp_path, KERNEL_FILES) is None
    assert cached_release("0.25.1", tmp_path) == root


@pytest.mark.parametrize("version, gpu, code, kind, kernels", [
    ("0.23.0", "A100", 1, "fp8e4nv_unsupported_arch", [("_fwd_grouped_kernel_stage1", "failed"), ("_fwd_kernel_stage2", "passed")]),
    ("0.25.1", "A100", 1, "fp8e4nv_unsupported_arch", [("_fwd_grouped_kernel_stage1", "failed"), ("_fwd_kernel_stage2", "passed")]),
    ("0.33.0", "A100", 1, "triton_mla_fp8_guard", [("TritonMLAImpl.__init__", "failed"), ("_fwd_grouped_kernel_stage1", "failed"), ("_fwd_kernel_stage2", "passed")]),
    ("0.33.0", "H100", 0, None, [("_fwd_grouped_kernel_stage1", "passed"), ("_fwd_kernel_stage2", "passed")]),
])  # fmt: skip
def test_cli_fp8_on_triton_mla(run_cli, report_schema, version, gpu, code, kind, kernels):
    """The example MLA config through `check`: the request carries the latent width, the kernels are vLLM's."""
    wheel_at_hand(version)
    result = run_cli("check", "--model", str(EXAMPLE), "--kv-cache-dtype", "fp8", "--attention-backend", "TRITON_MLA",
                     "--gpu", gpu, "--vllm-version", version, "-f", "json",
                     env={"KVDOCTOR_VLLM_WHEELS": str(wheel_dir())})  # fmt: skip
    assert result.code == code, result.stdout + result.stderr
    assert_valid_report(json.loads(result.stdout), report_schema)  # the MLA roles (decode, reduce, guard) too
    dry_run = json.loads(result.stdout)["dry_run"]
    assert dry_run["source_label"].startswith(f"vLLM {version} kernels") and dry_run["failure_kind"] == kind
    assert [(k["kernel"], k["status"]) for k in dry_run["kernels"]] == kernels
    assert dry_run["request"]["kv_lora_rank"] == 512 and dry_run["request"]["head_dim"] == 576
    errors = {f["rule_id"] for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"}
    # the MLA rule explains the compile (guard or fp8e4nv); the Triton attention rule that shares the kind
    # does not fire against its own conditions, and nothing is left to the unknown-failure rule
    assert errors == ({"KVD112"} if code else set())
    if code:
        fixes = next(f for f in json.loads(result.stdout)["findings"] if f["rule_id"] == "KVD112")["fixes"]
        assert fixes[0]["verified"] == "verified"
