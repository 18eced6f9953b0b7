"""GitHub Actions YAML: each step's `run:` script read as a shell script, one workload per `if` branch that sets
the vLLM command's variables."""

from __future__ import annotations

from scan_support import scan

from kvdoctor.scan.run import find_workloads

ACTION = """\
name: Setup vLLM
runs:
  using: "composite"
  steps:
    - name: Start vLLM container
      shell: bash
      run: |
        # Set VLLM_ARGS based on VLLM_MODE
        if [[ "$VLLM_MODE" == "inference" ]]; then
          VLLM_ARGS="--port 8000 --tool-call-parser hermes --model /root/.cache/Qwen3-0.6B --max-model-len 8192"
        elif [[ "$VLLM_MODE" == "embedding" ]]; then
          VLLM_ARGS="--port 8001 --model /root/.cache/granite-embedding --served-model-name granite"
        else
          exit 1
        fi
        docker run -d \\
          --name vllm-$VLLM_MODE \\
          $VLLM_IMAGE \\
          $VLLM_ARGS
"""

WORKFLOW = """\
name: e2e
on: [push]
env:
  MODEL: Qwen/Qwen3-0.6B
jobs:
  serve:
    runs-on: [self-hosted, gpu]
    env:
      TP: "2"
    steps:
      - uses: actions/checkout@v4
      - run: vllm serve $MODEL --tensor-parallel-size $TP --max-model-len ${{ inputs.max_len }} &
"""


def _file(tmp_path, text: str, name: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_composite_action_is_one_workload_per_if_branch_that_sets_its_arguments(tmp_path):
    # batch s32 (opendatahub-io/llama-stack-distribution .github/actions/setup-vllm/action.yml)
    inference, embedding = find_workloads([str(_file(tmp_path, ACTION, "action.yml"))])[1]
    assert (inference.name, inference.container, embedding.container) == ("Setup vLLM", "vllm-inference",
                                                                           "vllm-embedding")  # fmt: skip
    assert [t.text for t in inference.argv][-2:] == ["--max-model-len", "8192"]  # $VLLM_ARGS split into its words
    assert inference.line == 16 and inference.argv[0].line == 19  # the docker run line and the $VLLM_ARGS line
    assert any("VLLM_MODE=embedding" in n for n in embedding.notes)
    report = scan([str(_file(tmp_path, ACTION, "action.yml"))], tmp_path, gpu=None)
    assert all(r.error is None and not [p for p in r.placed if p.finding.severity == "error"
                                        and p.finding.status == "fired"] for r in report.workloads)  # fmt: skip


def test_a_workflow_step_is_read_with_its_jobs_env_and_expressions_left_unknown(tmp_path):
    (run,) = find_workloads([str(_file(tmp_path, WORKFLOW, "ci.yml"))])[1]
    assert (run.name, run.container) == ("e2e / serve", "vllm serve")
    assert [t.text for t in run.argv] == ["Qwen/Qwen3-0.6B", "--tensor-parallel-size", "2", "--max-model-len",
                                          "${inputs_max_len}"]  # fmt: skip
    (result,) = scan([str(_file(tmp_path, WORKFLOW, "ci.yml"))], tmp_path, gpu=None).workloads
    assert any("--max-model-len takes its value from ${inputs_max_len}" in n for n in result.report.notes)


def test_a_workflow_without_vllm_is_no_workload_and_no_note(tmp_path):
    text = "name: lint\non: [push]\njobs:\n  lint:\n    steps:\n      - run: ruff check .  # vllm style\n"
    files, found, notes, unread = __import__("kvdoctor.scan.run", fromlist=["x"]).read_manifests(
        [str(_file(tmp_path, text, "lint.yml"))])
    assert (found, unread, notes) == ([], [], [])


def test_a_walk_reads_the_github_directory_and_skips_other_dot_directories(tmp_path):
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    _file(tmp_path / ".github" / "workflows", WORKFLOW, "e2e.yml")
    (tmp_path / ".cache").mkdir()
    _file(tmp_path / ".cache", WORKFLOW, "copy.yml")
    found = __import__("kvdoctor.scan.run", fromlist=["x"]).read_manifests([str(tmp_path)])[1]
    assert [(w.name, w.file.rsplit("/", 2)[-2]) for w in found] == [("e2e / serve", "workflows")]
