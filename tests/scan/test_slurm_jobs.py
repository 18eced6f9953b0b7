"""Slurm batch scripts: #SBATCH directives as the job's environment and GPUs (scan/slurm_jobs.py), and a script
run through srun / apptainer exec read as the called file (scan/scripts.py)."""

from __future__ import annotations

from kvdoctor.scan.run import find_workloads
from kvdoctor.scan.slurm_jobs import job_of


def test_directives_give_the_nodes_and_gpus_slurm_sets_in_the_environment():
    job = job_of("#!/bin/bash\n#SBATCH -N 4\n#SBATCH --gres=gpu:a100:4  # four a node\nsrun hostname\n#SBATCH -N 9\n")
    assert (job.nodes, job.gpus_per_node, job.line) == (4, 4, 3)  # a directive after the first command is ignored
    assert job.environment()["SLURM_GPUS_ON_NODE"] == "4" and job.environment()["SLURM_NNODES"] == "4"
    assert job_of("#SBATCH --nodes=2\n#SBATCH --gpus=8\n").gpus_per_node is None  # a total over two nodes: unknown
    assert job_of("#SBATCH --nodes=$N\n").nodes is None and job_of("echo hi\n") is None


def test_a_one_node_jobs_workload_gets_its_gpus_and_its_variables(tmp_path):
    script = tmp_path / "serve.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --gpus=1\n#SBATCH -t 1:00:00\n"
                      "vllm serve Qwen/Qwen3-8B --tensor-parallel-size 1$SLURM_GPUS_ON_NODE\n")
    (run,) = find_workloads([str(script)])[1]
    assert (run.gpu_limit, run.gpu_limit_line) == (1, 2)
    assert [t.text for t in run.argv][-1] == "11"  # the typo the job's own variable makes


def test_a_script_run_through_srun_and_apptainer_exec_is_read_in_that_image(tmp_path):
    (tmp_path / "start_head.sh").write_text("#!/bin/bash\nvllm serve ./m --tensor-parallel-size 8 "
                                            "--pipeline-parallel-size $1\n")
    job = tmp_path / "launch.sbatch"
    job.write_text('#!/bin/bash\n#SBATCH -N 4\nAPPTAINER_CMD="apptainer exec --fakeroot ./vllm.sif "\n'
                   "srun -N1 -n1 -G8 $APPTAINER_CMD ./start_head.sh $SLURM_NNODES > head.log 2>&1 &\n")
    (run,) = find_workloads([str(job)])[1]
    assert (run.container, run.image) == ("apptainer", "./vllm.sif") and run.file.endswith("start_head.sh")
    assert [t.text for t in run.argv][-1] == "4"  # $1 is the job's SLURM_NNODES
    assert run.gpu_limit is None  # a four-node job: one node's GPUs are not vLLM's whole share


def test_the_gpu_type_a_job_asks_for_names_its_gpu(tmp_path):
    assert job_of("#SBATCH --gres=gpu:a6000:2\n").gpu_type == ("a6000", 1)
    assert job_of("#SBATCH -N 2\n#SBATCH --gpus-per-node=h100:8\n").gpu_type == ("h100", 2)
    assert job_of("#SBATCH --gres=gpu:4\n").gpu_type is None  # a count alone names no type
    assert job_of("#SBATCH --gres=nvme:1\n").gpu_type is None and job_of("#SBATCH -G a100:2\n").gpu_type == ("a100", 1)
    from scan_support import scan

    script = tmp_path / "serve.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH -N 1\n#SBATCH --gres=gpu:a6000:2\n"
                      "vllm serve Qwen/Qwen3-8B --tensor-parallel-size 2\n")
    (result,) = scan([str(script)], tmp_path, gpu=None).workloads
    assert result.report.facts["gpu.name"] == "RTX A6000"
    assert result.sources["gpu."].line == 3  # the directive is the evidence
    script.write_text("#!/bin/bash\n#SBATCH --gres=gpu:mi250:1\nvllm serve Qwen/Qwen3-8B\n")  # a type no GPU table has
    (result,) = scan([str(script)], tmp_path, gpu=None).workloads
    assert result.report.facts.get("gpu.name") is None and any("unknown GPU label value" in u for u in result.unjudged)
