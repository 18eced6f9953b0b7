"""GitHub Actions YAML -> vLLM workloads: each step's `run:` script (a composite action's `runs.steps`, a workflow's
`jobs.<id>.steps`) read as a shell script (scan/scripts.py: docker run of vLLM, vllm serve, one workload per `if`
branch that sets the command's variables), with the literal `env` of the workflow, job and step. A `${{ ... }}`
expression is a variable unknown here, except a composite action's `inputs.X`: the value the calling step gives
in `with:`, else the input's `default`. A workflow step that `uses: ./path` runs that local composite action's steps
(action.yml in the repository) with its `with:` values. A step's `pip install vllm==X` pins the release of the vLLM
the job's later steps run (one runner, one environment). Named by the action's or workflow's `name`."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import yaml

from kvdoctor.data.gpus import gpu_for_node_label
from kvdoctor.scan import nodes
from kvdoctor.scan.documents import Document, display_path
from kvdoctor.scan.built_images import Build, roots_of
from kvdoctor.scan.called_scripts import called_script
from kvdoctor.scan.scripts import installed_before, installed_in, script_builds, script_workloads, unseen_commands
from kvdoctor.scan.embedded_scripts import INSTANCE_TYPE_LABEL
from kvdoctor.scan.workload import GpuSelector, Token, Workload

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
    steps = _step_scripts(doc.root, doc.file)
    builds = _builds(steps)
    found = []
    installed: dict[str | None, tuple[str, Token]] = {}  # per job: the last `pip install vllm==X` of its steps
    for step in steps:
        name = f"{workflow} / {step.job}" if step.job else workflow  # the job's id, as `workflow / job` names a check run
        read = script_workloads(step.script, step.first, step.file, name, step.env, builds)
        called = called_script(step.script, step.first, roots_of(doc.file)[0] / step.folder) if not read else None
        if called is not None:  # `run: bash scripts/deploy.sh`: the step's command is in a file of the repository
            note = f"run by the step at {step.file}:{called.word.line} ({called.word.text}), with its env"
            read = [replace(w, notes=w.notes + (note,), read_through=(str(called.path),))
                    for w in script_workloads(called.text, 1, str(called.path), name, step.env, builds)]  # fmt: skip
        if step.job is not None and (machine := _runner_instance(doc.root, step.job)) is not None:
            read = [replace(w, gpu_selectors=(machine,)) if not w.gpu_selectors else w
                    for w in read]  # fmt: skip
        if step.job in installed:
            read = [installed_before(w, installed[step.job]) if w.image is None and w.vllm_pin is None else w
                    for w in read]  # fmt: skip
        if (pin := installed_in(step.script, step.first, step.env)) is not None:
            installed[step.job] = pin
        if step.file != doc.file:  # a local action's step: its words are in that file, the workload is the workflow's
            note = f"a step of the local action {step.file}, used by the workflow's step with its `with:` values"
            read = [replace(w, notes=w.notes + (note,), read_through=w.read_through + (step.file,)) for w in read]
        found += [replace(w, notes=w.notes + (STEP_NOTE,)) for w in read]
    return found


def unseen_notes(doc: Document) -> list[str]:
    """Notes for steps that deploy vLLM with a command kvdoctor cannot see (`gcloud run deploy` of an image built
    elsewhere)."""
    steps = _step_scripts(doc.root, doc.file)
    builds = _builds(steps)
    return [note for step in steps for note in unseen_commands(step.script, step.first, step.file, step.env, builds)]


@dataclass(frozen=True)
class Step:
    """A step's `run:` script with ${{ }} made variables, where it is, the literal env it runs with, its
    working-directory in the repository ("." unless the step names one) and its job's id (None in a composite
    action)."""

    script: str
    first: int
    file: str
    env: dict[str, str]
    folder: str
    job: str | None


def _builds(steps: list[Step]) -> list[Build]:
    """The images the workflow's steps build: one step builds, a later one deploys."""
    return [build for step in steps for build in script_builds(step.script, step.first, step.env)]


def _step_scripts(root: yaml.Node, file: str, inputs: dict[str, str] | None = None, depth: int = 0) -> list[Step]:
    found = []
    inputs = _input_defaults(root) | (inputs or {})
    for step, env, job in _steps(root):
        used = _local_action(step, file) if depth == 0 else None
        if used is not None:  # `uses: ./.github/actions/setup-vllm`: that action's steps, with this step's `with:`
            action_file, action = used
            given = {f"inputs_{_variable(key)}": value for key, value in _literal_env(nodes.get(step, "with")).items()}
            found += [replace(s, job=job, env=env | s.env)
                      for s in _step_scripts(action, action_file, given, depth + 1)]  # fmt: skip
            continue
        run = nodes.get(step, "run")
        text = nodes.text(run)
        if not text:
            continue
        script = EXPRESSION.sub(lambda m: "${" + (_variable(m.group(1)) or "expr") + "}", text)
        folder = nodes.text(nodes.get(step, "working-directory")) or "."
        folder = "." if folder.startswith("/") or EXPRESSION.search(folder) else folder
        found.append(Step(script, nodes.text_line(run), file, inputs | env | _literal_env(nodes.get(step, "env")),
                          folder, job))  # fmt: skip
    return found


def _runner_instance(root: yaml.Node, job: str) -> GpuSelector | None:
    """A job's `runs-on` label that is a cloud instance type with a GPU (`g6.2xlarge`: a self-hosted runner on EC2),
    as the instance-type node label its GPU is looked up by."""
    runs_on = nodes.get(root, "jobs", job, "runs-on")
    for label in ([runs_on] if nodes.text(runs_on) else nodes.items(runs_on)):
        text = nodes.text(label) or ""
        if gpu_for_node_label(INSTANCE_TYPE_LABEL, text) is not None:
            return GpuSelector(INSTANCE_TYPE_LABEL, (text,), nodes.line(label))
    return None


def _variable(expression: str) -> str:
    """The shell variable a ${{ }} expression is read as: `inputs.max-model-len` -> inputs_max_model_len."""
    return re.sub(r"\W+", "_", expression).strip("_")


def _input_defaults(root: yaml.Node) -> dict[str, str]:
    """A composite action's inputs' literal defaults, as the variables its ${{ inputs.X }} are read as."""
    if not nodes.is_seq(nodes.get(root, "runs", "steps")):
        return {}
    return {f"inputs_{_variable(name)}": value for name, _, item in nodes.pairs(nodes.get(root, "inputs"))
            if (value := nodes.text(nodes.get(item, "default"))) is not None and not EXPRESSION.search(value)}


def _local_action(step: yaml.Node, file: str) -> tuple[str, yaml.Node] | None:
    """The file and parsed root of the local composite action a step `uses: ./path` (action.yml / action.yaml in
    the workflow's repository), None for any other step or an action that is not there."""
    uses = nodes.text(nodes.get(step, "uses")) or ""
    if not uses.startswith("./"):
        return None
    for name in ("action.yml", "action.yaml"):
        path = roots_of(file)[0] / uses / name
        try:
            root = yaml.compose(path.read_text(encoding="utf-8", errors="replace"), Loader=yaml.SafeLoader)
        except (OSError, yaml.YAMLError):
            continue
        if root is not None and nodes.is_seq(nodes.get(root, "runs", "steps")):
            return display_path(path), root
    return None


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
