"""`torchrun [its options] -m vllm.entrypoints.openai.api_server ...` under srun (manifest batch s111: a two-node
Slurm job): vLLM's server module, its options read as vllm serve's."""

from __future__ import annotations

from scan_support import scan, write_tree

JOB = """\
#!/bin/bash
srun --nodes=2 --ntasks-per-node=1 --gpus-per-task=4 \\
  torchrun --nnodes=2 --nproc_per_node 4 --standalone --rdzv_backend=c10d \\
    -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 8 \\
    --max-modle-len 4096
"""


def test_torchrun_running_vllms_server_module_is_a_workload(tmp_path):
    root = write_tree(tmp_path / "repo", {"job.sh": JOB})
    (result,) = scan([str(root)], tmp_path, gpu="H100").workloads
    fired = [p.finding.rule_id for p in result.placed if p.finding.severity == "error" and p.finding.status == "fired"]
    assert "KVD004" in fired  # the misspelt --max-modle-len, read as vllm serve's option


def test_torchrun_running_another_module_is_not(tmp_path):
    root = write_tree(tmp_path / "repo", {"job.sh": "#!/bin/bash\ntorchrun --nproc_per_node=8 -m train --model x\n"})
    assert not scan([str(root)], tmp_path, gpu="H100").workloads
