"""Stop 50 (issue 27), batches s101-s103's shapes: a script's `[[ $EXTRA == *"tool-call-parser"* ]]` is a glob
match, so the branch it guards says nothing of EXTRA's value (it was read as EXTRA='*', a false KVD004); vLLM's
package run as a module by an interpreter in a variable or by `uv run -m`; vLLM started by `ray job submit -- ...`."""

from __future__ import annotations

from kvdoctor.scan.command import branch_assignments

SCRIPT = """\
extra="${1#*=}"
tool_choice=""
if [[ $extra == *"tool-call-parser"* ]]; then
  tool_choice="--enable-auto-tool-choice"
fi
if [[ "$MODE" == "embed" ]]; then
  TASK="--task embed"
fi
"""


def test_a_glob_pattern_gives_the_tested_name_no_value():
    branches = branch_assignments(SCRIPT)
    assert {"tool_choice": "--enable-auto-tool-choice"} in branches
    assert not any("extra" in branch for branch in branches)


def test_a_literal_word_still_gives_its_value():
    assert {"MODE": "embed", "TASK": "--task embed"} in branch_assignments(SCRIPT)


def _fired(tmp_path, script: str) -> set[str]:
    from scan_support import scan

    (tmp_path / "serve.sh").write_text(script)
    (result,) = scan([str(tmp_path / "serve.sh")], tmp_path).workloads
    return {p.finding.rule_id for p in result.placed if p.finding.status == "fired"}


def test_the_interpreter_in_a_variable_or_uv_running_vllms_package_as_a_module_is_refused(tmp_path):
    for launcher in ("$PY", '"${PYTHON_BIN}" -u', "uv run"):
        script = f"#!/bin/bash\nPY=/opt/venv/bin/python\n{launcher} -m vllm serve Qwen/Qwen2.5-3B-Instruct --max-model-len 4096\n"
        assert "KVD214" in _fired(tmp_path, script), launcher


def test_the_cli_module_is_not_refused(tmp_path):
    script = "#!/bin/bash\n$PY -m vllm.entrypoints.cli.main serve Qwen/Qwen2.5-3B-Instruct --max-model-len 4096\n"
    assert "KVD214" not in _fired(tmp_path, script)


def test_vllm_under_ray_job_submit_is_found_with_its_arguments(tmp_path):
    from scan_support import scan

    (tmp_path / "serve.slurm").write_text(
        '#!/bin/bash\nRAY_ADDRESS="http://$HEAD:8265" ray job submit \\\n    --working-dir src --no-wait \\\n'
        '    -- vllm serve deepseek-ai/DeepSeek-R1 \\\n        --tensor-parallel-size 8 \\\n'
        '        --pipeline-parallel-size 4\n')
    (result,) = scan([str(tmp_path / "serve.slurm")], tmp_path).workloads
    words = [t.text for t in result.workload.argv if not t.text.startswith("RAY_ADDRESS=")]
    assert words[0] == "deepseek-ai/DeepSeek-R1" and "--working-dir" not in words
    assert words[-4:] == ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "4"]
