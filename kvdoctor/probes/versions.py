"""Versions of the serving stack from installed distribution metadata; nothing is imported."""

from __future__ import annotations

import platform
import zipfile
from importlib import metadata
from pathlib import Path

from kvdoctor.facts import VersionFacts

_DISTRIBUTIONS = {
    "vllm": ("vllm",),
    "triton": ("triton",),
    "torch": ("torch",),
    "flashinfer": ("flashinfer-python", "flashinfer"),
}


def installed_version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def probe_versions() -> VersionFacts:
    found = {fact: installed_version(*names) for fact, names in _DISTRIBUTIONS.items()}
    return VersionFacts(
        vllm=found["vllm"],
        vllm_source="installed" if found["vllm"] else None,
        triton=found["triton"],
        torch=found["torch"],
        flashinfer=found["flashinfer"],
        python=platform.python_version(),
    )


def wheel_version(path: Path, project: str = "vllm") -> str | None:
    """The version a wheel's file name gives (the wheel spec puts it there), or None when it is no such wheel."""
    from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename

    try:
        name, version, _, _ = parse_wheel_filename(Path(path).name)
    except InvalidWheelFilename:
        return None
    return str(version) if name == canonicalize_name(project) else None


def version_of_source(path: Path) -> str | None:
    """The vLLM version of a wheel file or an unpacked tree, from its dist-info or file name."""
    from kvdoctor.errors import UsageError

    if path.is_file() and path.suffix == ".whl":
        named = wheel_version(path)
        if named:
            return named  # no need to open 300 MB
        try:
            with zipfile.ZipFile(path) as wheel:
                for name in wheel.namelist():
                    if name.endswith(".dist-info/METADATA") and name.startswith("vllm-"):
                        return _metadata_version(wheel.read(name).decode("utf-8", "replace"))
        except zipfile.BadZipFile:
            raise UsageError(f"--vllm-source {path}: not a readable wheel file") from None
        return None
    if path.is_dir():
        if not (path / "vllm").is_dir():
            raise UsageError(f"--vllm-source {path}: no vllm/ package inside", "pass a vLLM wheel or an unpacked tree")
        for metadata_file in sorted(path.glob("vllm-*.dist-info/METADATA")):
            return _metadata_version(metadata_file.read_text("utf-8", "replace"))
        return None
    raise UsageError(f"--vllm-source {path}: not found", "pass a vLLM .whl file or an unpacked vLLM tree")


def _metadata_version(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("Version:"):
            return line.split(":", 1)[1].strip()
    return None
