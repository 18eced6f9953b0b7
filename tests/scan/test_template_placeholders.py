"""Batch s77 (stop 42): a recipe's command template (spark-vllm-docker's `command: vllm serve ... --port {port}`)
takes its `{placeholders}` from the document's own `defaults`; one no mapping gives is an unknown value, never the
literal `{name}` judged as the flag's value (four false errors of batch s77, fresh)."""

from __future__ import annotations

from scan_support import write_tree

from kvdoctor.scan.run import read_manifests

RECIPE = """\
name: Qwen3.5-122B-FP8
defaults:
  port: 8000
  tensor_parallel: 2
  max_model_len: 262144
command: |
  vllm serve Qwen/Qwen3.5-122B-A10B-FP8 \\
    --max-model-len {max_model_len} \\
    --port {port} \\
    -tp {tensor_parallel} --max-num-seqs {max_num_seqs}
"""


def test_a_recipes_placeholders_are_filled_from_its_defaults_and_the_rest_left_unknown(tmp_path):
    root = write_tree(tmp_path / "repo", {"recipes/qwen.yaml": RECIPE})
    (workload,) = read_manifests([str(root / "recipes" / "qwen.yaml")])[1]
    words = [t.text for t in workload.argv]
    assert words[:7] == ["Qwen/Qwen3.5-122B-A10B-FP8", "--max-model-len", "262144", "--port", "8000", "-tp", "2"]
    assert words[-1] == "${max_num_seqs}"  # unknown, not '{max_num_seqs}'
    assert any("filled from the document's defaults" in note for note in workload.notes)
