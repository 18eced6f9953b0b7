"""Bash arrays of arguments (`ARGS=(...)`, `ARGS+=(...)`, `vllm serve "${ARGS[@]}"`) and a script's positional
parameters ($1, $2, "$@"): the array's words are the command's, each on its own line; a positional parameter is a
value only the script's caller knows, never judged (issue 27, manifest batch s39)."""

from __future__ import annotations

from kvdoctor.check.run import CheckSettings
from kvdoctor.scan.judge import ScanDefaults
from kvdoctor.scan.run import find_workloads, run_scan

ARRAY_SCRIPT = """\
#!/bin/bash
MODEL=Qwen/Qwen2.5-7B-Instruct
ARGS=(
  --model "$MODEL"   # the model
  --tensor-parallel-size 4
  --max-model-len 8192
)
if [ -n "$EAGER" ]; then
  ARGS+=(--enforce-eager)
fi
docker run --gpus all vllm/vllm-openai:v0.25.1 "${ARGS[@]}"
"""


def _scan(path, tmp_path):
    defaults = ScanDefaults(gpu="A100", vllm_version="0.25.1", offline=True, cache_dir=tmp_path / "cache")
    return run_scan([str(path)], defaults, CheckSettings(compile=False))


def _script(tmp_path, text: str, name: str = "serve.sh"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_an_arrays_words_are_the_commands_each_on_its_line(tmp_path):
    (run,) = find_workloads([str(_script(tmp_path, ARRAY_SCRIPT))])[1]
    assert [t.text for t in run.argv] == ["--model", "Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "4",
                                          "--max-model-len", "8192", "--enforce-eager"]
    assert [t.line for t in run.argv][:4] == [4, 4, 5, 5] and run.argv[-1].line == 9


def test_vllm_serve_of_an_array_and_a_flag_the_release_refuses_is_found_at_its_line(tmp_path):
    text = ("ARGS=(--model m --tensor-parallel-size 2)\n"
            "ARGS+=(--swap-space 4)\n"
            "vllm serve \"${ARGS[@]}\"\n")
    report = _scan(_script(tmp_path, text), tmp_path)
    (run,) = report.workloads
    refused = [p for p in run.placed if p.finding.rule_id == "KVD004" and p.finding.status == "fired"]
    assert refused and refused[0].location.line == 2


def test_an_array_that_does_not_close_or_is_not_referenced_changes_nothing(tmp_path):
    text = "ARGS=(--model m\nvllm serve m --max-model-len 4096\n"
    (run,) = find_workloads([str(_script(tmp_path, text))])[1]
    assert [t.text for t in run.argv] == ["m", "--max-model-len", "4096"]


def test_a_positional_parameter_as_a_flags_value_is_not_judged(tmp_path):
    text = "#!/bin/bash\nmodel_name=$1\nvllm serve $model_name --port $2 --tensor-parallel-size ${3}\n"
    report = _scan(_script(tmp_path, text), tmp_path)
    (run,) = report.workloads
    assert not [p for p in run.placed if p.finding.severity == "error" and p.finding.status == "fired"]
    said = " ".join(run.workload.notes + run.unjudged + run.report.notes)
    assert "--port takes its value from $2" in said and "${3}" in said


def test_a_script_a_shell_runs_from_a_here_document_is_read(tmp_path):
    """`ssh host bash <<EOF` (unquoted: `\\$` is the remote shell's `$`) and `bash <<'EOF'` (quoted: as written)."""
    for opener, dollar in (("ssh -p 2222 deploy@gpu-host bash << DEPLOY", "\\$"), ("bash <<'EOF'", "$")):
        delimiter = opener.rsplit(" ", 1)[-1].strip("'<")
        text = (f"#!/bin/bash\n{opener}\n"
                f"ARGS=(--model Qwen/Qwen2.5-7B-Instruct)\n"
                f"ARGS+=(--max-model-len 4096)\n"
                f"docker run -d --gpus all vllm/vllm-openai:v0.25.1 \"{dollar}{{ARGS[@]}}\"\n"
                f"{delimiter}\n")
        (run,) = find_workloads([str(_script(tmp_path, text))])[1]
        assert [t.text for t in run.argv] == ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096"]
        assert run.argv[2].line == 4


def test_a_here_document_that_is_data_is_no_script(tmp_path):
    text = "#!/bin/bash\ncat <<EOF > notes.txt\nvllm serve m --max-model-len 4096\nEOF\n"
    assert find_workloads([str(_script(tmp_path, text))])[1] == []


def test_an_image_whose_tag_names_vllm_without_a_command_is_named_not_skipped(tmp_path):
    text = "#!/bin/bash\ndocker run -d --gpus all -e CONFIG=prod acme/learn-english:vllm-1.0.0\n"
    report = _scan(_script(tmp_path, text), tmp_path)
    assert not report.workloads
    assert any("acme/learn-english:vllm-1.0.0" in note and "cannot see" in note for note in report.notes)


# Found on 951 real shell scripts that mention vLLM (the repositories' snapshots): each was a false error or a false
# workload before.
def test_vllms_cli_module_runs_a_server_only_for_serve(tmp_path):
    text = ("python3 -m vllm.entrypoints.cli.main bench serve --model m --ignore-eos\n"
            "python3 -m vllm.entrypoints.cli.main serve m --max-model-len 4096\n")
    (run,) = find_workloads([str(_script(tmp_path, text))])[1]
    assert [t.text for t in run.argv] == ["m", "--max-model-len", "4096"]


def test_another_program_run_in_a_vllm_build_image_is_no_workload(tmp_path):
    text = "docker run --gpus all rocm/vllm-dev:rocm7.2_vllm_0.14.0rc0 python3 bench.py --model m --max-model-len 4096\n"
    assert find_workloads([str(_script(tmp_path, text))])[1] == []


def test_a_variable_set_to_nothing_leaves_no_word_and_an_env_value_from_a_variable_is_unknown(tmp_path):
    text = ('tool_choice=""\n'
            "docker run --gpus all -e VLLM_ATTENTION_BACKEND=$BACKEND vllm/vllm-openai:v0.25.1 --model m $tool_choice\n")
    report = _scan(_script(tmp_path, text), tmp_path)
    (run,) = report.workloads
    assert [t.text for t in run.workload.argv] == ["--model", "m"]
    assert not [p for p in run.placed if p.finding.severity == "error" and p.finding.status == "fired"]


def test_a_variable_word_beside_a_model_flag_is_the_environments_arguments(tmp_path):
    text = 'vllm serve --model "$MODEL_PATH" --port 8000 "$1"\n'
    report = _scan(_script(tmp_path, text), tmp_path)
    (run,) = report.workloads
    assert not [p for p in run.placed if p.finding.severity == "error" and p.finding.status == "fired"]


def test_compose_dollar_dollar_is_the_containers_dollar(tmp_path):
    """`$$` in a Compose file is a literal `$`: the shell in the container reads `${SPEC_ARGS[@]}` (a real file's
    'unrecognized arguments: $${SPEC_ARGS[@]}' was a false error)."""
    path = tmp_path / "compose.yaml"
    path.write_text("services:\n  vllm:\n    image: vllm/vllm-openai:v0.25.1\n    entrypoint: [\"/bin/bash\", \"-c\"]\n"
                    "    command:\n      - |\n        SPEC_ARGS=(--max-num-seqs 8)\n"
                    "        exec vllm serve Qwen/Qwen2.5-7B-Instruct --max-model-len 4096 \"$${SPEC_ARGS[@]}\" $$@\n")
    report = _scan(path, tmp_path)
    (run,) = report.workloads
    assert [t.text for t in run.workload.argv][:5] == ["Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096",
                                                     "--max-num-seqs", "8"]
    assert not [p for p in run.placed if p.finding.severity == "error" and p.finding.status == "fired"]


def test_an_array_named_inside_another_arrays_body_is_expanded_there(tmp_path):
    """bash expands `"${MOUNTS[@]}"` inside `DOCKER_ARGS=(...)` when DOCKER_ARGS is assigned, so the docker run
    options an array holds may come from another array; the image after them is still the image."""
    text = ("MOUNTS=(\n  -v /ckpt:/ckpt\n)\n"
            "DOCKER_ARGS=(\n  --rm --name srv\n  \"${MOUNTS[@]}\"\n  -e HIP_VISIBLE_DEVICES=0\n  vllm/vllm-openai:v0.25.1\n)\n"
            "docker run \"${DOCKER_ARGS[@]}\" --model org/m --max-model-len 4096\n")
    (run,) = find_workloads([str(_script(tmp_path, text))])[1]
    assert (run.image, run.container) == ("vllm/vllm-openai:v0.25.1", "srv")
    assert [t.text for t in run.argv] == ["--model", "org/m", "--max-model-len", "4096"]


def test_an_append_in_a_branch_the_scripts_defaults_decide_against_is_not_taken(tmp_path):
    """`if [[ "${DETACH:-0}" == 1 ]]; then FLAGS+=(-d --name x); else FLAGS+=(--rm -it); fi`: by the script's own
    default the else branch runs, so the container has no --name (a real DGX Spark script, manifest batch s48); an
    append under a test of a value nothing sets stays (the author's option, the first test of this file)."""
    text = """#!/usr/bin/env bash
# Usage: DETACH=1 ./serve.sh --max-num-seqs 8   # append any vllm serve flag
MODEL="Qwen/Qwen2.5-7B-Instruct"
FLAGS=(--gpus all)
if [[ "${DETACH:-0}" == 1 ]]; then
  FLAGS+=(-d --name qwen --restart unless-stopped)
else
  FLAGS+=(--rm -it)
fi
ARGS=("$MODEL" --max-model-len 8192)
exec docker run "${FLAGS[@]}" vllm/vllm-openai:v0.25.1 "${ARGS[@]}"
"""
    (run,) = find_workloads([str(_script(tmp_path, text))])[1]
    assert run.container == "docker run" and run.gpu_limit is None  # --gpus all: every GPU, no count
    assert [t.text for t in run.argv] == ["Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "8192"]  # the comment's
    # `vllm serve` does not end the script's assignments (MODEL after it is read)


def test_podman_run_is_named_for_podman(tmp_path):
    text = "podman run --rm -p 8000:8000 vllm/vllm-openai:v0.25.1 --model Qwen/Qwen2.5-7B-Instruct\n"
    (run,) = find_workloads([str(_script(tmp_path, text))])[1]
    assert (run.kind, run.container) == ("podman run", "podman run")


def test_an_array_the_script_assigns_is_expanded_in_a_function_it_calls(tmp_path):
    """`vllm_args=(serve "$MODEL" ...)` at the top, `vllm "${vllm_args[@]}"` inside `start_server() {...}` in a `case`
    (LukasStrickler/Investigating-Personalization-Effects-in-LLMs slurm/launch_vllm.sh): the function's body sees the
    script's arrays, so the launcher whose subcommand the array holds is found, each flag at the line it is written on."""
    text = ("#!/bin/bash\nMODEL_PATH=org/m\n"
            "vllm_args=(\n  serve \"$MODEL_PATH\"\n  --tensor-parallel-size 2\n)\n"
            "vllm_args+=(--swap-space 4)\n"
            "start_server() {\n  case \"$RUNTIME\" in\n    venv)\n      \"$VENV/bin/vllm\" \"${vllm_args[@]}\" &\n"
            "      ;;\n  esac\n}\nstart_server\n")
    report = _scan(_script(tmp_path, text), tmp_path)
    (run,) = report.workloads
    assert [t.text for t in run.workload.argv][:3] == ["org/m", "--tensor-parallel-size", "2"]
    refused = [p for p in run.placed if p.finding.rule_id == "KVD004" and p.finding.status == "fired"]
    assert refused and refused[0].location.line == 7
