"""CUDA_VISIBLE_DEVICES as a workload sets it is the GPUs CUDA shows vLLM (issue 27, batch s105: a Compose service with
CUDA_VISIBLE_DEVICES "all"): CUDA stops at the first entry that is no index or UUID, so `all` hides every GPU
(KVD216), and a shorter list than -tp x -pp is the shortfall KVD201 names with the variable as its resource."""

from __future__ import annotations

from kvdoctor.scan.visible_devices import _read


def test_cuda_reads_entries_up_to_the_first_it_cannot():
    assert _read("0,1", 3).count == 2
    assert _read("GPU-8f3a2c1e-1b2c-4d5e-9f00-aabbccddeeff,1", 3).count == 2
    assert _read("0,all,2", 3).count == 1
    assert _read("all", 3).count == 0 and "CUDA stops at 'all'" in _read("all", 3).resource


def test_an_empty_or_substituted_value_is_unknown_here():
    assert _read("", 3) is None and _read("$GPUS", 3) is None and _read("${CUDA_VISIBLE_DEVICES:-0}", 3) is None


def _fired(tmp_path, name: str, text: str) -> dict:
    from scan_support import scan

    (tmp_path / name).write_text(text)
    (result,) = scan([str(tmp_path / name)], tmp_path).workloads
    return {p.finding.rule_id: p for p in result.placed if p.finding.status == "fired"}


def test_all_in_a_compose_environment_hides_every_gpu(tmp_path):
    fired = _fired(tmp_path, "docker-compose.yml", """\
services:
  vllm:
    image: vllm/vllm-openai:v0.8.5
    environment:
      CUDA_VISIBLE_DEVICES: "all"
    command: --model Qwen/Qwen2-0.5B-Instruct
""")
    assert "KVD216" in fired and fired["KVD216"].location.line == 5


def test_a_list_shorter_than_the_parallel_sizes_is_a_shortfall_at_the_variable(tmp_path):
    fired = _fired(tmp_path, "serve.sh", "CUDA_VISIBLE_DEVICES=0 vllm serve Qwen/Qwen2.5-7B --tensor-parallel-size 2\n")
    assert "KVD201" in fired and "CUDA_VISIBLE_DEVICES=0" in fired["KVD201"].finding.cause
    assert "KVD216" not in fired


def test_a_list_that_covers_the_parallel_sizes_is_no_finding(tmp_path):
    fired = _fired(tmp_path, "serve.sh", "CUDA_VISIBLE_DEVICES=2,3 vllm serve Qwen/Qwen2.5-7B -tp 2\n")
    assert not {"KVD201", "KVD202", "KVD216"} & set(fired)
