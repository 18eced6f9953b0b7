"""Installed versions from dist-info folders, as importlib.metadata would find them (without importing it)."""

import sys
from importlib.util import find_spec

import pytest

from kvdoctor.facts.probes import versions

# kvdoctor needs neither (torch is the optional GPU cross-check, triton the [compile] extra); .ci/run installs both
NEEDS_TORCH_AND_TRITON = pytest.mark.skipif(
    find_spec("torch") is None or find_spec("triton") is None,
    reason="needs torch and triton installed to compare their versions (pip install torch==2.13.0 'kvdoctor[compile]')",
)


def _site(tmp_path, folder: str, version: str):
    meta = tmp_path / folder / "METADATA"
    meta.parent.mkdir(parents=True)
    meta.write_text(f"Metadata-Version: 2.1\nName: x\nVersion: {version}\n\nDescription with Version: 9\n")


@NEEDS_TORCH_AND_TRITON
def test_the_quick_scan_matches_importlib_metadata_for_what_is_installed_here():
    from importlib import metadata

    for name in ("triton", "torch", "packaging", "PyYAML", "typer"):
        assert versions.installed_version(name) == metadata.version(name), name


def test_names_are_normalised_and_the_first_on_sys_path_wins(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    _site(first, "flashinfer_python-0.6.6.dist-info", "0.6.6")
    _site(second, "flashinfer_python-0.5.0.dist-info", "0.5.0")
    monkeypatch.setattr(sys, "path", [str(first), str(second), str(tmp_path / "missing")])
    versions._dist_infos.cache_clear()
    try:
        assert versions.installed_version("flashinfer-python", "flashinfer", module="flashinfer") == "0.6.6"
        assert versions.installed_version("vllm", module="vllm") is None  # not importable, no dist-info
    finally:
        versions._dist_infos.cache_clear()
