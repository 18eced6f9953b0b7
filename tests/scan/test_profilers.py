"""Batch s76 (stop 42): a command run under a profiler or a placement tool (`nsys profile -t cuda -o x vllm serve`,
`numactl --membind=0 python3 -m vllm...`) is vLLM's after the tool's own options."""

from __future__ import annotations

from scan_support import write_tree

from kvdoctor.scan.run import read_manifests


def test_vllm_under_nsys_and_numactl_is_read_after_their_options(tmp_path):
    nsys = "nsys profile \\\n  -t cuda \\\n  -o moe_dp1tp4 \\\n  vllm serve deepseek-ai/DeepSeek-V2-Lite \\\n    --data-parallel-size 4\n"
    numactl = "numactl --cpunodebind=0 --membind=0 python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B\n"
    root = write_tree(tmp_path / "repo", {"nsys.sh": nsys, "numa.sh": numactl})
    found = {w.file.rsplit("/", 1)[-1]: [t.text for t in w.argv] for w in read_manifests([str(root)])[1]}
    assert found["nsys.sh"] == ["deepseek-ai/DeepSeek-V2-Lite", "--data-parallel-size", "4"]
    assert found["numa.sh"] == ["--model", "Qwen/Qwen3-8B"]


def test_vllm_under_a_systemd_scope_is_read_after_its_options(tmp_path):
    """Batch s80 (pbseiya/vllm-tb250-mining-rig): `systemd-run --user --scope -p MemoryMax=90% python3 -m vllm...`."""
    script = ("systemd-run --user --scope -p MemoryMax=90% \\\n    python3 -m vllm.entrypoints.openai.api_server \\\n"
              "    --model Qwen/Qwen2.5-72B-Instruct-GPTQ-Int8 --tensor-parallel-size 8\n")
    root = write_tree(tmp_path / "repo", {"start_vllm.sh": script})
    (run,) = read_manifests([str(root)])[1]
    assert [t.text for t in run.argv] == ["--model", "Qwen/Qwen2.5-72B-Instruct-GPTQ-Int8", "--tensor-parallel-size", "8"]
