"""SparkRun recipes (scitrera/sparkrun, RECIPES.md: a YAML file that `sparkrun run RECIPE` launches on DGX Spark
nodes) -> a vLLM workload: the `command` template with its `{placeholders}` filled from `defaults` and `{model}`
(iteratively, as sparkrun substitutes them; one not given stays unknown), the `container` image, the `env` mapping,
and the GB10 GPU each DGX Spark node has. Only the vLLM runtimes (`vllm`, the default, and `eugr-vllm`) run vLLM;
how many nodes (one GPU each) a run takes is chosen when it is launched (--tp, the cluster's hosts)."""

from __future__ import annotations

from pathlib import PurePosixPath

import yaml

from kvdoctor.scan import nodes
from kvdoctor.scan.command import run_script_text
from kvdoctor.scan.documents import Document
from kvdoctor.scan.embedded_scripts import PLACEHOLDER, placeholders_filled
from kvdoctor.scan.workload import EnvVar, GpuSelector, Token, Workload

VLLM_RUNTIMES = ("vllm", "eugr-vllm")
DGX_SPARK_GPU = "GB10"
"""Every DGX Spark node has one GB10 (sparkrun's RECIPES.md: "each node has one GPU")."""
NOTE = ("SparkRun recipe: its command template with `{placeholders}` from `defaults` and the model; each DGX Spark "
        "node has one GB10, and how many nodes a run takes (--tp, the cluster's hosts) is chosen at launch")


def is_sparkrun_recipe(root: yaml.Node) -> bool:
    """A recipe: a top-level `model` and `command` with sparkrun's `container` / `defaults` (or a vLLM `runtime`), no
    Kubernetes or Compose keys, on a vLLM runtime."""
    if not nodes.is_map(root) or nodes.get(root, "apiVersion") is not None or nodes.get(root, "services") is not None:
        return False
    if nodes.text(nodes.get(root, "model")) is None or nodes.text(nodes.get(root, "command")) is None:
        return False
    runtime = nodes.text(nodes.get(root, "runtime"))
    if runtime is not None:
        return runtime in VLLM_RUNTIMES
    return nodes.get(root, "container") is not None and nodes.is_map(nodes.get(root, "defaults"))


def workloads(doc: Document, source_text: str) -> list[Workload]:
    root = doc.root
    command = nodes.get(root, "command")
    model = str(nodes.text(nodes.get(root, "model")))
    script, _ = placeholders_filled(str(nodes.text(command)), ("defaults", _values(root, model)))
    argv = run_script_text(Token(script, nodes.text_line(command)))
    if argv is None:
        return []
    image_node = nodes.get(root, "container")
    env = [EnvVar(name, nodes.text(node), nodes.line(node)) for name, _, node in nodes.pairs(nodes.get(root, "env"))]
    return [Workload(
        # named as the scripts a YAML document holds are (scan/embedded_scripts.py): the file, the launcher
        file=doc.file, line=nodes.line(root), platform="script", kind="SparkRun recipe",
        name=PurePosixPath(doc.file).name, container="vllm serve", image=nodes.text(image_node),
        image_line=nodes.line(image_node), argv=tuple(argv), command_line=argv[0].line,
        env=tuple(env), gpu_selectors=(GpuSelector("gpu", (DGX_SPARK_GPU,), nodes.line(root)),), notes=(NOTE,),
    )]  # fmt: skip


def _values(root: yaml.Node, model: str) -> dict[str, str]:
    """`defaults` and `model` as the variables the placeholders stand for, each value's own placeholders filled from
    the others (sparkrun substitutes until nothing changes; a few passes settle any recipe without a cycle)."""
    values = {"model": model}
    for key, _, node in nodes.pairs(nodes.get(root, "defaults")):
        if node is not None and not nodes.is_map(node):
            plain = yaml.safe_load(yaml.serialize(node))
            values[key] = "" if plain is None else str(plain).lower() if isinstance(plain, bool) else str(plain)
    for _ in range(5):
        values = {key: PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), value)
                  for key, value in values.items()}  # fmt: skip
    return values
