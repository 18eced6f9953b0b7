"""Issue 24 in scan: check's fit rules (KVD180-183) judged on a workload whose model config is known, with the GPU
and its memory from the node labels and TP from the args; a pod on a MIG slice has the slice's memory, not the
GPU's, so the memory fit rules are undecided there, naming the slice."""

from __future__ import annotations

from scan_support import scan

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  template:
    spec:
      nodeSelector:
        {label}
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.33.0
          args: [examples/qwen2.5-3b-instruct, --max-model-len, "{length}", --tensor-parallel-size, "{tp}"]
          resources:
            limits:
              {resource}: {count}
"""


def _one(tmp_path, **values):
    (tmp_path / "d.yaml").write_text(DEPLOYMENT.format(**values))
    (result,) = scan([str(tmp_path / "d.yaml")], tmp_path, gpu=None).workloads
    return result, {p.finding.rule_id: p.finding for p in result.placed}


def test_fit_is_judged_from_the_instance_type_and_the_args(tmp_path):
    whole, findings = _one(tmp_path, name="qwen", label="node.kubernetes.io/instance-type: g6.xlarge", length=32768,
                           tp=1, resource="nvidia.com/gpu", count=1)  # fmt: skip
    facts = whole.report.facts
    assert facts["gpu.name"] == "L4" and facts["gpu.memory_gib"] == 22.0 and facts["serve.tensor_parallel_size"] == 1
    assert not {"KVD181", "KVD182", "KVD183"} & set(findings)
    assert any(n.startswith("KV cache fits:") for n in whole.report.notes)
    beyond, findings = _one(tmp_path, name="qwen", label="node.kubernetes.io/instance-type: g6.xlarge",
                            length=200000, tp=1, resource="nvidia.com/gpu", count=1)  # fmt: skip
    assert findings["KVD180"].status == "fired"  # beyond the 32,768 tokens config.json gives


def test_a_mig_slice_leaves_the_memory_fit_undecided_and_says_why(tmp_path):
    result, findings = _one(tmp_path, name="qwen-mig", label="nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
                            length=32768, tp=1, resource="nvidia.com/mig-1g.10gb", count=1)  # fmt: skip
    assert result.workload.gpu_slice == "1g.10gb"
    for rule in ("KVD181", "KVD182", "KVD183"):
        assert findings[rule].status == "undecided" and "MIG slice (1g.10gb)" in findings[rule].decided_by[0]
    assert not any(n.startswith("KV cache fits:") for n in result.report.notes)
    assert result.verdict != "PASS"
    single, _ = _one(tmp_path, name="qwen-mig", label="nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB-MIG-3g.40gb",
                     length=32768, tp=1, resource="nvidia.com/gpu", count=1)  # fmt: skip
    assert single.workload.gpu_slice == "3g.40gb"  # the single strategy says it in the product label only
