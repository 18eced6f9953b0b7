"""A Slurm batch script's `#SBATCH` directives (sbatch(1)): the nodes and GPUs the job gets, as the variables Slurm
sets in its environment (SLURM_NNODES / SLURM_JOB_NUM_NODES, SLURM_GPUS_ON_NODE / SLURM_GPUS_PER_NODE) and, for a
one-node job, the GPU count of the workload it runs. Directives are read until the first command (sbatch stops
there); a value with a variable or a range (`-N 2-4`) is not a number and sets nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass

DIRECTIVE = re.compile(r"^#SBATCH\s+(.*?)\s*(?:#.*)?$")
OPTION = re.compile(r"^(--[\w-]+|-[A-Za-z])(?:[= ]\s*(\S+))?$")
GRES_GPU = re.compile(r"(?:^|,)gpu(?::[\w.-]+)?:(\d+)(?:,|$)")
GRES_GPU_TYPE = re.compile(r"(?:^|,)gpu:([A-Za-z][\w.-]*):\d+(?:,|$)")
"""`gpu:a100:4` in --gres (never another gres, `nvme:1`): the GPU type a cluster's gres.conf names."""
GPUS_TYPE = re.compile(r"^([A-Za-z][\w.-]*):\d+$")
"""`a100:4` in --gpus, --gpus-per-node, -G."""
GPU_TYPE_KEY = "#SBATCH gpu type"
"""The selector key of that type (scan/facts.py reads its value as a GPU name, as a node label's)."""
GPU_TYPE_OPTIONS = ("--gres", "--gpus-per-node", "--gpus", "-G", "--gpus-per-task")


@dataclass(frozen=True)
class SlurmJob:
    nodes: int | None
    gpus_per_node: int | None
    line: int | None
    """The line of the directive that gives the GPUs."""
    gpu_type: tuple[str, int] | None = None
    """The GPU type the job asks for (`--gres=gpu:a6000:2`) and its line: the site's gres name, most often the GPU's."""
    image: tuple[str, int] | None = None
    """Shifter's image for the job (`#SBATCH --image=docker:IMG`, NERSC) and its line: what `shifter` runs when its
    command line names none."""

    def environment(self) -> dict[str, str]:
        env: dict[str, str] = {}
        if self.nodes is not None:
            env |= {"SLURM_NNODES": str(self.nodes), "SLURM_JOB_NUM_NODES": str(self.nodes)}
        if self.gpus_per_node is not None:
            env |= {"SLURM_GPUS_ON_NODE": str(self.gpus_per_node), "SLURM_GPUS_PER_NODE": str(self.gpus_per_node)}
        return env


def job_of(script: str) -> SlurmJob | None:
    """The job a batch script's directives ask for, or None when it has no `#SBATCH` line."""
    options: dict[str, tuple[str, int]] = {}
    for number, line in enumerate(script.split("\n"), start=1):
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and not stripped.startswith("#SBATCH")):
            continue
        if not stripped.startswith("#SBATCH"):
            break  # the first command ends the directives
        directive = DIRECTIVE.match(stripped)
        for part in _parts(directive.group(1) if directive else ""):
            if (option := OPTION.match(part)) is not None and option.group(2) is not None:
                options.setdefault(option.group(1), (option.group(2), number))
    if not options:
        return None
    nodes = _number(options, "--nodes", "-N")
    gpus, line = _gpus_per_node(options, nodes)
    image = options.get("--image")
    image = (image[0].removeprefix("docker:"), image[1]) if image else None
    return SlurmJob(nodes, gpus, line, _gpu_type(options), image)


def _gpu_type(options: dict[str, tuple[str, int]]) -> tuple[str, int] | None:
    for name in GPU_TYPE_OPTIONS:
        pattern = GRES_GPU_TYPE if name == "--gres" else GPUS_TYPE
        if name in options and (typed := pattern.search(options[name][0])) is not None:
            return typed.group(1), options[name][1]
    return None


def _parts(text: str) -> list[str]:
    """`-N 1 --gres=gpu:4` as ['-N 1', '--gres=gpu:4'] (an option and its separate value kept together)."""
    words, parts = text.split(), []
    for word in words:
        if parts and not word.startswith("-") and " " not in parts[-1] and "=" not in parts[-1]:
            parts[-1] += " " + word
        else:
            parts.append(word)
    return parts


def _number(options: dict[str, tuple[str, int]], *names: str) -> int | None:
    for name in names:
        if name in options and options[name][0].isdigit():
            return int(options[name][0])
    return None


def _gpus_per_node(options: dict[str, tuple[str, int]], nodes: int | None) -> tuple[int | None, int | None]:
    """GPUs on each node: --gpus-per-node, --gres=gpu[:type]:N (per node), or --gpus / -G (the job's total) on a
    one-node job."""
    if "--gpus-per-node" in options and (count := re.search(r"(\d+)$", options["--gpus-per-node"][0])):
        return int(count.group(1)), options["--gpus-per-node"][1]
    if "--gres" in options and (gres := GRES_GPU.search(options["--gres"][0])) is not None:
        return int(gres.group(1)), options["--gres"][1]
    for name in ("--gpus", "-G"):
        if name in options and nodes in (None, 1) and (count := re.search(r"(?:^|:)(\d+)$", options[name][0])):
            return int(count.group(1)), options[name][1]
    return None, None
