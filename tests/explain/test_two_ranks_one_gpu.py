"""Issue 28, stop 60: two ranks of one NCCL group on the same GPU (KVD457) are told by NCCL's own duplicate-GPU
warning or TRL's refusal, never by the bare `NCCL error: invalid usage` alone (an NCCL built for another CUDA gives
it too)."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text

INVALID_USAGE = "RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)\n"
DUPLICATE = ("node-1:1422836:1422836 [0] init.cc:943 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on "
             "CUDA device 4b000\n")


def _primary(text: str):
    report = explain_text(text)
    return report.findings[0], report.extra.get("family"), report.exit_code("error")


def test_nccl_duplicate_gpu_warning_names_the_ranks_and_the_device():
    finding, family, code = _primary(DUPLICATE + INVALID_USAGE)
    assert (finding.rule_id, family, code) == ("KVD457", "device_placement", 1)
    assert "ranks 1 and 0 both on CUDA device 4b000" in finding.title


def test_trl_refusing_one_device_for_two_roles_is_the_same_family():
    finding, family, _ = _primary("RuntimeError: Attempting to use the same CUDA device for multiple distinct "
                                  "roles/ranks within the same communicator. Ensure that trainer is using different "
                                  "devices than vLLM server.\n")
    assert (finding.rule_id, family) == ("KVD457", "device_placement")


def test_a_bare_invalid_usage_is_not_taken_for_two_ranks_on_one_gpu():
    finding, _, code = _primary(INVALID_USAGE)
    assert finding.rule_id != "KVD457" and code == 1
