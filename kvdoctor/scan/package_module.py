"""`python -m vllm serve ...`: the words a workload's launcher runs before vLLM's arguments, read from the manifest's
own lines. vLLM is a package without a __main__ module (no vllm/__main__.py in vllm-project/vllm's history, nor in the
0.32.0 wheel), so Python refuses it ("No module named vllm.__main__; 'vllm' is a package and cannot be directly
executed") and vLLM never starts; `vllm serve` (the console script) or `python -m vllm.entrypoints.cli.main serve`
run the same command."""

from __future__ import annotations

import re
from pathlib import Path

from kvdoctor.scan.workload import Workload

# python3.11 -u -m, "$PYTHON" -m / ${PY} -m (the interpreter in a variable), uv run -m
_PACKAGE_AS_MODULE = re.compile(r"(?:(?:^|[\s/])python[\d.]*|\$\{?(?i:py\w*|\w*python\w*)\}?|\buv\s+run)"
                                r"\s+(?:-[A-Za-z]\S*\s+)*?-m\s+vllm\s+serve(?:\s|$)")
_LIST_DASH = re.compile(r"^\s*-\s+", re.M)  # a YAML list item's dash (`- -m` keeps the option's own dash)
_QUOTING = re.compile(r"[\"'`,\[\]\\]")
MAX_LINES = 8  # a launcher's words before vLLM's arguments, over a few continued lines at most


def runs_vllm_package(workload: Workload) -> bool:
    """Whether the launcher's lines (from the command's first line to the first of vLLM's arguments) run
    `python -m vllm serve`."""
    if workload.command_line is None or workload.line_files:
        return False  # a command whose words come from several files is not read back here
    try:
        lines = Path(workload.file).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    first = workload.command_line
    last = next((t.line for t in workload.argv if t.line is not None and t.line >= first), first)
    span = "\n".join(lines[first - 1 : min(last, first + MAX_LINES)])
    words = " ".join(_QUOTING.sub(" ", _LIST_DASH.sub(" ", span)).split())
    return _PACKAGE_AS_MODULE.search(words) is not None
