"""The composite action's `run:` steps executed as GitHub would: bash -eo pipefail, inputs through env, outputs
through $GITHUB_OUTPUT. pip is stubbed (the install is recorded, not done); the scan runs the real kvdoctor."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml
from scan_support import MANIFESTS, REPO

ACTION = yaml.safe_load((REPO / "action.yml").read_text())
EXPRESSION = re.compile(r"\$\{\{\s*(.+?)\s*\}\}")


def _evaluate(text: str, inputs: dict[str, str], outputs: dict[str, dict[str, str]]) -> str:
    def value(match: re.Match[str]) -> str:
        expr = match.group(1)
        if expr.startswith("inputs."):
            return inputs[expr[len("inputs."):]]
        if expr == "github.action_path":
            return str(REPO)
        step = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr)
        if step:
            return outputs.get(step.group(1), {}).get(step.group(2), "")
        raise AssertionError(f"the test does not evaluate ${{{{ {expr} }}}}")

    return EXPRESSION.sub(value, text)


def run_action(tmp_path: Path, workdir: Path, **given: str):
    """Run every `run:` step in order; returns (steps' results, outputs, pip log, summary)."""
    inputs = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items()} | given
    stub = tmp_path / "stub-bin"
    stub.mkdir()
    pip_log = tmp_path / "pip.log"
    (stub / "python").write_text(f'#!/bin/sh\nif [ "$1 $2" = "-m pip" ]; then echo "$@" >> {pip_log}; exit 0; fi\n'
                                 f'exec {sys.executable} "$@"\n')  # fmt: skip
    (stub / "python").chmod(0o755)
    summary = tmp_path / "summary.md"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KVDOCTOR_", "HF_", "GITHUB_"))}
    base.update(PATH=f"{stub}:{Path(sys.executable).parent}:{os.environ['PATH']}", HF_HUB_OFFLINE="1",
                KVDOCTOR_CACHE_DIR=str(tmp_path / "cache"), GITHUB_STEP_SUMMARY=str(summary),
                GITHUB_ACTION_PATH=str(REPO))  # fmt: skip
    outputs: dict[str, dict[str, str]] = {}
    results = {}
    for step in ACTION["runs"]["steps"]:
        if "run" not in step:
            continue
        assert step["shell"] == "bash" and "${{" not in step["run"]  # inputs reach scripts only through env
        output_file = tmp_path / f"output-{len(results)}"
        output_file.write_text("")
        env = base | {k: _evaluate(str(v), inputs, outputs) for k, v in step.get("env", {}).items()}
        env["GITHUB_OUTPUT"] = str(output_file)
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=workdir,
                              env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
        results[step["name"]] = proc
        lines = [line.partition("=") for line in output_file.read_text().splitlines() if "=" in line]
        if step.get("id"):
            outputs[step["id"]] = {k: v for k, _, v in lines}
    log = pip_log.read_text() if pip_log.exists() else ""
    return results, outputs, log, summary.read_text() if summary.exists() else ""


def test_failing_workload_fails_the_job_with_annotations_sarif_and_summary(tmp_path):
    results, outputs, pip_log, summary = run_action(
        tmp_path, REPO, paths="tests/fixtures/manifests/acceptance", gpu="A100", args="--no-compile",
        **{"sarif-file": str(tmp_path / "scan.sarif")},
    )  # fmt: skip
    assert f"-m pip install --disable-pip-version-check {REPO}[compile]" in pip_log
    scan = results["Scan"]
    assert scan.returncode == 0, scan.stderr  # the scan step records; the gate step fails
    assert outputs["scan"]["exit-code"] == "1"
    assert "::error file=tests/fixtures/manifests/acceptance/vllm-k8s.yaml,line=29,title=KVD101" in scan.stdout
    sarif = json.loads((tmp_path / "scan.sarif").read_text())
    assert any(r["ruleId"] == "KVD101" for r in sarif["runs"][0]["results"])
    assert outputs["scan"]["sarif-file"] == str(tmp_path / "scan.sarif")
    assert summary.startswith("### ❌ kvdoctor scan: **FAIL**")
    assert results["Gate on the scan"].returncode == 1


def test_passing_scan_passes_and_version_input_installs_from_the_index(tmp_path):
    workdir = tmp_path / "repo"
    workdir.mkdir()
    (workdir / "web.yaml").write_text((MANIFESTS / "no-vllm.yaml").read_text())
    results, outputs, pip_log, _ = run_action(tmp_path, workdir, version="0.1.0", args="--allow-no-workload")
    assert "install --disable-pip-version-check kvdoctor[compile]==0.1.0" in pip_log
    assert outputs["scan"]["exit-code"] == "0"
    assert results["Gate on the scan"].returncode == 0


def test_unreadable_input_fails_with_exit_2(tmp_path):
    results, outputs, _, _ = run_action(tmp_path, REPO, paths="tests/fixtures/manifests/malformed.yaml",
                                        **{"sarif-file": str(tmp_path / "scan.sarif")})  # fmt: skip
    assert outputs["scan"]["exit-code"] == "2"
    sarif = json.loads((tmp_path / "scan.sarif").read_text())  # the unreadable file is a result of its own
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]] == ["kvdoctor/not-read"]
    assert results["Gate on the scan"].returncode == 2


def test_sarif_upload_step_uses_the_scan_output():
    upload = next(s for s in ACTION["runs"]["steps"] if "uses" in s)
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert upload["with"]["sarif_file"] == "${{ steps.scan.outputs.sarif-file }}"
    assert "always()" in upload["if"] and "inputs.upload-sarif == 'true'" in upload["if"]


def _gpu_less_manifest(folder: Path) -> Path:
    """A pinned vLLM with an fp8 KV cache on nodes that name no GPU: error rules only the GPU decides (KVD111)."""
    manifest = folder / "vllm.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: no-gpu-label}\nspec:\n  containers:\n"
                        "    - name: vllm\n      image: vllm/vllm-openai:v0.28.0\n"
                        f"      args: [{REPO / 'examples' / 'qwen2.5-3b-instruct'}, --kv-cache-dtype, fp8]\n")  # fmt: skip
    return manifest


def test_the_default_fail_on_undecided_fails_a_job_whose_gpu_is_unknown(tmp_path):
    # issue 27: a GPU-less job used to exit 0 with undecided error rules; the action's default gate fails it
    assert ACTION["inputs"]["fail-on"]["default"] == "undecided"
    workdir = tmp_path / "repo"
    workdir.mkdir()
    _gpu_less_manifest(workdir)
    results, outputs, _, _ = run_action(tmp_path, workdir, args="--no-compile", **{"upload-sarif": "false"})
    assert outputs["scan"]["exit-code"] == "1" and results["Gate on the scan"].returncode == 1
    assert "KVD111" in results["Scan"].stdout
    (tmp_path / "stub-bin").rename(tmp_path / "stub-bin-1")
    _, lenient, _, _ = run_action(tmp_path, workdir, args="--no-compile", **{"fail-on": "error"})
    assert lenient["scan"]["exit-code"] == "0"  # the same scan gated on fired errors only passes
