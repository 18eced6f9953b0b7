"""The pre-commit hook: pre-commit itself installs kvdoctor from this repository's HEAD and runs the hook;
without pre-commit, the hook's entry and file filter are run as pre-commit would run them."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from scan_support import MANIFESTS, REPO

HOOKS = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=cwd, check=True,
                   capture_output=True)  # fmt: skip


def _project(tmp_path: Path) -> Path:
    """A repository with a failing manifest, a Helm template and a non-vLLM file."""
    project = tmp_path / "project"
    (project / "deploy").mkdir(parents=True)
    shutil.copy(MANIFESTS / "acceptance" / "vllm-k8s.yaml", project / "deploy" / "vllm.yaml")
    shutil.copy(MANIFESTS / "no-vllm.yaml", project / "deploy" / "web.yaml")
    (project / "chart" / "templates").mkdir(parents=True)
    shutil.copy(MANIFESTS / "templated.yaml", project / "chart" / "templates" / "deployment.yaml")
    shutil.copytree(REPO / "examples", project / "examples")
    _git(project, "init", "-q")
    _git(project, "add", ".")
    _git(project, "commit", "-qm", "manifests")
    return project


def test_hook_definition():
    (hook,) = HOOKS
    assert hook["id"] == "kvdoctor-scan" and hook["entry"] == "kvdoctor scan --allow-no-workload" and hook["language"] == "python"
    assert hook["types"] == ["yaml"] and re.search(hook["exclude"], "chart/templates/deployment.yaml")
    assert not re.search(hook["exclude"], "deploy/vllm.yaml")


def test_hook_entry_on_the_files_pre_commit_would_pass(tmp_path):
    (hook,) = HOOKS
    project = _project(tmp_path)
    files = [str(p.relative_to(project)) for p in sorted(project.rglob("*.yaml"))
             if not re.search(hook["exclude"], str(p.relative_to(project)))]  # fmt: skip
    assert files == ["deploy/vllm.yaml", "deploy/web.yaml"]
    entry = shlex.split(hook["entry"])
    assert entry[0] == "kvdoctor"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "KVDOCTOR_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-m", "kvdoctor", *entry[1:], "--gpu", "A100", "--no-compile", *files],
                         cwd=project, capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert run.returncode == 1, run.stderr
    assert "deploy/vllm.yaml:29" in run.stdout and "KVD101" in run.stdout
    passing = subprocess.run([sys.executable, "-m", "kvdoctor", *entry[1:], "deploy/web.yaml"],
                             cwd=project, capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert passing.returncode == 0, passing.stderr


@pytest.mark.skipif(shutil.which("pre-commit") is None and not (Path(sys.executable).parent / "pre-commit").exists(),
                    reason="pre-commit is not installed (pip install pre-commit)")  # fmt: skip
def test_pre_commit_runs_the_hook_from_this_repository(tmp_path):
    project = _project(tmp_path)
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {REPO}\n    rev: {rev}\n    hooks:\n      - id: kvdoctor-scan\n"
        "        args: [--gpu, A100, --no-compile]\n"
    )
    pre_commit = shutil.which("pre-commit") or str(Path(sys.executable).parent / "pre-commit")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KVDOCTOR_", "PYTHONPATH"))}
    env.update(PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"), HF_HUB_OFFLINE="1",
               KVDOCTOR_CACHE_DIR=str(tmp_path / "cache"))  # fmt: skip
    run = subprocess.run([pre_commit, "run", "--all-files", "--verbose"], cwd=project, capture_output=True,
                         text=True, env=env, timeout=600)  # fmt: skip
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "kvdoctor scan (vLLM deployments)" in output and "Failed" in output
    assert "deploy/vllm.yaml:29" in output and "KVD101" in output
    assert "Helm/Go template" not in output  # chart/templates/ excluded by the hook


def test_the_hooks_own_args_fail_on_an_error_rule_left_undecided(tmp_path):
    # issue 27: with no GPU on a developer's machine, `--fail-on undecided` (the hook's args) blocks the commit
    (hook,) = HOOKS
    assert hook["args"] == ["--fail-on", "undecided"]
    (tmp_path / "vllm.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: no-gpu-label}\nspec:\n  containers:\n"
        "    - name: vllm\n      image: vllm/vllm-openai:v0.28.0\n"
        f"      args: [{REPO / 'examples' / 'qwen2.5-3b-instruct'}, --kv-cache-dtype, fp8]\n")  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "KVDOCTOR_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO),
           "CUDA_VISIBLE_DEVICES": ""}  # fmt: skip
    entry = shlex.split(hook["entry"])[1:]

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kvdoctor", *entry, *args, "--no-compile", "vllm.yaml"],
                              cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)  # fmt: skip

    gated = run(*hook["args"])
    assert gated.returncode == 1 and "undecided error KVD111" in gated.stdout, (gated.stdout, gated.stderr)
    assert run().returncode == 0  # without the hook's args the same file would pass
