"""Cloud Build configs (cloudbuild.yaml, cloud.google.com/build/docs/build-config-file-schema) -> vLLM workloads: a
step that runs gcloud (the `gcr.io/cloud-builders/gcloud` or cloud-sdk builder, or `entrypoint: gcloud`) with `args`
is that command (`run deploy ...`: scan/cloud_run.py); a step whose `entrypoint` is a shell with `-c SCRIPT`, or
that has a `script`, is read as a shell script. `substitutions` give `$_NAME` / `${_NAME}` their defaults; Cloud
Build's own (`$PROJECT_ID`, `$SHORT_SHA`) are unknown here. Named by the file, container = the Cloud Run service."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import PurePosixPath

import yaml

from kvdoctor.scan import cloud_run, nodes
from kvdoctor.scan.command import SHELL_COMMAND_OPTION, SHELLS, expand_words
from kvdoctor.scan.documents import Document
from kvdoctor.scan.image_entrypoints import unseen_note
from kvdoctor.scan.scripts import script_workloads, unseen_commands
from kvdoctor.scan.workload import Token, Workload

GCLOUD_BUILDERS = re.compile(r"(?:^|/)(?:cloud-builders/gcloud|cloudsdktool/(?:google-)?cloud-sdk)(?::|$)")
STEP_NOTE = "a Cloud Build step (cloudbuild.yaml): its args are the builder's command"


def is_cloud_build(root: yaml.Node) -> bool:
    steps = nodes.get(root, "steps")
    items = nodes.items(steps)
    # each step names its builder image; Drone / Woodpecker steps name themselves and give `image` and `commands`
    builders = bool(items) and all(nodes.get(s, "name") is not None and nodes.get(s, "image") is None
                                   and nodes.get(s, "commands") is None for s in items)  # fmt: skip
    return nodes.is_map(root) and nodes.get(root, "apiVersion") is None and builders


def workloads(doc: Document, source_text: str) -> list[Workload]:
    name = PurePosixPath(doc.file).name
    found: list[Workload] = []
    for kind, payload, first in _commands(doc.root):
        if kind == "gcloud":
            workload = cloud_run.workload(doc.file, name, payload)
            found += [workload] if workload is not None else []
        else:
            found += script_workloads(payload, first, doc.file, name, _substitutions(doc.root))
    return [replace(w, notes=w.notes + (STEP_NOTE,)) for w in found]


def unseen_notes(doc: Document) -> list[str]:
    """Notes for gcloud run deploy steps of a vLLM service whose command is built elsewhere."""
    notes = []
    for kind, payload, first in _commands(doc.root):
        if kind == "script":
            notes += unseen_commands(payload, first, doc.file, _substitutions(doc.root))
        elif cloud_run.workload(doc.file, "", payload) is None and (found := cloud_run.unseen(payload)) is not None:
            service, image, word = found
            notes.append(unseen_note(f"{doc.file}:{word.line}", f"Cloud Run service {service}", image))
    return notes


def _commands(root: yaml.Node) -> list[tuple[str, object, int]]:
    """Each step as ('gcloud', its words expanded from the substitutions, line) or ('script', text, first line)."""
    known = _substitutions(root)
    found: list[tuple[str, object, int]] = []
    for step in nodes.items(nodes.get(root, "steps")):
        builder = nodes.text(nodes.get(step, "name")) or ""
        entrypoint = nodes.text(nodes.get(step, "entrypoint"))
        arg_nodes = [a for a in nodes.items(nodes.get(step, "args")) if nodes.text(a) is not None]
        args = [Token(str(nodes.text(a)), nodes.line(a)) for a in arg_nodes]
        script = nodes.get(step, "script")
        line = nodes.line(step) or 1
        if nodes.text(script):
            found.append(("script", nodes.text(script), (nodes.line(script) or line) + (script.style in ("|", ">"))))
        elif entrypoint == "gcloud" or (entrypoint is None and GCLOUD_BUILDERS.search(builder)):
            found.append(("gcloud", expand_words([Token("gcloud", line)] + args, known), line))
        elif entrypoint and PurePosixPath(entrypoint).name in SHELLS:
            flag = next((i for i, a in enumerate(args[:-1]) if SHELL_COMMAND_OPTION.match(a.text)), None)
            if flag is not None:
                node = arg_nodes[flag + 1]
                found.append(("script", args[flag + 1].text, (nodes.line(node) or line) + (node.style in ("|", ">"))))
    return found


def _substitutions(root: yaml.Node) -> dict[str, str]:
    return {key: value for key, _, node in nodes.pairs(nodes.get(root, "substitutions"))
            if (value := nodes.text(node)) is not None}  # fmt: skip
