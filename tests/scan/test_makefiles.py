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


DEFINE_AND_CALL = """\
PORT       := 8000
IMAGE      := vllm/vllm-openai:v0.25.1   # override with VLLM_IMAGE
COMMON      = --port $(PORT) --kv-cache-dtype fp8
SPEC       := --speculative-config '{"method": "mtp", "num_speculative_tokens": 2}'

define serve
\t@docker rm -f vllm; \\
\tdocker run -d --name vllm --gpus all $${VLLM_IMAGE:-$(IMAGE)} \\
\t  $(1) --served-model-name $(2) $(COMMON) $(3)
endef

up-qwen: ## a 27B model
\t$(call serve,Qwen/Qwen3-8B,qwen,--max-model-len 32768 $(SPEC))

up-gemma:
\t$(call serve,google/gemma-3-4b-it,gemma,--max-model-len 8192)
"""


def test_a_define_block_a_recipe_calls_is_read_with_the_calls_arguments_and_the_files_variables(tmp_path):
    """A real Makefile's shape (manifest batch s53, leo-dcfa/vllm-setup-rtx-5090): `$(call serve,MODEL,NAME,FLAGS)` of
    a `define` block, variables with comments after their values and variables inside variables."""
    path = tmp_path / "Makefile"
    path.write_text(DEFINE_AND_CALL)
    qwen, gemma = find_workloads([str(path)])[1]
    assert (qwen.container, gemma.container) == ("up-qwen", "up-gemma")
    assert qwen.image == "vllm/vllm-openai:v0.25.1"  # ${VLLM_IMAGE:-$(IMAGE)}, the comment cut from IMAGE's value
    words = [t.text for t in qwen.argv]
    assert words[:3] == ["Qwen/Qwen3-8B", "--served-model-name", "qwen"]
    assert words[words.index("--port") + 1] == "8000" and "--kv-cache-dtype" in words
    assert words[words.index("--max-model-len") + 1] == "32768"
    assert '{"method": "mtp", "num_speculative_tokens": 2}' in words
    assert qwen.argv[0].line == 9  # the block's own line: the words come from the define's text
    assert [t.text for t in gemma.argv][:1] == ["google/gemma-3-4b-it"]


def test_a_variable_that_refers_to_itself_stops_expanding(tmp_path):
    path = tmp_path / "Makefile"
    path.write_text("X = $(X) --enforce-eager\nrun:\n\tvllm serve m $(X)\n")
    (served,) = find_workloads([str(path)])[1]
    assert "--enforce-eager" in [t.text for t in served.argv]


def test_an_included_env_file_gives_the_recipes_their_variables_in_makes_order(tmp_path):
    """`include .env` (a dotenv file make reads as assignments), then `PORT ?= 8000`: the included value stands; a
    later plain assignment wins; a missing `-include` file is no error."""
    (tmp_path / ".env").write_text("MODEL_NAME=meta-llama/Llama-3.1-8B-Instruct\nPORT=9000\nTP=4\n")
    (tmp_path / "Makefile").write_text("include .env\n-include local.mk\nexport\nPORT ?= 8000\nTP = 2\n\nserve:\n"
                                       "\tvllm serve $(MODEL_NAME) --port ${PORT} --tensor-parallel-size $(TP)\n")
    (serve,) = find_workloads([str(tmp_path / "Makefile")])[1]
    assert [t.text for t in serve.argv] == ["meta-llama/Llama-3.1-8B-Instruct", "--port", "9000",
                                             "--tensor-parallel-size", "2"]
