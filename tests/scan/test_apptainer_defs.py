"""Apptainer definition files: the %runscript read in the image the header builds from (scan/apptainer_defs.py)."""

from __future__ import annotations

from kvdoctor.scan.run import find_workloads

DEFINITION = """\
Bootstrap: docker
From: vllm/vllm-openai:v0.11.2

%environment
    export VLLM_MODEL=Qwen/Qwen2.5-7B-Instruct

%post
    pip install ray

%runscript
    VLLM_CMD="python3 -m vllm.entrypoints.openai.api_server"
    VLLM_CMD="${VLLM_CMD} --port ${VLLM_PORT:-8001}"
    VLLM_CMD="${VLLM_CMD} --model ${VLLM_MODEL}"
    exec ${VLLM_CMD} --max-model-len 8192 "$@"
"""


def test_a_definitions_runscript_is_read_with_its_environment_in_the_image_it_builds_from(tmp_path):
    path = tmp_path / "vllm.def"
    path.write_text(DEFINITION)
    (run,) = find_workloads([str(path)])[1]
    assert (run.name, run.container, run.kind, run.image) == ("vllm.def", "apptainer", "Apptainer definition",
                                                              "vllm/vllm-openai:v0.11.2")
    texts = [t.text for t in run.argv]
    assert texts[texts.index("--model") + 1] == "Qwen/Qwen2.5-7B-Instruct"  # from %environment
    assert run.argv[texts.index("--max-model-len")].line == 14  # the file's own line
    (walked,) = find_workloads([str(tmp_path)])[1]  # a walk reads it too
    assert walked.name == "vllm.def"


def test_a_def_file_that_is_no_definition_is_not_read_by_a_walk(tmp_path):
    (tmp_path / "exports.def").write_text("LIBRARY vllm\nEXPORTS\n  serve\n")
    assert find_workloads([str(tmp_path)])[1] == []
