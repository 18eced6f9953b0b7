"""Makefiles: each target's recipe read as a shell script, the workload named by the target."""

from __future__ import annotations

from kvdoctor.scan.run import find_workloads

MAKEFILE = """\
export NCCL_DEBUG := INFO

head:
\tuv run ray start --head --port 6379

serve: head
\t@uv run vllm serve Qwen/Qwen3-0.6B \\
\t\t--tensor-parallel-size 2 \\
\t\t--max-model-len $$MAX_LEN

docker:
\tdocker run --gpus 2 --name qwen vllm/vllm-openai:v0.25.1 --model Qwen/Qwen3-0.6B
"""


def test_each_recipe_that_runs_vllm_is_a_workload_named_by_its_target(tmp_path):
    path = tmp_path / "Makefile"
    path.write_text(MAKEFILE)
    serve, docker = find_workloads([str(path)])[1]
    assert (serve.kind, serve.name, serve.container) == ("Makefile target", "Makefile", "serve")
    assert [t.text for t in serve.argv][:3] == ["Qwen/Qwen3-0.6B", "--tensor-parallel-size", "2"]
    assert serve.argv[1].line == 8  # the recipe keeps the Makefile's lines
    assert "$MAX_LEN" in [t.text for t in serve.argv]  # $$ is make's escape for the shell's $
    assert (docker.container, docker.image, docker.gpu_limit) == ("docker", "vllm/vllm-openai:v0.25.1", 2)


def test_a_folder_walk_reads_makefiles_and_a_makefile_without_vllm_has_no_workload(tmp_path):
    (tmp_path / "Makefile").write_text(MAKEFILE)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "build.mk").write_text("all:\n\tpython -m build\n")
    files, found, _ = find_workloads([str(tmp_path)])
    assert sorted(f.rsplit("/", 1)[-1] for f in files) == ["Makefile", "build.mk"]
    assert [w.container for w in found] == ["serve", "docker"]
