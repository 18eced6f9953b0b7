"""Shell scripts: docker run of vLLM's image, and vllm serve run directly (after srun too)."""

from __future__ import annotations

from scan_support import scan

from kvdoctor.scan.run import find_workloads, read_manifests

DOCKER_RUN = """\
#!/bin/bash
# start the server; the model's "path" is mounted
MODEL=/models/qwen
docker run -d --name vllm-server --runtime nvidia --gpus '"device=0,1"' \\
    -v $(pwd):/models -p 8000:8000 -e NCCL_P2P_DISABLE=1 -e HF_TOKEN \\
    vllm/vllm-openai:v0.25.1 \\
    --model $MODEL \\
    --tensor-parallel-size 4 \\
    --max_model_len 2048
curl localhost:8000/health
"""


def _script(tmp_path, text: str, name: str = "start.sh"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_docker_run_of_vllms_image_is_a_workload_with_its_options_read(tmp_path):
    (run,) = find_workloads([str(_script(tmp_path, DOCKER_RUN))])[1]
    assert (run.kind, run.name, run.container, run.image) == ("docker run", "start.sh", "vllm-server",
                                                              "vllm/vllm-openai:v0.25.1")  # fmt: skip
    assert [t.text for t in run.argv] == ["--model", "/models/qwen", "--tensor-parallel-size", "4",
                                          "--max_model_len", "2048"]  # fmt: skip  # $MODEL: the script's assignment
    assert run.argv[2].line == 8 and run.gpu_limit == 2 and run.gpu_limit_line == 4
    assert [(e.name, e.value) for e in run.env] == [("NCCL_P2P_DISABLE", "1"), ("HF_TOKEN", None)]


def test_fewer_gpus_than_the_parallel_sizes_is_an_error_at_the_gpus_option(tmp_path):
    report = scan([str(_script(tmp_path, DOCKER_RUN))], tmp_path, gpu=None)
    (run,) = report.workloads
    short = next(p for p in run.placed if p.finding.rule_id == "KVD201")
    assert short.finding.status == "fired" and short.location.line == 4
    assert run.report.facts["vllm.version"] == "0.25.1"


def test_vllm_serve_after_srun_and_its_options(tmp_path):
    text = "srun -p gpu --gres=gpu:2 -n1 --job-name=x \\\n  vllm serve /m/qwen --tensor-parallel-size 2 &\n"
    (run,) = find_workloads([str(_script(tmp_path, text, "serve.sh"))])[1]
    assert (run.kind, run.container, run.name) == ("script", "vllm serve", "x")  # the job's name (--job-name=x)
    assert [t.text for t in run.argv] == ["/m/qwen", "--tensor-parallel-size", "2"]
    spaced = "srun -p gpu -J serve-qwen vllm serve /m/qwen\n"
    (run,) = find_workloads([str(_script(tmp_path, spaced, "spaced.sh"))])[1]
    assert run.name == "serve-qwen"
    (run,) = find_workloads([str(_script(tmp_path, "srun -p gpu vllm serve /m/qwen\n", "plain.sh"))])[1]
    assert run.name == "plain.sh"  # no job name: the script's


def test_other_images_and_commands_are_no_workload_and_a_walk_reads_scripts(tmp_path):
    _script(tmp_path, "docker run -d redis:7 --port 6379\npython train.py --epochs 2\n", "other.sh")
    _script(tmp_path, DOCKER_RUN, "serve.sh")
    files, found, _, unread = read_manifests([str(tmp_path)])
    assert sorted(f.rsplit("/", 1)[-1] for f in files) == ["other.sh", "serve.sh"] and not unread
    assert [w.name for w in found] == ["serve.sh"]


def test_redirections_and_background_are_the_shells_not_vllm_arguments(tmp_path):
    script = "nohup vllm serve Qwen/Qwen3-14B \\\n    --tensor-parallel-size 4 > logs/serve.log 2>&1 &\n"
    (run,) = find_workloads([str(_script(tmp_path, script))])[1]
    assert [t.text for t in run.argv] == ["Qwen/Qwen3-14B", "--tensor-parallel-size", "4"]
    report = scan([str(_script(tmp_path, script))], tmp_path, gpu=None)
    assert not [p for p in report.workloads[0].placed if p.finding.rule_id == "KVD004" and p.finding.status == "fired"]


def test_a_positional_default_names_the_container_and_the_image_tag(tmp_path):
    script = ("#!/bin/bash\nname=${2:-vllm_server}\ntag=${3:-v0.25.1}\n"
              "docker run --rm --gpus all --name $name vllm/vllm-openai:$tag --model $1 --max-model-len 4096\n")
    (run,) = find_workloads([str(_script(tmp_path, script))])[1]
    assert (run.container, run.image) == ("vllm_server", "vllm/vllm-openai:v0.25.1")
    assert [t.text for t in run.argv][:2] == ["--model", "$1"]  # no default: the script's argument, unknown here


def test_a_deployment_written_by_a_here_document_is_read_on_the_scripts_lines(tmp_path):
    script = ("cat <<EOF >>vllm.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: llama\nspec:\n"
              "  template:\n    spec:\n      containers:\n      - name: vllm\n        image: vllm/vllm-openai:v0.25.1\n"
              "        args: [\"--model\", \"meta-llama/Llama-3.2-1B-Instruct\", \"--max-model-len\", \"2048\"]\n"
              "EOF\n\nkubectl apply -f vllm.yaml\n")
    (run,) = find_workloads([str(_script(tmp_path, script))])[1]
    assert (run.kind, run.name, run.container) == ("Deployment", "llama", "vllm")
    assert run.argv[1].text == "meta-llama/Llama-3.2-1B-Instruct" and run.argv[1].line == 12
    assert any("here-document" in n for n in run.notes)


def test_a_here_document_that_is_no_yaml_is_no_command_either(tmp_path):
    script = "cat <<'EOF' > notes.txt\nvllm serve this is: [not yaml\nEOF\n"
    assert find_workloads([str(_script(tmp_path, script))])[1] == []


def test_a_here_documents_object_that_mentions_vllm_but_is_not_read_is_named(tmp_path):
    # kserve's install/*/kserve-*-full-install-with-manifests.sh: cluster resources in a heredoc, among them
    # LLMInferenceServiceConfig templates whose vllm serve sits behind eval (silent before)
    script = ("cat <<EOF | kubectl apply -f -\napiVersion: serving.kserve.io/v1alpha2\nkind: LLMInferenceServiceConfig\n"
              "metadata:\n  name: kserve-config-llm-template\nspec:\n  template:\n    containers:\n    - name: main\n"
              "      image: ghcr.io/llm-d/llm-d-cuda:v0.6.0\n      command: [/bin/bash, -c]\n"
              "      args: ['eval \"exec vllm serve /mnt/models\"']\nEOF\n"
              "python3 - <<'PY'\nimport vllm\nprint(vllm.__version__)\nPY\n")
    _, found, notes, _ = read_manifests([str(_script(tmp_path, script))])
    assert found == []
    assert len(notes) == 1 and ":2: LLMInferenceServiceConfig kserve-config-llm-template mentions vLLM" in notes[0]


def test_dynamos_vllm_worker_takes_vllms_engine_args_without_its_own_options(tmp_path):
    script = ("python -m dynamo.frontend &\n"
              "python3 -m dynamo.vllm --model Qwen/Qwen3-0.6B --is-prefill-worker --connector nixl lmcache "
              "--endpoint dyn://ns.c.e --enforce-eager\n")
    (run,) = find_workloads([str(_script(tmp_path, script))])[1]
    assert run.container == "python3 -m dynamo.vllm"
    assert [t.text for t in run.argv] == ["--model", "Qwen/Qwen3-0.6B", "--enforce-eager"]
    assert any("--is-prefill-worker" in n for n in run.notes)


def test_uv_run_and_poetry_run_launch_the_words_after_them(tmp_path):
    for runner in ("uv run --with vllm", "poetry run"):
        (run,) = find_workloads([str(_script(tmp_path, f"{runner} vllm serve Qwen/Qwen3-0.6B -tp 2\n"))])[1]
        assert [t.text for t in run.argv] == ["Qwen/Qwen3-0.6B", "-tp", "2"]


def test_a_redirection_sign_inside_a_quoted_string_leaves_the_quotes_whole(tmp_path):
    script = 'echo "serving > port 8000"\nvllm serve Qwen/Qwen3-0.6B --max-model-len 4096 >> "serve log.txt"\n'
    (run,) = find_workloads([str(_script(tmp_path, script))])[1]
    assert [t.text for t in run.argv] == ["Qwen/Qwen3-0.6B", "--max-model-len", "4096"]


def _errors(result) -> set[str]:
    return {p.finding.rule_id for p in result.placed if p.finding.status == "fired" and p.finding.severity == "error"}


def test_a_continuation_on_the_last_line_still_leaves_the_command_read(tmp_path):
    # batch s34 (BjornWest/instance_scripts vllm_scripts/20b2.sh): the file ends on `... \` with no newline
    text = "source ~/env/bin/activate\nvllm serve openai/gpt-oss-20b \\\n    --port 8001 \\\n    --max-num-seqs 128 \\"
    (run,) = find_workloads([str(_script(tmp_path, text))])[1]
    assert [t.text for t in run.argv] == ["openai/gpt-oss-20b", "--port", "8001", "--max-num-seqs", "128"]


def test_pythons_own_options_before_dash_m_leave_the_launcher_found(tmp_path):
    # batch s34 (wagerc97/gpt-oss-alignment): nohup python -u -m vllm.entrypoints.openai.api_server ...
    text = "nohup python -u -m vllm.entrypoints.openai.api_server \\\n\t--model openai/gpt-oss-20b \\\n" \
           "\t--tensor-parallel-size 2 \\\n\t> vllm.log 2>&1 &\n"
    (run,) = find_workloads([str(_script(tmp_path, text))])[1]
    assert run.container == "vllm serve" and [t.text for t in run.argv][-2:] == ["--tensor-parallel-size", "2"]
    text = "python3 -X dev -m dynamo.vllm --model Qwen/Qwen3-0.6B --enforce-eager\n"
    (run,) = find_workloads([str(_script(tmp_path, text, "agg.sh"))])[1]
    assert run.container == "python3 -m dynamo.vllm"


def test_an_environment_named_for_a_release_gives_the_version(tmp_path):
    # batch s34 (jhlu2019/GustoBot): /envs/vllm-0.9.0/bin/vllm serve ... --enable-reasoning, a 0.7-0.9 flag: no error
    text = ("#!/bin/bash\n/home/u/miniconda3/envs/vllm-0.9.0/bin/vllm serve \"/data/models/Qwen3-30B-A3B\" \\\n"
            "  --tensor-parallel-size 4 \\\n  --enable-reasoning \\\n  --reasoning-parser deepseek_r1\n")
    (run,) = find_workloads([str(_script(tmp_path, text))])[1]
    assert (run.vllm_pin, run.vllm_pin_line) == ("0.9.0", 2)
    (result,) = scan([str(_script(tmp_path, text))], tmp_path, gpu=None).workloads
    assert result.report.facts["vllm.version"] == "0.9.0" and not _errors(result)
    plain = text.replace("envs/vllm-0.9.0", "envs/vllm_env")  # a name without a release: unknown, judged as before
    (run,) = find_workloads([str(_script(tmp_path, plain, "plain.sh"))])[1]
    assert run.vllm_pin is None


def test_arithmetic_and_command_substitutions_are_one_word(tmp_path):
    text = "NODES=2\nGPUS=8\nvllm serve m --data-parallel-size $((NODES * GPUS)) --host $(hostname -i) " \
           "--data-parallel-start-rank $(( ${RANK:-0} * GPUS ))\n"
    (run,) = find_workloads([str(_script(tmp_path, text))])[1]
    words = [t.text for t in run.argv]
    assert words[words.index("--data-parallel-size") + 1] == "16"
    assert words[words.index("--host") + 1] == "$(hostname -i)"  # unknown here: never split into two arguments
    assert words[words.index("--data-parallel-start-rank") + 1] == "0"  # ${RANK:-0}: the default when unset


def test_a_quoted_options_variable_is_split_into_its_words_and_placed_on_its_line(tmp_path):
    text = 'ARGS="--tensor-parallel-size 2 --max-model-len 4096"\n\n\nvllm serve Qwen/Qwen3-8B \\\n  $ARGS\n'
    (run,) = find_workloads([str(_script(tmp_path, text))])[1]
    assert [t.text for t in run.argv] == ["Qwen/Qwen3-8B", "--tensor-parallel-size", "2", "--max-model-len", "4096"]
    assert run.line == 4 and run.argv[1].line == 5


def test_a_script_whose_arguments_an_if_branch_sets_is_one_workload_per_branch(tmp_path):
    text = ('if [ "$SIZE" = small ]; then\n  TP=1\nelif [ "$SIZE" = large ]; then\n  TP=4\nfi\n'
            "vllm serve Qwen/Qwen3-8B --tensor-parallel-size $TP\n")
    small, large = find_workloads([str(_script(tmp_path, text))])[1]
    assert [t.text for t in small.argv][-1] == "1" and [t.text for t in large.argv][-1] == "4"
    assert any("SIZE=large, TP=4" in n for n in large.notes)
    same = text.replace("$TP", "1")  # the branches do not touch the command: one workload
    assert len(find_workloads([str(_script(tmp_path, same, "same.sh"))])[1]) == 1


def _kvd004(result) -> str | None:
    return next((p.finding.status for p in result.placed if p.finding.rule_id == "KVD004"), None)


def test_an_environments_vllm_of_unknown_age_leaves_a_flag_older_releases_accept_undecided(tmp_path):
    # a venv's vLLM may be any release: --tokenizer-pool-size (0.4.3-0.9.2) is no certain refusal; an image's is
    old = "python3 -m vllm.entrypoints.openai.api_server --model m --tokenizer-pool-size 128 --block-size 32\n"
    (venv,) = scan([str(_script(tmp_path, old, "venv.sh"))], tmp_path, gpu=None).workloads
    assert _kvd004(venv) == "undecided"
    assert any("vllm.version" in d for f in venv.report.findings if f.rule_id == "KVD004" for d in f.decided_by)
    bogus = old.replace("--tokenizer-pool-size", "--no-such-flag")  # refused by every release read
    (none,) = scan([str(_script(tmp_path, bogus, "bogus.sh"))], tmp_path, gpu=None).workloads
    assert _kvd004(none) == "fired"
    image = "docker run --gpus 1 vllm/vllm-openai:latest --model m --tokenizer-pool-size 128\n"
    (latest,) = scan([str(_script(tmp_path, image, "latest.sh"))], tmp_path, gpu=None).workloads
    assert _kvd004(latest) == "fired"  # :latest is today's vLLM (0.20.0-0.34.0), which refuses it


def test_vllm_serve_inside_an_apptainer_container_and_a_powershell_docker_run(tmp_path):
    """HPC sites run vLLM's image as a .sif (`apptainer exec --nv --bind DIR IMAGE vllm serve ...`), and Windows
    hosts a `docker run` from PowerShell, whose lines continue with a backtick: both are workloads."""
    text = "apptainer exec --nv --bind /gscratch/ vllm-openai_latest.sif vllm serve $MODEL --tensor-parallel-size 2\n"
    (run,) = find_workloads([str(_script(tmp_path, "MODEL=openai/gpt-oss-20b\n" + text, "vllm.bash"))])[1]
    assert (run.container, [t.text for t in run.argv]) == ("apptainer", ["openai/gpt-oss-20b", "--tensor-parallel-size", "2"])
    # options that take a value other than --bind (a real Slurm job's, manifest batch s53): --no-mount, --workdir
    exec_line = ('exec apptainer exec --nv --cleanenv --no-mount home,cwd,tmp --workdir "$W" --bind "$M:/model:ro" '
                 '"$SIF" vllm serve /model --max-model-len 8192\n')
    (run,) = find_workloads([str(_script(tmp_path, exec_line, "job.sbatch.sh"))])[1]
    assert [t.text for t in run.argv] == ["/model", "--max-model-len", "8192"]
    # `apptainer run IMAGE --model ...` runs the image's runscript (vLLM's server) with the words after the image, and
    # a pulled image's file name (vllm-openai_v0.20.0.sif, name_tag.sif) names its release (a real Slurm template's,
    # manifest batch s55)
    run_line = "apptainer run --nv --bind /m:/data /images/vllm-openai_v0.20.0.sif --model /data/x --tensor-parallel-size 2\n"
    (run,) = find_workloads([str(_script(tmp_path, run_line, "run.sh"))])[1]
    assert [t.text for t in run.argv] == ["--model", "/data/x", "--tensor-parallel-size", "2"]
    assert run.image == "/images/vllm-openai_v0.20.0.sif"
    from kvdoctor.scan.image import image_version

    assert image_version(run.image).vllm_version == "0.20.0"
    assert image_version("docker://vllm/vllm-openai:v0.8.5").vllm_version == "0.8.5"
    singularity = "singularity run -B /data:/data docker://vllm/vllm-openai:v0.8.5 vllm serve /data/m\n"
    (run,) = find_workloads([str(_script(tmp_path, singularity, "s.sh"))])[1]
    assert [t.text for t in run.argv] == ["/data/m"]
    ps1 = "docker run --rm --gpus all `\n  -p 8000:8000 vllm/vllm-openai:v0.6.6.post1 `\n  --model org/m --max-model-len 4096\n"
    (run,) = find_workloads([str(_script(tmp_path, ps1, "run.ps1"))])[1]
    assert (run.kind, run.image) == ("docker run", "vllm/vllm-openai:v0.6.6.post1")
    assert [(t.text, t.line) for t in run.argv] == [("--model", 3), ("org/m", 3), ("--max-model-len", 3), ("4096", 3)]


def test_an_alternate_value_expansion_is_its_words_when_the_variable_is_set():
    """`${VAR:+--env "X=$VAR"}` among a docker run's options (a real composite action): its words where VAR is set,
    even to a value unknown here, nothing where it is not, so the image after it is still the image."""
    from kvdoctor.scan.scripts import alternate_values, script_workloads

    text = ('docker run -d --name vllm-server \\\n  ${KV:+--env "VLLM_CPU_KVCACHE_SPACE=${KV}"} \\\n'
            '  vllm/vllm-openai:v0.25.1 --model org/m ${LEN:+--max-model-len "$LEN"}\n')
    assert alternate_values("a ${X:+-b ${X}} c", {"X": "1"}) == "a -b ${X} c"
    assert alternate_values("a ${X:+-b} c", {}) == "a  c"
    (run,) = script_workloads(text, 1, "action.yml", "action", env={"KV": "${{ inputs.kv }}", "LEN": "4096"})
    assert run.image == "vllm/vllm-openai:v0.25.1" and run.container == "vllm-server"
    assert [t.text for t in run.argv] == ["--model", "org/m", "--max-model-len", "4096"]
    assert [(e.name, e.line) for e in run.env] == [("VLLM_CPU_KVCACHE_SPACE", 2)]
    (bare,) = script_workloads(text, 1, "action.yml", "action", env={})
    assert [t.text for t in bare.argv] == ["--model", "org/m"] and bare.env == ()


def test_docker_run_of_a_shell_script_on_any_image_and_options_from_an_unset_variable(tmp_path):
    # OPEA's launch_vllm_service_openvino.sh: `$docker_args` (never set) among the options, then an image of its own
    # whose command is `/bin/bash -c "cd / && python3 -m vllm.entrypoints.openai.api_server ..."`
    text = (
        'image="vllm:openvino"\n'
        'docker run -d --rm --name="vllm-openvino-server" \\\n'
        '  --ipc=host \\\n'
        '  $docker_args \\\n'
        '  -e HF_TOKEN=${HF_TOKEN} \\\n'
        '  $image /bin/bash -c "\\\n'
        '    cd / && \\\n'
        '    python3 -m vllm.entrypoints.openai.api_server \\\n'
        '      --model \\"facebook/opt-125m\\" \\\n'
        '      --max-model-len 2048"\n'
    )
    (workload,) = find_workloads([str(_script(tmp_path, text))])[1]
    assert workload.container == "vllm-openvino-server" and workload.image == "vllm:openvino"
    assert [t.text for t in workload.argv] == ["--model", "facebook/opt-125m", "--max-model-len", "2048"]
    # a shell script that starts no vLLM stays no workload
    redis = _script(tmp_path, 'docker run -d $opts -e A=1 redis:7 /bin/sh -c "redis-server"\n', "redis.sh")
    assert find_workloads([str(redis)])[1] == []


def test_a_tool_runner_that_installs_vllm_names_its_release(tmp_path):
    """uv's `uvx` / `uv tool run` take `vllm@X` (or `--from vllm==X`), pipx `run --spec vllm==X`: they install that
    release to run the command (docs.astral.sh/uv/guides/tools, pipx.pypa.io)."""
    for line, pinned in (("uv tool run vllm@v0.25.1 serve /m/qwen --port 8091", "0.25.1"),
                         ("uvx vllm@0.25.1 serve /m/qwen --port 8091", "0.25.1"),
                         ("uvx --from vllm==0.26.0 vllm serve /m/qwen --port 8091", "0.26.0"),
                         ("pipx run --spec vllm==0.26.0 vllm serve /m/qwen --port 8091", "0.26.0"),
                         ("uvx vllm serve /m/qwen --port 8091", None)):  # no pin: the release uv resolves today
        (run,) = find_workloads([str(_script(tmp_path, f"#!/bin/bash\n{line}\n", "llm.sh"))])[1]
        assert [t.text for t in run.argv] == ["/m/qwen", "--port", "8091"], line
        assert (run.vllm_pin, run.vllm_pin_line) == ((pinned, 2) if pinned else (None, None)), line
    report = scan([str(_script(tmp_path, "uvx vllm@0.25.1 serve /m/qwen --no-such-flag\n", "bad.sh"))], tmp_path)
    (run,) = report.workloads
    assert run.report.facts["vllm.version"] == "0.25.1"
    assert any(p.finding.rule_id == "KVD004" and p.finding.status == "fired" for p in run.placed)
    assert find_workloads([str(_script(tmp_path, "uvx ruff check .\n", "lint.sh"))])[1] == []


def test_a_command_typed_into_a_terminal_by_tmux_or_screen_is_read(tmp_path):
    """`tmux send-keys -t S "CMD" C-m` and `screen -S s -X stuff "CMD\\n"` type CMD into a shell, which runs it."""
    text = ("#!/bin/bash\nMODEL=/m/qwen\ntmux new-session -d -s llm\n"
            'tmux send-keys -t llm:0.0 "export CUDA_VISIBLE_DEVICES=0" C-m\n'
            'tmux send-keys -t llm:0.0 "vllm serve $MODEL --port 8000 --tensor-parallel-size 2" Enter\n'
            'screen -S other -X stuff "vllm serve $MODEL --port 8001\\n"\n')
    runs = find_workloads([str(_script(tmp_path, text, "tmux.sh"))])[1]
    assert [([t.text for t in r.argv], r.line) for r in runs] == [
        (["/m/qwen", "--port", "8000", "--tensor-parallel-size", "2"], 5), (["/m/qwen", "--port", "8001"], 6)]
    assert find_workloads([str(_script(tmp_path, 'tmux send-keys -t x "htop" C-m\n', "other.sh"))])[1] == []


def test_a_command_pm2_starts_is_read_quoted_or_after_its_double_dash(tmp_path):
    """`pm2 start "CMD" --name x` runs CMD; `pm2 start vllm --name x -- serve ...` runs the program with the words
    after `--` (pm2 --help, "start"); pm2 starting a JavaScript app is no vLLM workload."""
    text = ('#!/bin/bash\nMODEL=/m/qwen\n'
            'pm2 start "vllm serve $MODEL --port 8000 --max-model-len 4096" --name llm\n'
            'pm2 start --name other --interpreter none vllm -- serve $MODEL --port 8001\n'
            'pm2 start server.js --name web\n')
    runs = find_workloads([str(_script(tmp_path, text, "pm2.sh"))])[1]
    assert [([t.text for t in r.argv], r.line) for r in runs] == [
        (["/m/qwen", "--port", "8000", "--max-model-len", "4096"], 3), (["/m/qwen", "--port", "8001"], 4)]


def test_a_script_run_vllm_names_its_environment_as_what_decides_the_release(tmp_path):
    """No image, no pin: the environment that runs the script decides the release (KVD217 says to name it with
    --vllm-version), never KVD204's "pin vllm/vllm-openai:vX.Y.Z" that a script has no place for."""
    (run,) = scan([str(_script(tmp_path, "vllm serve /m/qwen --port 8000\n", "serve.sh"))], tmp_path).workloads
    fired = {p.finding.rule_id for p in run.placed if p.finding.status == "fired"}
    assert "KVD217" in fired and "KVD204" not in fired and run.verdict != "PASS"
    (pinned,) = scan([str(_script(tmp_path, "pip install vllm==0.25.1\nvllm serve /m/qwen\n", "pin.sh"))],
                     tmp_path).workloads
    assert not {"KVD217", "KVD204"} & {p.finding.rule_id for p in pinned.placed if p.finding.status == "fired"}


def test_a_script_a_variable_holds_is_read_where_tmux_types_it(tmp_path):
    """CMD_START="<newline> source .venv/bin/activate; ... echo '\\$(python -c \\"...\\")'; vllm serve \\"$MODEL\\" ..."
    then `tmux send-keys -t S "$CMD_START" C-m` (IsaacGHX/AgentFlow_Isaac scripts/serve_vllm.sh): the value is one
    word (its `\\$(` is text, not a command's output), a script that runs vLLM, and the typed keys are that script."""
    text = ('#!/bin/bash\nMODEL="ckpt/actor/huggingface"\nPORT=8007\nTP=1\n'
            'CMD_START="\n    source .venv/bin/activate;\n    echo \'env: \\$(python -c \\"import sys; print(sys.prefix)\\")\';\n'
            '    vllm serve \\"$MODEL\\" \\\n        --port $PORT \\\n        --tensor-parallel-size $TP\n"\n'
            'tmux send-keys -t "s:0" "$CMD_START" C-m\n')
    (run,) = find_workloads([str(_script(tmp_path, text, "serve_vllm.sh"))])[1]
    assert [t.text for t in run.argv] == ["ckpt/actor/huggingface", "--port", "8007", "--tensor-parallel-size", "1"]
    assert run.line == 12  # the line that types it


def test_docker_create_a_required_variable_and_windows_line_ends(tmp_path):
    """`docker create` takes run's options (the container `docker start` runs); `${HF_TOKEN:?message}` is HF_TOKEN's
    value or the shell stops, its message never a word; a script saved with CRLF line ends continues its lines."""
    text = ("#!/bin/bash\r\ndocker create --name llm --gpus all -p 8002:8000 \\\r\n"
            "  -e HF_TOKEN=${HF_TOKEN:?Set HF_TOKEN environment variable} \\\r\n"
            "  vllm/vllm-openai:v0.25.1 \\\r\n  --model Qwen/Qwen2.5-14B-Instruct-AWQ --max-model-len 6144\r\n"
            "docker container create --name other vllm/vllm-openai:v0.25.1 --model m\r\n")
    path = tmp_path / "recreate.sh"
    path.write_bytes(text.encode())
    first, second = find_workloads([str(path)])[1]
    assert (first.container, first.image, first.line) == ("llm", "vllm/vllm-openai:v0.25.1", 2)
    assert [t.text for t in first.argv] == ["--model", "Qwen/Qwen2.5-14B-Instruct-AWQ", "--max-model-len", "6144"]
    assert [(e.name, e.value) for e in first.env] == [("HF_TOKEN", "${HF_TOKEN}")]
    assert (second.container, [t.text for t in second.argv]) == ("other", ["--model", "m"])


def test_a_shell_script_string_run_inside_an_apptainer_container_or_srun_is_read(tmp_path):
    """`apptainer exec --nv IMG.sif bash -lc "...; python3 -m vllm.entrypoints.openai.api_server ..."` (Apptainer's
    exec runs the command given after the image; bash -c runs its string): the server inside the string is the
    workload, the outer script's variables expanded where the outer shell expands them, `\\$` left to the inner one."""
    text = ('#!/bin/bash\nTP="${SLURM_JOB_GPUS_PER_NODE:-2}"\n'
            'apptainer exec --nv --cleanenv --bind "$HF_HOME":/root/.cache/huggingface --env PATH="$PATH" \\\n'
            '  "$IMG_FILE" \\\n  bash -lc "\n    set -euo pipefail\n    mkdir -p \\"\\$PYDEPS\\"\n'
            '    python3 -m vllm.entrypoints.openai.api_server \\\n      --model openai/gpt-oss-120b \\\n'
            '      --tensor-parallel-size \\"$TP\\" --port 8000\n  "\n')
    (run,) = find_workloads([str(_script(tmp_path, text, "serve.sbatch"))])[1]
    assert run.container == "apptainer"
    assert [t.text for t in run.argv] == ["--model", "openai/gpt-oss-120b", "--tensor-parallel-size", "2", "--port", "8000"]
    srun = "srun -N 1 --gres=gpu:1 sh -c 'vllm serve org/m --max-model-len 4096'\n"
    (run,) = find_workloads([str(_script(tmp_path, srun, "job.sh"))])[1]
    assert [t.text for t in run.argv] == ["org/m", "--max-model-len", "4096"]
    plain = "bash -lc 'echo vllm serve is not run here'\n"  # a shell -c string with no launcher is no workload
    assert find_workloads([str(_script(tmp_path, "apptainer exec x.sif " + plain, "none.sh"))])[1] == []


def test_assignments_with_comments_continued_lines_and_option_parsing_keep_the_scripts_defaults(tmp_path):
    """Three shapes of real docker run scripts (manifest batches s41/s45): a comment after an assignment's value
    (`NAME="vllm_server"   # the container`), a value continued with a backslash (`CMD="--model $M \\`), and an
    option-parsing loop that may override a default from the script's own arguments (`MODEL="$2"`): the defaults
    are what runs, so the container, the model and the flags are read (a `#` inside a word is no comment)."""
    text = """#!/bin/bash
MODEL="Qwen/Qwen2.5-7B-Instruct"      # HuggingFace model name
NAME="vllm_server"                    # container name
URL=http://host/#frag
CMD="--model $MODEL \\
     --max-model-len 4096"
while [[ $# -gt 0 ]]; do
  case $1 in
    --model) MODEL="$2"; shift 2 ;;
    *) shift ;;
  esac
done
docker run --gpus all --name $NAME vllm/vllm-openai:v0.25.1 $CMD
"""
    (run,) = find_workloads([str(_script(tmp_path, text))])[1]
    assert run.container == "vllm_server"
    assert [t.text for t in run.argv] == ["--model", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096"]


def test_a_whole_command_held_in_a_variable_and_run_by_exec(tmp_path):
    """`CMD="docker run ... IMAGE --model $M ..."` (continued over lines, a token from the host inside) then
    `exec $CMD` (a real Ansible-managed script of manifest batch s50): the shell splits $CMD into the command it runs;
    a comment ending in a backslash above it continues nothing."""
    text = """#!/usr/bin/env bash
MODEL=${MODEL:-"Qwen/Qwen2.5-7B-Instruct"}
# --quantization ${QUANTIZATION} \\
CMD="docker run --gpus all -d --rm \\
  -e HUGGING_FACE_HUB_TOKEN=${HF_TOKEN} \\
  vllm/vllm-openai:v0.25.1 \\
  --model ${MODEL} \\
  --swap-space 4"
exec $CMD
"""
    report = scan([str(_script(tmp_path, text))], tmp_path)
    (run,) = report.workloads
    assert run.workload.image == "vllm/vllm-openai:v0.25.1"
    assert [t.text for t in run.workload.argv] == ["--model", "Qwen/Qwen2.5-7B-Instruct", "--swap-space", "4"]
    assert any(p.finding.rule_id == "KVD004" and p.finding.status == "fired" for p in run.placed)


def test_a_heredoc_is_data_and_a_variable_holding_a_container_exec_is_split(tmp_path):
    """A Slurm job that waits for Ray in a `python - <<EOF` body (`while time.time() < deadline:` there opens no
    shell loop), then `srun ... $RUN vllm serve "$MODEL"` with RUN="apptainer exec --nv IMAGE" (a real sbatch of an
    earlier batch): the assignments after the here-document are read, and $RUN is the container runtime's words."""
    text = """#!/bin/bash
#SBATCH --nodes=1
RUN="apptainer exec --nv /images/vllm.sif"
python - <<EOF
while time.time() < deadline:
    pass
EOF
MODEL=Qwen/Qwen2.5-7B-Instruct
srun --overlap -w "$head_node" $RUN vllm serve "$MODEL" --max-model-len 4096
"""
    (run,) = find_workloads([str(_script(tmp_path, text, "job.sbatch"))])[1]
    assert run.container == "apptainer"
    assert [t.text for t in run.argv] == ["Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096"]


def test_an_unset_variable_running_a_vllm_module_is_the_sites_python(tmp_path):
    """A real Slurm job (manifest batch s59, avioberoi/creative_novel_stories): `$PY -m vllm.entrypoints.openai.api_server`
    where PY is the site environment's interpreter, set outside the script."""
    text = "PORT=30000\n$PY -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B --port $PORT\n"
    (run,) = find_workloads([str(_script(tmp_path, text, "vllm.sbatch.sh"))])[1]
    assert [t.text for t in run.argv] == ["--model", "Qwen/Qwen3-8B", "--port", "30000"]


def test_a_heredoc_kept_in_a_variable_that_ssh_runs_on_a_remote_host_is_read(tmp_path):
    # REMOTE_CMD=$(cat <<EOF ... EOF) then `ssh $OPTS root@"$HOST" "$REMOTE_CMD"`: the remote login shell runs it,
    # with the unquoted delimiter's \\ as a line continuation
    script = ('IMAGE="vllm/vllm-openai:v0.25.1"\nREMOTE_CMD=$(cat <<EOF\ndocker rm -f vllm || true\n'
              'docker run -d --gpus all --name vllm \\\\\n  $IMAGE \\\\\n  --model Qwen/Qwen3-8B \\\\\n'
              '  --max-model-len 8192\nLOGS_PID=\\$!\nEOF\n)\n\nssh $SSH_OPTS root@"$HOST" "$REMOTE_CMD"\n')
    (run,) = find_workloads([str(_script(tmp_path, script))])[1]
    assert (run.kind, run.container, run.image) == ("docker run", "vllm", "vllm/vllm-openai:v0.25.1")
    assert [t.text for t in run.argv] == ["--model", "Qwen/Qwen3-8B", "--max-model-len", "8192"]
    # a heredoc kept in a variable that is only printed is data
    shown = script.replace('ssh $SSH_OPTS root@"$HOST" "$REMOTE_CMD"', 'echo "$REMOTE_CMD"')
    assert find_workloads([str(_script(tmp_path, shown))])[1] == []


def test_a_command_kept_in_a_multi_line_quoted_variable_is_one_command(tmp_path):
    # CMD="vllm serve $MODEL<newline>    --flag ..." (no backslashes): the newlines are spaces once $CMD is split
    script = ('SIF=/path/vllm.sif\nCMD="vllm serve Qwen/Qwen3-8B\n    --tensor-parallel-size 1\n'
              '    --max-model-len 16384"\nsingularity exec --nv "$SIF" $CMD\n')
    (run,) = find_workloads([str(_script(tmp_path, script))])[1]
    assert [t.text for t in run.argv] == ["Qwen/Qwen3-8B", "--tensor-parallel-size", "1", "--max-model-len", "16384"]


def test_apptainer_instance_run_runs_the_images_runscript_with_the_words_after_the_instance_name(tmp_path):
    script = "apptainer instance run --nv --env HF_HOME=/hf vllm-openai_v0.10.1.sif vllm1 --model Qwen/Qwen3-8B --port 8000\n"
    (run,) = find_workloads([str(_script(tmp_path, script))])[1]
    assert [t.text for t in run.argv] == ["--model", "Qwen/Qwen3-8B", "--port", "8000"]
    assert run.image == "vllm-openai_v0.10.1.sif"


def test_a_systemd_unit_kept_as_a_template_is_read_as_a_unit(tmp_path):
    unit = ("[Unit]\nDescription=vLLM\n\n[Service]\nUser=@USER@\nExecStart=/bin/bash -c 'exec /opt/vllm/bin/vllm serve "
            "/model --max-model-len ${MAX_MODEL_LEN} --port 8000'\n\n[Install]\nWantedBy=multi-user.target\n")
    (run,) = find_workloads([str(_script(tmp_path, unit, "vllm.service.template"))])[1]
    assert run.argv[0].text == "/model"
    (walked,) = find_workloads([str(tmp_path)])[1]  # a walk picks it up too
    assert walked.file.endswith("vllm.service.template")


def test_a_heredoc_kept_in_a_variable_that_a_shell_runs_with_a_redirection_after_it_is_read(tmp_path):
    script = ('read -r -d "" CMD <<EOF\nvllm serve Qwen/Qwen3-8B --max-model-len 4096\nEOF\n'
              'screen -dmS v bash -c "$CMD" > log 2>&1 &\n')
    (run,) = find_workloads([str(_script(tmp_path, script))])[1]
    assert [t.text for t in run.argv] == ["Qwen/Qwen3-8B", "--max-model-len", "4096"]


def test_docker_exec_runs_vllm_in_a_container_started_elsewhere(tmp_path):
    """Ladam2003/vllm-ray-cluster's shape: a Ray head container started by another step, vLLM launched in it with
    `docker exec NAME bash -lc "nohup python3 -m vllm.entrypoints.openai.api_server ..."`."""
    text = ('docker exec -e HF_HOME=/hf ray-head bash -lc " nohup python3 -m vllm.entrypoints.openai.api_server \\\n'
            '  --model /models/qwen --tensor-parallel-size 2 > /var/log/vllm.log 2>&1 & "\n')
    (run,) = find_workloads([str(_script(tmp_path, text, "run_model.sh"))])[1]
    assert (run.container, run.name) == ("ray-head", "run_model.sh")
    assert [t.text for t in run.argv] == ["--model", "/models/qwen", "--tensor-parallel-size", "2"]
    assert find_workloads([str(_script(tmp_path, "docker exec ray-head pgrep -f vllm\n", "check.sh"))])[1] == []


def test_env_given_an_array_of_assignments_runs_the_vllm_after_it(tmp_path):
    """davetha/mi210-llm-stack's shape (batch s95): `env "${env[@]}" vllm serve "$MODEL" ...`, the array built from
    NAME=VALUE words in a function; env's own options (-u NAME, -i) are skipped the same way."""
    text = ('MODEL=Qwen/Qwen3-14B\nstart() {\n  local env=(VLLM_PLUGINS= AITER_LOG_LEVEL=info)\n'
            '  env -u FOO "${env[@]}" vllm serve "$MODEL" --max-model-len 8192 > "$log" 2>&1 &\n}\nstart\n')
    (run,) = find_workloads([str(_script(tmp_path, text, "ab.sh"))])[1]
    assert [t.text for t in run.argv] == ["Qwen/Qwen3-14B", "--max-model-len", "8192"]


def test_docker_run_with_its_entrypoint_cleared_runs_the_words_after_the_image(tmp_path):
    # OuYangxin12/vllm-profiling's start_vllm.sh (s123): `--entrypoint ""` then `python3 -m vllm.entrypoints...`
    text = ('#!/bin/bash\nIMAGE="nvcr.io/nvidia/vllm:26.05-py3"\nTP_SIZE="${TP_SIZE:-2}"\n'
            'docker run -d --name vllm-qwen --gpus all --entrypoint "" \\\n    $IMAGE \\\n'
            '    python3 -m vllm.entrypoints.openai.api_server \\\n    --model /models/qwen \\\n'
            '    --tensor-parallel-size $TP_SIZE\n')
    (run,) = find_workloads([str(_script(tmp_path, text))])[1]
    assert (run.container, run.image) == ("vllm-qwen", "nvcr.io/nvidia/vllm:26.05-py3")
    assert [t.text for t in run.argv] == ["--model", "/models/qwen", "--tensor-parallel-size", "2"]


def test_a_command_run_by_an_env_loader_after_its_dashes_is_read(tmp_path):
    # pandevim/ludo-e2e-test2's run_vllm.slurm (s123): dotenvx loads .env, then runs apptainer with vLLM's image
    text = ("#!/bin/bash\n#SBATCH --gres=gpu:1\n~/.local/bin/dotenvx run -- apptainer run --nv "
            "docker://vllm/vllm-openai:latest \\\n    --model Qwen/Qwen3-Coder-Next \\\n    --kv-cache-dtype fp8\n")
    (run,) = find_workloads([str(_script(tmp_path, text, "run_vllm.slurm"))])[1]
    assert [t.text for t in run.argv] == ["--model", "Qwen/Qwen3-Coder-Next", "--kv-cache-dtype", "fp8"]
    assert run.argv[2].line == 5
