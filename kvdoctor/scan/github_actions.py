"""GitHub Actions YAML -> vLLM workloads: each step's `run:` script (a composite action's `runs.steps`, a workflow's
`jobs.<id>.steps`) read as a shell script (scan/scripts.py: docker run of vLLM, vllm serve, one workload per `if`
branch that sets the command's variables), with the literal `env` of the workflow, job and step. A `${{ ... }}`
expression is a variable unknown here. Named by the action's or workflow's `name`."""

from __future__ import annotations

import re
from dataclasses import replace

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.documents import Document
from kvdoctor.scan.built_images import Build, roots_of
from kvdoctor.scan.called_scripts import called_script
from kvdoctor.scan.scripts import script_builds, script_workloads, unseen_commands
from kvdoctor.scan.workload import Workload

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
"""A GitHub expression (${{ inputs.model }}), filled in by the runner: read as the variable ${inputs_model}."""
STEP_NOTE = "a GitHub Actions step's `run:` script, read as a shell script"


def is_github_actions(root: yaml.Node) -> bool:
    """A composite action (`runs.steps`) or a workflow (`jobs` whose entries have `steps`), not Kubernetes."""
    if not nodes.is_map(root) or nodes.get(root, "apiVersion") is not None:
        return False
    if nodes.is_seq(nodes.get(root, "runs", "steps")):
        return True
    return any(nodes.is_seq(nodes.get(job, "steps")) for _, _, job in nodes.pairs(nodes.get(root, "jobs")))


def workloads(doc: Document, source_text: str) -> list[Workload]:
    workflow = nodes.text(nodes.get(doc.root, "name")) or "(unnamed)"
    steps = _step_scripts(doc.root)
    builds = _builds(steps)
    found = []
    for script, first, env, folder, job in steps:
        name = f"{workflow} / {job}" if job else workflow  # the job's id, as `workflow / job` names a check run
        read = script_workloads(script, first, doc.file, name, env, builds)
        called = called_script(script, first, roots_of(doc.file)[0] / folder) if not read else None
        if called is not None:  # `run: bash scripts/deploy.sh`: the step's command is in a file of the repository
            note = f"run by the step at {doc.file}:{called.word.line} ({called.word.text}), with its env"
            read = [replace(w, notes=w.notes + (note,), read_through=(str(called.path),))
                    for w in script_workloads(called.text, 1, str(called.path), name, env, builds)]  # fmt: skip
        found += [replace(w, notes=w.notes + (STEP_NOTE,)) for w in read]
    return found


def unseen_notes(doc: Document) -> list[str]:
    """Notes for steps that deploy vLLM with a command kvdoctor cannot see (`gcloud run deploy` of an image built
    elsewhere)."""
    steps = _step_scripts(doc.root)
    builds = _builds(steps)
    return [note for script, first, env, _, _ in steps
            for note in unseen_commands(script, first, doc.file, env, builds)]


def _builds(steps: list[tuple[str, int, dict[str, str], str, str | None]]) -> list[Build]:
    """The images the workflow's steps build: one step builds, a later one deploys."""
    return [build for script, first, env, _, _ in steps for build in script_builds(script, first, env)]


def _step_scripts(root: yaml.Node) -> list[tuple[str, int, dict[str, str], str, str | None]]:
    """(each step's `run:` script with ${{ }} made variables, its first line, the literal env it runs with, its
    working-directory in the repository: "." unless the step names one, its job's id: None in a composite action)."""
    found = []
    for step, env, job in _steps(root):
        run = nodes.get(step, "run")
        text = nodes.text(run)
        if not text:
            continue
        first = nodes.text_line(run)
        script = EXPRESSION.sub(lambda m: "${" + (re.sub(r"\W+", "_", m.group(1)).strip("_") or "expr") + "}", text)
        folder = nodes.text(nodes.get(step, "working-directory")) or "."
        folder = "." if folder.startswith("/") or EXPRESSION.search(folder) else folder
        found.append((script, first, env | _literal_env(nodes.get(step, "env")), folder, job))
    return found


def _steps(root: yaml.Node) -> list[tuple[yaml.Node, dict[str, str], str | None]]:
    """Each step with the env its workflow and job set (a composite action's steps: none) and its job's id."""
    if nodes.is_seq(nodes.get(root, "runs", "steps")):
        return [(step, {}, None) for step in nodes.items(nodes.get(root, "runs", "steps"))]
    top = _literal_env(nodes.get(root, "env"))
    return [(step, top | _literal_env(nodes.get(job, "env")), job_id)
            for job_id, _, job in nodes.pairs(nodes.get(root, "jobs")) for step in nodes.items(nodes.get(job, "steps"))]


def _literal_env(node: yaml.Node | None) -> dict[str, str]:
    """`env:` values written out (not ${{ ... }}, filled in by the runner)."""
    return {key: value for key, _, item in nodes.pairs(node)
            if (value := nodes.text(item)) is not None and not EXPRESSION.search(value)}  # fmt: skip
