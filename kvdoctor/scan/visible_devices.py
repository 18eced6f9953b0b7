"""CUDA_VISIBLE_DEVICES as a workload sets it, read as the GPUs CUDA shows vLLM. CUDA reads the comma-separated list up
to the first entry that is neither a device index nor a GPU-/MIG- UUID: the devices before it are visible, none after
("If one of the indices is invalid, only the devices whose index precedes the invalid index are visible": CUDA C++
Programming Guide, CUDA environment variables). `all` is the NVIDIA container runtime's word
(NVIDIA_VISIBLE_DEVICES), not CUDA's: under CUDA_VISIBLE_DEVICES it hides every GPU."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvdoctor.scan.command import ASSIGNMENT, UNRESOLVED
from kvdoctor.scan.workload import Workload

NAME = "CUDA_VISIBLE_DEVICES"
_DEVICE = re.compile(r"^(?:\d+|GPU-[0-9A-Fa-f-]+|MIG-[\w/-]+)$")


@dataclass(frozen=True)
class VisibleDevices:
    value: str
    line: int | None
    count: int
    """The GPUs CUDA shows: the entries before the first one it cannot read."""

    @property
    def resource(self) -> str:
        """'CUDA_VISIBLE_DEVICES=0,1', with why CUDA reads fewer entries than written."""
        entries = [e.strip() for e in self.value.split(",")]
        shown = f"{NAME}={self.value}"
        if self.count < len(entries):
            shown += f" (CUDA stops at '{entries[self.count]}', which is neither a device index nor a GPU UUID)"
        return shown


def visible_devices(workload: Workload) -> VisibleDevices | None:
    """CUDA_VISIBLE_DEVICES as the workload sets it with a literal value (a VAR=value word before vLLM's command wins
    over the container's environment), or None when it is not set, empty or its value is unknown here."""
    for token in workload.argv:
        if not ASSIGNMENT.match(token.text):
            break
        name, _, value = token.text.partition("=")
        if name == NAME:
            return _read(value, token.line)
    for var in workload.env:
        if var.name == NAME and var.value is not None:
            return _read(var.value, var.line)
    return None


def _read(value: str, line: int | None) -> VisibleDevices | None:
    value = value.strip().strip("'\"")
    if not value or UNRESOLVED.search(value):
        return None  # an empty value is most often a substitution from an environment not seen here (Compose's)
    count = 0
    for entry in value.split(","):
        if not _DEVICE.match(entry.strip()):
            break
        count += 1
    return VisibleDevices(value, line, count)
