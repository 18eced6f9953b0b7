"""singularity-compose files (`version` and `instances:`, singularity-compose's spec) -> a vLLM workload per instance
whose `run.args` (a string or a list of strings, the instance's runscript arguments, run by its shell) launch vLLM,
read as a script on the file's own lines; `start.options: [nv]` gives it the node's NVIDIA GPUs (no count). An
instance is named as a Compose service is: by itself."""

from __future__ import annotations

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.command import run_script
from kvdoctor.scan.documents import Document
from kvdoctor.scan.workload import Workload

GPU_OPTIONS = {"nv", "--nv", "nvccli", "--nvccli", "rocm", "--rocm"}
NOTE = "a singularity-compose instance: its run args, run by the instance's runscript"


def is_singularity_compose(root: yaml.Node) -> bool:
    instances = nodes.get(root, "instances")
    return (nodes.is_map(root) and nodes.is_map(instances) and nodes.get(root, "services") is None
            and any(nodes.get(i, "build", "recipe") is not None or (nodes.text(nodes.get(i, "image")) or "").endswith(".sif")
                    for _, _, i in nodes.pairs(instances)))  # fmt: skip


def workloads(doc: Document, source_text: str) -> list[Workload]:
    found = []
    for name, key, instance in nodes.pairs(nodes.get(doc.root, "instances")):
        args = nodes.get(instance, "run", "args")
        for item in (nodes.items(args) if nodes.is_seq(args) else [args] if nodes.is_scalar(args) else []):
            argv = run_script(item, source_text)
            if argv is None:
                continue
            options = {nodes.text(o) for o in nodes.items(nodes.get(instance, "start", "options"))}
            image = nodes.get(instance, "image")
            workload = Workload(
                file=doc.file, line=nodes.line(key), platform="singularity", kind="Singularity Compose instance",
                name=name, container=name, argv=tuple(argv), command_line=argv[0].line if argv else nodes.line(item),
                image=nodes.text(image), image_line=nodes.line(image),
                notes=(NOTE + (" with the node's GPUs (start option nv)" if options & GPU_OPTIONS else ""),),
            )  # fmt: skip
            found.append(workload)
            break
    return found
