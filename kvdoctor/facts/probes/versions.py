"""Versions of the serving stack from installed distribution metadata; nothing is imported."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from functools import lru_cache
from pathlib import Path

from kvdoctor.model.facts import VersionFacts

# fact -> (distribution names, the module it installs)
_DISTRIBUTIONS = {
    "vllm": (("vllm",), "vllm"),
    "triton": (("triton",), "triton"),
    "torch": (("torch",), "torch"),
    "flashinfer": (("flashinfer-python", "flashinfer"), "flashinfer"),
}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


@lru_cache(maxsize=1)
def _dist_infos() -> dict[str, Path]:
    """Normalised project name -> its *.dist-info folder, the first on sys.path winning (as importlib.metadata)."""
    found: dict[str, Path] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info"):
                found.setdefault(_normal(name[: -len(".dist-info")].split("-")[0]), Path(entry or ".", name))
    return found


def _dist_info_version(name: str) -> str | None:
    folder = _dist_infos().get(_normal(name))
    if folder is None:
        return None
    try:
        with open(folder / "METADATA", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
                if not line.strip():
                    break  # the headers end at the first blank line
    except OSError:
        return None
    return None


def installed_version(*names: str, module: str | None = None) -> str | None:
    """The installed version of the first of `names` found. A quick scan of sys.path's *.dist-info folders
    answers almost always; importlib.metadata (a ~20 ms import) only when the module is importable and the scan
    found no dist-info for it (an egg, a zip)."""
    for name in names:
        found = _dist_info_version(name)
        if found:
            return found
    if module is not None and importlib.util.find_spec(module) is None:
        return None
    from importlib import metadata

    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def probe_versions() -> VersionFacts:
    found = {fact: installed_version(*names, module=module) for fact, (names, module) in _DISTRIBUTIONS.items()}
    return VersionFacts(
        vllm=found["vllm"],
        vllm_source="installed" if found["vllm"] else None,
        triton=found["triton"],
        torch=found["torch"],
        flashinfer=found["flashinfer"],
        python="%d.%d.%d" % sys.version_info[:3],
    )


def version_of_source(path: Path) -> str | None:
    """The vLLM version of a wheel file or an unpacked tree, from its dist-info or file name."""
    import zipfile

    from kvdoctor.base.errors import UsageError
    from kvdoctor.base.versions import wheel_version

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
