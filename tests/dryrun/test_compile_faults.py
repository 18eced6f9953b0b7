"""The compiler runs in a child: hangs, crashes and aborts are results, and kvdoctor carries on.

Faults are forced through the child-only test hook KVDOCTOR_DRYRUN_FAULT (see kvdoctor/dryrun/child.py).
"""

from __future__ import annotations

import pytest
from dryrun_support import founding_request, vllm_wheels  # noqa: F401  (fixtures)

import kvdoctor.dryrun.compiler_process as compiler_process
import kvdoctor.dryrun.kernel_source as kernel_source
from kvdoctor.dryrun import DryRunRequest, run_dry_run

pytestmark = pytest.mark.vllm_wheel


def test_a_hung_compile_times_out(vllm_wheels, monkeypatch):
    monkeypatch.setenv("KVDOCTOR_DRYRUN_FAULT", "hang")
    children = []  # (its kernels, its time limit, its exit status) per compiler child
    start_child = compiler_process.start_child

    def watched(payload, timeout_s, triton_cache):
        outcome = start_child(payload, timeout_s, triton_cache)
        children.append(([job["kernel"] for job in payload], timeout_s, outcome.returncode))
        return outcome

    monkeypatch.setattr(compiler_process, "start_child", watched)
    report = run_dry_run(founding_request(vllm_wheels["0.26.0"]), use_cache=False, timeout_s=1.5)

    # each kernel went to a child once, and each child was killed at the limit (None): no hang, no retry
    assert sorted(k for kernels, _, _ in children for k in kernels) == sorted(k.kernel for k in report.kernels)
    assert all(limit <= 1.5 and status is None for _, limit, status in children), children
    assert report.status == "failed" and report.failure_kind == "timeout"
    assert {k.status for k in report.kernels} == {"timeout"}
    assert "1.5 s" in report.kernels[0].failure.message


def test_a_segfault_costs_only_the_kernel_being_compiled(vllm_wheels, monkeypatch):
    monkeypatch.setenv("KVDOCTOR_DRYRUN_FAULT", "segfault:_tq_fused_store_fp8")
    report = run_dry_run(founding_request(vllm_wheels["0.26.0"]), use_cache=False, timeout_s=30)

    store, stage1, dequant = report.kernels
    assert store.status == "crashed" and store.failure.kind == "crashed"
    assert "SIGSEGV" in store.failure.message and "_tq_fused_store_fp8" in store.failure.message
    assert stage1.status == "passed" and dequant.status == "passed"
    assert report.status == "failed" and report.failure_kind == "crashed"


def test_an_abort_is_reported_with_its_signal(vllm_wheels, monkeypatch):
    monkeypatch.setenv("KVDOCTOR_DRYRUN_FAULT", "abort:_tq_full_dequant_kv")
    report = run_dry_run(founding_request(vllm_wheels["0.26.0"]), use_cache=False, timeout_s=30)

    statuses = [k.status for k in report.kernels]
    assert statuses == ["passed", "passed", "crashed"]
    assert "SIGABRT" in report.kernels[2].failure.message


def test_crashes_are_not_cached(vllm_wheels, monkeypatch, tmp_path):
    monkeypatch.setenv("KVDOCTOR_DRYRUN_FAULT", "segfault:_tq_decode_stage1")
    request = founding_request(vllm_wheels["0.26.0"], capability=(9, 0))
    assert run_dry_run(request, cache_dir=tmp_path).kernels[1].status == "crashed"
    monkeypatch.delenv("KVDOCTOR_DRYRUN_FAULT")
    again = run_dry_run(request, cache_dir=tmp_path)
    assert [(k.status, k.cached) for k in again.kernels] == [("passed", True), ("passed", False), ("passed", True)]


def test_a_target_the_compiler_does_not_know_is_a_finding(monkeypatch):
    # sm_200: the bundled ptxas rejects the target; no fault hook involved
    monkeypatch.setattr(kernel_source, "installed_source", lambda: None)
    request = DryRunRequest("turboquant_k8v4", "float16", 128, 2, (20, 0))
    report = run_dry_run(request, use_cache=False, timeout_s=30)

    assert report.status == "failed" and report.failure_kind == "ptxas_unknown_target"
    assert "sm_200" in report.kernels[0].failure.message
