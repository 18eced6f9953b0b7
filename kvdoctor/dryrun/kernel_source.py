"""Find vLLM's TurboQuant kernel files and their version without importing vllm.

Three places: the installed `vllm` distribution (through importlib.metadata), a vllm wheel (the few
members needed are extracted once into a private directory, since @triton.jit needs a real file), or an
unpacked tree that contains vllm/.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from kvdoctor.dryrun.plans import DECODE_FILE, STORE_FILE
from kvdoctor.dryrun.plans_attention import ATTENTION_FILES
from kvdoctor.dryrun.plans_mla import MLA_FILES
from kvdoctor.base.errors import KvdoctorError
from kvdoctor.facts.probes.vllm_sources import FETCH_MARKER

KERNEL_FILES = (STORE_FILE, DECODE_FILE, *ATTENTION_FILES, *MLA_FILES)
"""Every vLLM file a dry-run plan compiles from (or reads, like the backend's guard)."""
_MARKER = "kvdoctor-source.json"


class DryRunSourceError(KvdoctorError):
    """A --vllm-source that is not a vllm wheel or tree."""


@dataclass(frozen=True)
class KernelSource:
    """Where the kernel files were found."""

    label: str
    """Human words for the origin, e.g. "vLLM 0.25.1 kernels from /path/x.whl"."""
    version: str | None
    """vLLM version of these files, when it can be told."""
    files: dict[str, Path]
    """Path inside vllm -> file on disk, for the kernel files that exist in this source."""


def _metadata_version(text: str) -> str | None:
    match = re.search(r"^Version:\s*(\S+)", text, re.MULTILINE)
    return match.group(1) if match else None


def _label(version: str | None, where: str) -> str:
    return f"vLLM {version or '(unknown version)'} kernels from {where}"


def installed_source() -> KernelSource | None:
    """The installed vllm distribution's kernel files, or None when vllm is not installed."""
    try:
        dist = importlib.metadata.distribution("vllm")
    except importlib.metadata.PackageNotFoundError:
        return None
    files = {rel: Path(str(dist.locate_file(rel))) for rel in KERNEL_FILES}
    files = {rel: path for rel, path in files.items() if path.is_file()}
    where = f"installed vllm ({dist.locate_file('')})"
    return KernelSource(_label(dist.version, where), dist.version, files)


def _wheel_version(names: list[str], zf: zipfile.ZipFile, wheel: Path) -> str | None:
    for name in names:
        if re.fullmatch(r"vllm-[^/]+\.dist-info/METADATA", name):
            return _metadata_version(zf.read(name).decode("utf-8", "replace"))
    from kvdoctor.base.versions import wheel_version

    return wheel_version(wheel)


def _extract_wheel(wheel: Path, target: Path) -> None:
    """Extract the kernel files and version of wheel into target, atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".extract-"))
    try:
        try:
            with zipfile.ZipFile(wheel) as zf:
                names = zf.namelist()
                for rel in KERNEL_FILES:
                    if rel in names:
                        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
                        (staging / rel).write_bytes(zf.read(rel))
                version = _wheel_version(names, zf, wheel)
        except (zipfile.BadZipFile, OSError) as exc:
            raise DryRunSourceError(f"cannot read vLLM wheel {wheel}: {exc}", "pass a vllm .whl file") from exc
        (staging / _MARKER).write_text(json.dumps({"version": version, "wheel": str(wheel)}))
        try:
            os.replace(staging, target)
        except OSError:
            if not (target / _MARKER).is_file():  # not a concurrent run's finished copy
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def wheel_source(wheel: Path, scratch: Path) -> KernelSource:
    """Kernel files of a vllm wheel, extracted under scratch (keyed by path, size and mtime)."""
    stat = wheel.stat()
    material = f"{wheel.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{'|'.join(KERNEL_FILES)}"
    ident = hashlib.sha256(material.encode()).hexdigest()[:24]
    target = scratch / "wheel-kernels" / ident  # not "wheels": that is where users keep whole wheels
    if not (target / _MARKER).is_file():
        _extract_wheel(wheel, target)
    version = json.loads((target / _MARKER).read_text()).get("version")
    files = {rel: target / rel for rel in KERNEL_FILES if (target / rel).is_file()}
    return KernelSource(_label(version, str(wheel)), version, files)


def _tree_version(root: Path) -> str | None:
    for meta in sorted(root.glob("vllm-*.dist-info/METADATA")):
        version = _metadata_version(meta.read_text(encoding="utf-8", errors="replace"))
        if version:
            return version
    for name in ("_version.py", "version.py"):
        path = root / "vllm" / name
        if path.is_file():
            match = re.search(r"""(?:__version__|version)\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", path.read_text())
            if match:
                return match.group(1)
    return None


def tree_source(root: Path) -> KernelSource:
    """Kernel files of an unpacked tree (a directory containing vllm/), or of a release kvdoctor fetched."""
    if not (root / "vllm").is_dir():
        raise DryRunSourceError(f"{root} has no vllm/ directory", "pass a vllm .whl or a tree containing vllm/")
    version = _tree_version(root)
    files = {rel: root / rel for rel in KERNEL_FILES if (root / rel).is_file()}
    where = str(root)
    try:
        fetched = json.loads((root / FETCH_MARKER).read_text(encoding="utf-8"))
        where = f"{fetched['wheel']} (fetched from the package index, verified against its RECORD; cached in {root})"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return KernelSource(_label(version, where), version, files)


def resolve_source(vllm_source: str | None, scratch: Path) -> KernelSource | None:
    """The kernel source a request names; None when it names none and vllm is not installed."""
    if vllm_source is None:
        return installed_source()
    path = Path(vllm_source).expanduser()
    if path.is_dir():
        return tree_source(path)
    if path.is_file() and path.suffix == ".whl":
        return wheel_source(path, scratch)
    raise DryRunSourceError(f"vLLM source {vllm_source} is neither a .whl file nor a directory",
                            "pass a vllm .whl file or a tree containing vllm/")  # fmt: skip
