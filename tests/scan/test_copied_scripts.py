"""A Dockerfile whose ENTRYPOINT runs a script it COPYs from the build context (the Dockerfile reference: COPY <src>
<dest>, a relative dest under WORKDIR, a dest ending in / a folder; ENTRYPOINT exec and shell form), and a RUN
here-document (BuildKit's dockerfile:1.4 `RUN python3 - <<'PY' ... PY`) whose body holds no instruction."""

from __future__ import annotations

from kvdoctor.scan.run import find_workloads
from scan_support import write_tree

DOCKERFILE = """\
# syntax=docker/dockerfile:1.4
FROM vllm/vllm-openai:v0.25.1
ARG MODEL_DIR="Qwen3-4B"
RUN python3 - <<'PY'
from huggingface_hub import snapshot_download
snapshot_download("Qwen/Qwen3-4B", local_dir="/model-cache/Qwen3-4B")
PY
ENV MODEL_PATH=/model-cache/${MODEL_DIR}
WORKDIR /srv/vllm
COPY vllm/entrypoint.sh ./entrypoint.sh
ENTRYPOINT ["/srv/vllm/entrypoint.sh"]
"""

ENTRYPOINT = """\
#!/usr/bin/env bash
set -euo pipefail
MODEL="${MODEL_PATH:-/model-cache/default}"
exec python3 -m vllm.entrypoints.openai.api_server \\
  --model "${MODEL}" \\
  --max-model-len "${MAX_MODEL_LEN:-4096}"
"""


def test_an_entrypoint_copied_from_the_build_context_is_read_with_the_images_env_on_its_own_lines(tmp_path):
    tree = write_tree(tmp_path, {"vllm/Dockerfile": DOCKERFILE, "vllm/entrypoint.sh": ENTRYPOINT})
    (image,) = find_workloads([str(tree / "vllm" / "Dockerfile")])[1]
    # the here-document's `from huggingface_hub import ...` is no FROM: the image stays vLLM's
    assert (image.image, image.container) == ("vllm/vllm-openai:v0.25.1", "ENTRYPOINT")
    assert [t.text for t in image.argv] == ["--model", "/model-cache/Qwen3-4B", "--max-model-len", "4096"]
    assert image.where(image.argv[0].line) == (str(tree / "vllm" / "entrypoint.sh"), 5)
    files, found, notes = find_workloads([str(tree)])  # a walk: the script is read through the Dockerfile only
    assert [w.kind for w in found] == ["Dockerfile"]


def test_a_shell_form_entrypoint_and_a_copy_into_a_folder(tmp_path):
    text = ("FROM vllm/vllm-openai:v0.25.1\nCOPY start.sh config.json /app/\n"
            "ENTRYPOINT /app/start.sh --extra\n")  # fmt: skip
    tree = write_tree(tmp_path, {"Dockerfile": text, "start.sh": ENTRYPOINT, "config.json": "{}"})
    (image,) = find_workloads([str(tree / "Dockerfile")])[1]
    assert [t.text for t in image.argv][:2] == ["--model", "/model-cache/default"]


def test_a_copied_script_without_vllm_one_from_another_stage_or_one_not_in_the_context_is_no_workload(tmp_path):
    web = "#!/bin/sh\nexec gunicorn app:app\n"
    tree = write_tree(tmp_path, {
        "a/Dockerfile": "FROM python:3.12\nCOPY run.sh /run.sh\nENTRYPOINT [\"/run.sh\"]\n", "a/run.sh": web,
        "b/Dockerfile": "FROM vllm/vllm-openai:v0.25.1 AS base\nCOPY --from=build /out/run.sh /run.sh\n"
                        "ENTRYPOINT [\"/run.sh\"]\n", "b/run.sh": ENTRYPOINT,
        "c/Dockerfile": "FROM vllm/vllm-openai:v0.25.1\nCOPY missing.sh /run.sh\nENTRYPOINT [\"/run.sh\"]\n",
    })  # fmt: skip
    for folder in ("a", "b", "c"):
        assert find_workloads([str(tree / folder / "Dockerfile")])[1] == []


def test_a_bad_flag_in_the_copied_script_is_one_line_at_the_scripts_line_exit_2(run_cli, tmp_path):
    tree = write_tree(tmp_path, {"vllm/Dockerfile": DOCKERFILE,
                            "vllm/entrypoint.sh": ENTRYPOINT.replace('"${MAX_MODEL_LEN:-4096}"', "4096 --dtype bf16")})
    result = run_cli("scan", str(tree / "vllm" / "Dockerfile"), "--gpu", "A100", "--no-compile")
    assert result.code == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"kvdoctor: error: {tree / 'vllm' / 'entrypoint.sh'}:6:") and "--dtype" in line
