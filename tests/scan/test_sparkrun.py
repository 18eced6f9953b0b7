"""SparkRun recipes, written from sparkrun's RECIPES.md (scitrera/sparkrun): the command template's `{placeholders}`
filled from `defaults` and `{model}`, the container, the env mapping, the GB10 of a DGX Spark node; other runtimes
(llama-cpp, sglang) run no vLLM."""

from __future__ import annotations

from scan_support import by_name, scan, write_tree

from kvdoctor.scan.run import find_workloads

FULL = """\
model: nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4
runtime: vllm
min_nodes: 1
container: scitrera/dgx-spark-vllm:0.16.0-t5

metadata:
  description: NVIDIA Nemotron 3 Nano 30B (upstream NVFP4) -- cluster or solo

defaults:
  port: 8000
  host: 0.0.0.0
  tensor_parallel: 1
  gpu_memory_utilization: 0.8
  max_model_len: 200000
  served_model_name: nemotron3-30b-a3b

env:
  VLLM_ALLOW_LONG_MAX_MODEL_LEN: "1"

command: |
  vllm serve \\
      {model} \\
      --served-model-name {served_model_name} \\
      --max-model-len {max_model_len} \\
      --gpu-memory-utilization {gpu_memory_utilization} \\
      -tp {tensor_parallel} \\
      --host {host} \\
      --port {port} \\
      --kv-cache-dtype {kv_dtype}
"""
LLAMA_CPP = """\
model: Qwen/Qwen3-1.7B-GGUF:Q8_0
runtime: llama-cpp
container: scitrera/dgx-spark-llama-cpp:b8076-cu131
defaults:
  port: 8000
command: |
  llama-server -hf {model} --port {port}
"""


def test_a_recipe_fills_its_placeholders_from_defaults_and_the_model(tmp_path):
    tree = write_tree(tmp_path / "r", {"nemotron.yaml": FULL})
    (job,) = find_workloads([str(tree)])[1]
    words = [t.text for t in job.argv]
    assert words[:7] == ["nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4", "--served-model-name", "nemotron3-30b-a3b",
                         "--max-model-len", "200000", "--gpu-memory-utilization", "0.8"]
    assert words[7:9] == ["-tp", "1"] and words[-2] == "--kv-cache-dtype"
    assert words[-1] == "${kv_dtype}"  # a placeholder no default gives: unknown, never a value
    assert job.argv[3].line == FULL.splitlines().index("      --max-model-len {max_model_len} \\") + 1
    assert (job.image, job.name, job.kind) == ("scitrera/dgx-spark-vllm:0.16.0-t5", "nemotron.yaml", "SparkRun recipe")
    assert [(e.name, e.value) for e in job.env] == [("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")]


def test_a_recipe_runs_on_a_dgx_sparks_gb10_and_is_judged(tmp_path):
    tree = write_tree(tmp_path / "r", {"nemotron.yaml": FULL.replace("{kv_dtype}", "fp8")})
    result = by_name(scan([str(tree)], tmp_path / "s", gpu=None))["nemotron.yaml"]
    assert result.report.facts["gpu.name"] == "GB10"
    assert result.report.facts["serve.kv_cache_dtype"] == "fp8"
    assert result.verdict != "PASS"  # its image's tag names no vLLM release


def test_placeholders_chain_and_other_runtimes_run_no_vllm(tmp_path):
    chained = FULL.replace("  port: 8000\n", "  port: 8000\n  listen: \"{host}:{port}\"\n").replace(
        "--port {port}", "--port {port} --middleware-note {listen}")  # fmt: skip
    (job,) = find_workloads([str(write_tree(tmp_path / "c", {"chained.yaml": chained}))])[1]
    words = [t.text for t in job.argv]
    assert words[words.index("--middleware-note") + 1] == "0.0.0.0:8000"  # substituted again, as sparkrun does
    assert find_workloads([str(write_tree(tmp_path / "l", {"gguf.yaml": LLAMA_CPP}))])[1] == []
