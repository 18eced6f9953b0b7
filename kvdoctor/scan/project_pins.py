"""The vLLM release a project pins beside a command that runs vLLM from the host's Python (no image names it):
`vllm==X` in its requirements*.txt, pyproject.toml (PEP 621 dependencies, Poetry's exact `vllm = "X"`) or Replicate
Cog's cog.yaml (build.python_packages), or the version its uv.lock / poetry.lock resolved, in the command's folder or
a folder above it inside the same checkout; else, for a script that activates a virtual environment (`source
.venv/bin/activate`), the one `pip install vllm==X` of the project's shell script that creates that environment."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from kvdoctor.scan.workload import Workload

MAX_UP = 3
PIN_FILES = ("uv.lock", "poetry.lock", "pyproject.toml", "requirements.txt", "cog.yaml")
REQUIREMENTS = re.compile(r"^requirements[\w.-]*\.txt$")
EXACT = re.compile(r"""^[ \t]*(?:-[ \t]+)?["']?vllm(?:\[[^\]]*\])?[ \t]*==[ \t]*v?(\d+\.\d+\.\d+(?:\.post\d+)?)["',; \t]*(?:#.*)?$""",
                   re.MULTILINE | re.IGNORECASE)  # fmt: skip
POETRY = re.compile(r"""^[ \t]*vllm[ \t]*=[ \t]*["']=?=?(\d+\.\d+\.\d+(?:\.post\d+)?)["'][ \t]*(?:#.*)?$""", re.MULTILINE)
ACTIVATED = re.compile(r"""(?:^|[;&|]\s*|\s)(?:source|\.)\s+["']?(?:[^\s"';]*/)?([\w.-]+)/bin/activate\b""",
                       re.MULTILINE)
CREATES = r"""(?:-m\s+venv|\bvirtualenv|\buv\s+venv)\b[^\n]*?(?:^|[\s/"'$}]){name}(?=["'\s;]|$)"""
PIP_PIN = re.compile(
    r"""\bpip3?\s+install\b[^\n]*?(?<![\w.-])["']?vllm(?:\[[^\]]*\])?==v?(\d+\.\d+\.\d+(?:\.post\d+)?)""")
LOCKED = re.compile(r"""^name = "vllm"\nversion = "(\d+\.\d+\.\d+(?:\.post\d+)?)"$""", re.MULTILINE)


def with_project_pin(workload: Workload) -> Workload:
    """The workload with the release its project pins, when no image or pin names one yet."""
    if workload.image or workload.vllm_pin or not Path(workload.file).is_file():
        return workload
    found = project_pin(Path(workload.file))
    why = "the project's pin beside the command (run by the host's Python, no image names a release)"
    if found is None:
        found = venv_pin(Path(workload.file))
        why = "the project's script that creates the virtual environment the command activates"
    if found is None:
        return workload
    version, pin_file, line = found
    pinned, pin_line = workload.line_in(str(pin_file), line)
    return replace(pinned, vllm_pin=version, vllm_pin_line=pin_line,
                   notes=pinned.notes + (f"vLLM {version} from {pin_file}:{line}, {why}",))


def project_pin(path: Path) -> tuple[str, Path, int] | None:
    """(release, pin file, line) of the nearest folder up from the file (inside its checkout) that pins vLLM."""
    for folder in checkout_folders(path)[0]:
        names = sorted(p.name for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
        for name in [n for n in PIN_FILES if n in names] + [n for n in names if REQUIREMENTS.match(n) and n not in PIN_FILES]:
            found = _pinned(folder / name)
            if found is not None:
                return found[0], folder / name, found[1]
    return None


def venv_pin(path: Path) -> tuple[str, Path, int] | None:
    """(release, script, line) for a script that activates a virtual environment (`source $DIR/.venv/bin/activate`)
    which the shell scripts of its folders (the file's and those above it in the checkout) that create it (`python -m
    venv .venv`, `uv venv .venv`, `virtualenv .venv`) fill with one vLLM release (`pip install vllm==X`)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[:1_000_000]
    except OSError:
        return None
    names = {match.group(1) for match in ACTIVATED.finditer(text)} if "activate" in text else set()
    if len(names) != 1:
        return None
    creates = re.compile(CREATES.replace("{name}", re.escape(names.pop())), re.MULTILINE)
    found: list[tuple[str, Path, int]] = []
    for folder in checkout_folders(path)[0]:
        for script in sorted(folder.glob("*.sh")) if folder.is_dir() else ():
            try:
                body = script.read_text(encoding="utf-8", errors="replace")[:1_000_000]
            except OSError:
                continue
            pins = list(PIP_PIN.finditer(body)) if creates.search(body) else []
            found += [(pin.group(1), script, body.count("\n", 0, pin.start(1)) + 1) for pin in pins]
    return found[0] if len({version for version, _, _ in found}) == 1 else None


def checkout_folders(path: Path) -> tuple[list[Path], Path | None]:
    """The file's folder and those above it, MAX_UP at most, stopping at its checkout's root (a folder with .git);
    and that root, or None when none is in reach."""
    folders = [path.resolve().parent]
    while not (folders[-1] / ".git").exists():
        if folders[-1].parent == folders[-1] or len(folders) > MAX_UP:
            return folders, None
        folders.append(folders[-1].parent)
    return folders, folders[-1]


def _pinned(file: Path) -> tuple[str, int] | None:
    try:
        text = file.read_text(encoding="utf-8", errors="replace")[:1_000_000]
    except OSError:
        return None
    pattern = LOCKED if file.name.endswith(".lock") else POETRY if "[tool.poetry" in text and not EXACT.search(text) \
        else EXACT  # fmt: skip
    match = pattern.search(text)
    return (match.group(1), text.count("\n", 0, match.start(1)) + 1) if match else None
