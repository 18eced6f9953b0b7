"""A vLLM source tree in the scanned checkout (scan/source_tree.py, manifest batch s108: a research fork's launch
scripts beside the fork's own vllm/ package): an option only the fork's parser adds is undecided, never a false
error; without the tree, or with an image naming the release, the same option is refused."""

from __future__ import annotations

from scan_support import scan, write_tree

SCRIPT = """\
#!/bin/bash
python -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-2-7b-chat-hf \\
    --tensor-parallel-size 2 --coinference-scheduler
"""
FORK = {"vllm/__init__.py": '__version__ = "0.4.3"\n',
        "vllm/engine/arg_utils.py": 'parser.add_argument("--coinference-scheduler", action="store_true")\n'}


def _kvd004(tmp_path, files):
    root = write_tree(tmp_path / "repo", files)
    (result,) = scan([str(root)], tmp_path, gpu="A100").workloads
    return [(p.finding.status, p.finding.severity) for p in result.placed if p.finding.rule_id == "KVD004"], result


def test_an_option_a_fork_in_the_checkout_adds_is_undecided(tmp_path):
    fired, result = _kvd004(tmp_path, {"launch.sh": SCRIPT, **FORK})
    assert fired == [("undecided", "error")]
    assert any("vLLM source tree at" in n and "0.4.3" in n for n in result.workload.notes)


def test_the_tree_may_sit_below_the_scripts_folder(tmp_path):
    nested = {"launch.sh": SCRIPT, **{f"third_party/vllm/{k}": v for k, v in FORK.items()}}  # a submodule
    assert _kvd004(tmp_path, nested)[0] == [("undecided", "error")]


def test_without_a_tree_the_option_is_refused(tmp_path):
    assert _kvd004(tmp_path, {"launch.sh": SCRIPT})[0] == [("fired", "error")]


def test_an_image_naming_its_release_is_not_the_tree(tmp_path):
    compose = ('services:\n  vllm:\n    image: vllm/vllm-openai:v0.8.5\n'
               '    command: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--coinference-scheduler"]\n')
    assert _kvd004(tmp_path, {"compose.yaml": compose, **FORK})[0] == [("fired", "error")]


def test_a_tree_outside_the_checkout_is_not_read(tmp_path):
    outer = write_tree(tmp_path / "outer", FORK)
    inner = write_tree(outer / "deploy", {"launch.sh": SCRIPT, ".git/HEAD": "ref: refs/heads/main\n"})
    (result,) = scan([str(inner)], tmp_path, gpu="A100").workloads
    assert [p.finding.status for p in result.placed if p.finding.rule_id == "KVD004"] == ["fired"]
