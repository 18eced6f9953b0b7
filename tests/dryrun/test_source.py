"""Kernel files come from the installed vllm, a wheel or a tree; an unknown layout is skipped, not crashed."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest
from dryrun_support import dryrun_cache, founding_request, vllm_wheels  # noqa: F401  (fixtures)

from kvdoctor.dryrun import DryRunSourceError, run_dry_run
from kvdoctor.dryrun.kernel_source import KERNEL_FILES, installed_source, resolve_source
from kvdoctor.dryrun.plans import STORE_FILE

pytestmark = pytest.mark.vllm_wheel


def _unpack(wheel: Path, root: Path, version: str, with_metadata: bool = True) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        for rel in KERNEL_FILES:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(zf.read(rel))
    if with_metadata:
        info = root / f"vllm-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
        (info / "RECORD").write_text("".join(f"{rel},,\n" for rel in KERNEL_FILES))
    return root


def test_wheel_version_and_extraction_is_reused(vllm_wheels, tmp_path):
    first = resolve_source(str(vllm_wheels["0.26.0"]), tmp_path)
    again = resolve_source(str(vllm_wheels["0.26.0"]), tmp_path)
    assert first.version == "0.26.0" and first.files == again.files
    assert set(first.files) == set(KERNEL_FILES) and all(p.is_file() for p in first.files.values())


def test_installed_vllm_is_found_through_its_metadata(vllm_wheels, tmp_path, monkeypatch, dryrun_cache):
    site = _unpack(vllm_wheels["0.25.1"], tmp_path / "site", "0.25.1")
    monkeypatch.syspath_prepend(str(site))
    source = installed_source()
    assert source.version == "0.25.1" and source.files[STORE_FILE] == site / STORE_FILE
    assert "vllm" not in sys.modules  # found without importing vllm

    report = run_dry_run(founding_request(vllm_wheels["0.25.1"], vllm_source=None), cache_dir=dryrun_cache)
    assert report.vllm_version == "0.25.1" and "installed vllm" in report.source_label
    assert report.failure_kind == "bf16_to_fp8e4b15_assert"


def test_unpacked_tree(vllm_wheels, tmp_path, dryrun_cache):
    tree = _unpack(vllm_wheels["0.26.0"], tmp_path / "tree", "0.26.0")
    report = run_dry_run(founding_request(vllm_wheels["0.26.0"], vllm_source=str(tree)), cache_dir=dryrun_cache)
    assert report.status == "passed" and report.vllm_version == "0.26.0"


def test_changed_kernel_layout_is_skipped_with_a_note(vllm_wheels, tmp_path, dryrun_cache):
    tree = _unpack(vllm_wheels["0.25.1"], tmp_path / "tree", "0.99.0")
    store = tree / STORE_FILE
    store.write_text(store.read_text().replace("Key_ptr", "Key_in_ptr"))
    report = run_dry_run(founding_request(vllm_wheels["0.25.1"], vllm_source=str(tree)), cache_dir=dryrun_cache)

    first = report.kernels[0]
    assert first.status == "skipped" and first.note == "this vLLM's kernel changed; dry run skipped for it"
    assert first.failure.kind == "layout_changed" and "Key_in_ptr" in first.failure.message
    assert [k.status for k in report.kernels[1:]] == ["passed", "passed"]
    assert report.status == "skipped" and report.failure_kind == "layout_changed"


def test_vllm_without_turboquant_is_skipped(tmp_path, dryrun_cache, vllm_wheels):
    wheel = tmp_path / "vllm-0.19.0-cp38-abi3-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("vllm/__init__.py", "")
    report = run_dry_run(founding_request(wheel), cache_dir=dryrun_cache)
    assert report.status == "skipped" and report.vllm_version == "0.19.0"
    assert all(k.status == "skipped" for k in report.kernels)


def test_bad_source_is_a_user_error(tmp_path):
    with pytest.raises(DryRunSourceError):
        resolve_source(str(tmp_path / "missing.whl"), tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DryRunSourceError):
        resolve_source(str(tmp_path / "empty"), tmp_path)
