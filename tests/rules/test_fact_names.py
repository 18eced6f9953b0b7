"""The fact-name registry (data/fact_names.yaml) says exactly what the pipeline produces: every fact the real
collection and derivations give on real scenarios is declared, and every declared fact is given by one of them."""

from __future__ import annotations

import os

import pytest

from conftest import EXAMPLE_MODEL, FIXTURES, REPO
from kvdoctor.data.fact_names import fact_registry, is_fact_name
from kvdoctor.facts.collect import CheckOptions, collect_facts
from kvdoctor.facts.derive import derive_dryrun_facts, derive_kv_facts
from kvdoctor.model.dry_run import CompileFailure, DryRunReport, DryRunRequest, KernelResult, Status

DEEPSEEK = REPO / "examples" / "deepseek-v2-lite-chat"
# Every input the derivations need is known in each, so each derivation runs its real branch (not the all-unknown one).
SCENARIOS = [
    dict(model=str(EXAMPLE_MODEL), gpu="A100", vllm_version="0.25.1"),
    dict(model=str(EXAMPLE_MODEL), gpu="sm_120", vllm_version="0.33.0", kv_cache_dtype="fp8",
         serve_argv=("vllm", "serve", str(EXAMPLE_MODEL), "--max-num-seqs", "8")),
    dict(model=str(DEEPSEEK), gpu="H100", vllm_version="0.26.0", kv_cache_dtype="fp8", tensor_parallel_size=2),
    dict(model=str(EXAMPLE_MODEL), gpu="T4", vllm_version="0.25.1", kv_cache_dtype="fp9"),
    dict(model=str(EXAMPLE_MODEL), gpu="A100", vllm_version="0.25.1", attention_backend="FLASH_ATN"),
]


def _dry_run() -> DryRunReport:
    """A failed dry run, as the compile step reports one."""
    request = DryRunRequest(kv_cache_dtype="fp8", model_dtype="bfloat16", head_dim=128, num_kv_heads=2,
                            capability=(7, 5), vllm_version="0.25.1")  # fmt: skip
    failure = CompileFailure(kind="bf16_to_fp8e4b15_assert", innermost_type="AssertionError", innermost_message="no")
    kernel = KernelResult(kernel="_fwd_kernel", role="decode", source_file="vllm/x.py", status=Status.FAILED,
                          seconds=0.1, cached=False, failure=failure)  # fmt: skip
    return DryRunReport(Status.FAILED, request, (kernel,), "vLLM 0.25.1", "0.25.1", "3.6.0", "failed", 0.1)


def produced_check_facts() -> dict[str, object]:
    """Names -> a value, from kvdoctor check's own collection and derivations over the scenarios."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")} | {"VLLM_USE_V2_MODEL_RUNNER": "1"}
    produced: dict[str, object] = {}
    for scenario in SCENARIOS:
        facts = collect_facts(CheckOptions(**scenario, offline=True, resolve_kernels=False, environ=environ))
        flat = facts.flat() | derive_kv_facts(facts) | derive_dryrun_facts(_dry_run(), {"bf16_to_fp8e4b15_assert"})
        assert flat["attention.backend"] is not None and flat["vllm.model_runner"] is not None, scenario
        produced |= flat
    return produced


def test_every_fact_check_produces_is_declared_and_every_declared_fact_is_produced():
    produced = produced_check_facts()
    closed = {name for name in produced if not name.startswith("env.")}
    assert closed == set(fact_registry().names())
    assert [name for name in produced if name.startswith("env.")] == ["env.VLLM_USE_V2_MODEL_RUNNER"]
    assert all(is_fact_name(name) for name in produced)


def test_every_deploy_fact_scan_produces_is_declared_and_every_declared_one_is_produced():
    from kvdoctor.check.run import CheckSettings
    from kvdoctor.scan.facts import deployment_facts, is_scan_fact_name
    from kvdoctor.scan.judge import ScanDefaults
    from kvdoctor.scan.run import find_workloads

    manifests = FIXTURES / "manifests"
    _, workloads, _ = find_workloads([str(manifests / "unpinned-and-secret.yaml"), str(manifests / "kinds.yaml"),
                                      str(manifests / "acceptance"), str(manifests / "command-as-options.yaml"),
                                      str(manifests / "rocm.yaml"),
                                      str(manifests / "compose-not-as-written.yaml"),
                                      str(manifests / "trl-server.sh"), str(manifests / "cuda-visible-all.yaml"),
                                      str(manifests / "kaito-workspace.yaml")])  # fmt: skip
    known = set()
    for workload in workloads:
        deployment = deployment_facts(workload, ScanDefaults(gpu="A100"), CheckSettings())
        flat = deployment.flat({"serve.tensor_parallel_size": 1, "serve.pipeline_parallel_size": 1})
        known |= {name for name, value in flat.items() if value is not None}
    assert known == set(fact_registry().names(produced_by="deploy"))
    assert all(is_scan_fact_name(name) and not is_fact_name(name) for name in known)  # scan rules only


def test_derived_facts_name_declared_inputs_and_every_hint_a_declared_namespace():
    registry = fact_registry()
    namespaces = {name.split(".")[0] for name in registry.facts}
    assert all(set(f.derived_from) <= set(registry.facts) for f in registry.facts.values())
    assert set(registry.hints) | set(registry.hints_once_read) <= namespaces
    assert all(f.about.strip() for f in registry.facts.values())


@pytest.mark.parametrize("name, expected", [
    ("attention.backend", True), ("env.VLLM_USE_V2_MODEL_RUNNER", True), ("env.", False),
    ("deploy.gpu_limit", False), ("attention.backends", False), ("kv.accepted", True),
])  # fmt: skip
def test_rules_may_test_declared_names_and_any_env_variable(name, expected):
    assert is_fact_name(name) is expected


def test_rules_facts_lists_the_registry(run_cli):
    result = run_cli("rules", "--facts")
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines() == [*sorted(fact_registry().names()), "env.<VLLM_* variable>"]
