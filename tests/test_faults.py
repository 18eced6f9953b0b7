"""Faults survived: each one gives a report (the dry run skipped or failed, with the reason), never a crash.

Faults are injected into the real CLI subprocess: a sitecustomize.py shim on PYTHONPATH replaces NVML,
Triton or kvdoctor's installed-version probe before kvdoctor runs; KVDOCTOR_DRYRUN_FAULT makes the compile child hang,
segfault or abort; environment and file-system changes do the rest.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import EXAMPLE_MODEL, REPO, assert_valid_report

FOUNDING = ["check", "--model", str(EXAMPLE_MODEL), "--kv-cache-dtype", "turboquant_k8v4", "--vllm-version", "0.25.1",
            "--format", "json"]
ON_A100 = [*FOUNDING, "--gpu", "A100"]


def shim(tmp_path: Path, code: str) -> dict[str, str]:
    """Environment whose Python runs `code` (a sitecustomize.py) at start-up, in kvdoctor and its children."""
    directory = tmp_path / "shim"
    directory.mkdir()
    (directory / "sitecustomize.py").write_text(textwrap.dedent(code))
    return {"PYTHONPATH": f"{directory}:{REPO}"}


def report(result, schema) -> dict:
    assert result.code in (0, 1), (result.code, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr
    document = result.json()
    assert_valid_report(document, schema)
    return document


NEEDS_TORCH = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="needs torch, whose probe says 'CUDA not available' (pip install torch==2.13.0)",
)

# The machine is taken to have the NVIDIA driver's library, so pynvml is asked (kvdoctor skips it when dlopen fails).
HAS_DRIVER = "import kvdoctor.facts.probes.gpu as gpu_probe\ngpu_probe._nvml_library_loads = lambda: True\n"
NVML_PATCH = HAS_DRIVER + """
import pynvml
def _raise(code):
    def fail(*args, **kwargs):
        raise pynvml.NVMLError(code)
    return fail
"""


@pytest.mark.parametrize("patch, note", [
    (NVML_PATCH + "pynvml.nvmlInit = _raise(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)\n", "NVML: library not found"),
    (HAS_DRIVER + "import sys\nsys.modules['pynvml'] = None\n", "nvidia-ml-py is not installed"),
    (NVML_PATCH + "pynvml.nvmlInit = _raise(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)\n", "NVML/RM version mismatch"),
    (NVML_PATCH + "pynvml.nvmlInit = lambda: None\npynvml.nvmlShutdown = lambda: None\n"
     "pynvml.nvmlDeviceGetCount = lambda: 1\n"
     "pynvml.nvmlDeviceGetHandleByIndex = _raise(pynvml.NVML_ERROR_GPU_IS_LOST)\n", "NVML: GPU is lost"),
    pytest.param(NVML_PATCH + "pynvml.nvmlInit = _raise(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)\n", "CUDA not available",
                 marks=NEEDS_TORCH),  # the note is torch's: NVML failed, so kvdoctor asks torch.cuda
], ids=["nvml-library-missing", "pynvml-not-installed", "driver-library-mismatch", "gpu-lost", "torch-without-cuda"])
def test_nvml_faults_give_a_report_that_says_why_no_gpu(run_cli, tmp_path, report_schema, patch, note):
    document = report(run_cli(*FOUNDING, env=shim(tmp_path, patch)), report_schema)
    assert document["facts"]["gpu.source"] == "none"
    assert any(note in line for line in document["notes"]), document["notes"]
    assert "dry run skipped: the target GPU is unknown (pass --gpu)" in document["notes"]
    assert any(f["status"] == "undecided" for f in document["findings"])


def test_torch_without_cuda_is_named_with_its_version(run_cli, tmp_path, report_schema):
    pytest.importorskip("torch", reason="needs torch (CPU build: pip install torch==2.13.0)")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine's torch has CUDA")
    patch = NVML_PATCH + "pynvml.nvmlInit = _raise(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)\n"
    document = report(run_cli(*FOUNDING, env=shim(tmp_path, patch)), report_schema)
    assert f"torch {torch.__version__}: CUDA not available" in " ".join(document["notes"])


TRITON_MISSING = """
import sys
sys.modules["triton"] = None  # import triton fails; importlib.util.find_spec("triton") is None
import kvdoctor.facts.probes.versions as _versions  # and no distribution metadata says it is installed
_installed = _versions.installed_version
def _installed_version(*names, module=None):
    if "triton" in names:
        return None
    return _installed(*names, module=module)
_versions.installed_version = _installed_version
"""


def test_triton_missing_skips_the_dry_run_with_the_reason(run_cli, tmp_path, report_schema):
    document = report(run_cli(*ON_A100, env=shim(tmp_path, TRITON_MISSING)), report_schema)
    assert document["dry_run"] is None
    assert "dry run skipped: triton is not installed (pip install triton)" in document["notes"]
    assert document["facts"]["triton.version"] == "3.6.0"  # no local Triton: vLLM 0.25.1's pin speaks for it
    assert any(f["rule_id"] == "KVD101" and f["status"] == "fired" for f in document["findings"])


def test_triton_too_old_is_a_finding(run_cli, tmp_path, report_schema):
    too_old = TRITON_MISSING.replace('sys.modules["triton"] = None', "").replace(
        "        return None", '        return "3.2.0"')
    result = run_cli(*FOUNDING, "--gpu", "sm_120", "--kv-cache-dtype", "fp8", env=shim(tmp_path, too_old))
    document = report(result, report_schema)
    assert document["facts"]["triton.version"] == "3.2.0"
    fired = [f for f in document["findings"] if f["status"] == "fired"]
    assert any("Triton 3.2.0" in f["title"] and "SM" in f["title"] for f in fired), [f["title"] for f in fired]


def test_triton_that_fails_to_import_in_the_child_is_a_crashed_dry_run(run_cli, tmp_path, report_schema):
    broken = 'import sys, os\nif os.environ.get("TRITON_CACHE_DIR"):\n    sys.modules["triton"] = None\n'
    document = report(run_cli(*ON_A100, "--no-cache", env=shim(tmp_path, broken)), report_schema)
    assert document["dry_run"]["status"] == "failed" and document["dry_run"]["failure_kind"] == "crashed"
    assert "exited with status 1" in document["dry_run"]["kernels"][0]["failure"]["message"]


@pytest.mark.parametrize("fault, status, words", [
    ("hang", "timeout", "did not finish within 2.0 s"),
    ("segfault", "crashed", "killed by SIGSEGV"),
    ("abort", "crashed", "killed by SIGABRT"),
])
def test_compile_child_faults_are_reported(run_cli, report_schema, fault, status, words):
    result = run_cli(*ON_A100, "--no-cache", "--compile-timeout", "2", env={"KVDOCTOR_DRYRUN_FAULT": fault})
    document = report(result, report_schema)
    dry_run = document["dry_run"]
    assert dry_run["status"] == "failed" and dry_run["failure_kind"] == status
    assert words in dry_run["kernels"][0]["failure"]["message"]
    # the static verdict still stands: KVD101 fires from the rules alone
    assert any(f["rule_id"] == "KVD101" and f["status"] == "fired" for f in document["findings"])


def test_compile_child_killed_for_memory_is_reported(tmp_path, monkeypatch):
    """The OOM killer sends SIGKILL; a stand-in interpreter that SIGKILLs itself plays the child."""
    from kvdoctor.dryrun import DryRunRequest, compiler_process, run_dry_run

    killer = tmp_path / "python-oom"
    killer.write_text("#!/bin/sh\nkill -KILL $$\n")
    killer.chmod(0o755)
    monkeypatch.setattr(compiler_process, "sys", type("S", (), {"executable": str(killer)}))
    request = DryRunRequest("turboquant_k8v4", "bfloat16", 128, 2, (8, 0), use_probe=True)
    result = run_dry_run(request, use_cache=False, timeout_s=10)
    assert result.status == "failed" and result.failure_kind == "crashed"
    assert "killed by SIGKILL" in result.kernels[0].failure.message


def test_cache_dir_that_cannot_be_created(run_cli, tmp_path, report_schema):
    # root ignores chmod, so make the directory impossible instead: its parent is a regular file
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    document = report(run_cli(*ON_A100, env={"KVDOCTOR_CACHE_DIR": str(blocker / "cache")}), report_schema)
    dry_run = document["dry_run"]
    assert dry_run["status"] == "failed" and dry_run["failure_kind"] == "bf16_to_fp8e4b15_assert"
    assert "is not writable" in dry_run["kernels"][0]["note"] and "ran without cache" in dry_run["kernels"][0]["note"]
    assert blocker.read_text() == "x"


def test_full_cache_disk_loses_only_the_cache(tmp_path, monkeypatch):
    import errno
    import os

    from kvdoctor.dryrun import DryRunRequest, cache, run_dry_run

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(cache.tempfile, "mkstemp", full)
    request = DryRunRequest("turboquant_k8v4", "bfloat16", 128, 2, (8, 0), use_probe=True)
    result = run_dry_run(request, cache_dir=tmp_path / "cache", timeout_s=60)
    assert result.status == "failed" and result.failure_kind == "bf16_to_fp8e4b15_assert"
    assert not list((tmp_path / "cache").glob("results/*/*.json"))


def test_no_home(run_cli, cli_env, tmp_path, report_schema):
    for name in ("HOME", "KVDOCTOR_CACHE_DIR", "XDG_CACHE_HOME"):
        cli_env.pop(name, None)
    cli_env["KVDOCTOR_TEST_CWD"] = str(tmp_path)
    document = report(run_cli(*ON_A100), report_schema)
    assert document["dry_run"]["status"] == "failed"
    assert "no cache directory (HOME unset); ran without cache" in document["dry_run"]["kernels"][0]["note"]


def test_two_runs_sharing_one_cache(cli_env, tmp_path, report_schema):
    env = {**cli_env, "KVDOCTOR_CACHE_DIR": str(tmp_path / "shared-cache")}
    argv = [sys.executable, "-m", "kvdoctor", *ON_A100, "--kv-cache-dtype", "turboquant_k8v4"]
    runs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
            for _ in range(2)]
    outputs = [run.communicate(timeout=300) for run in runs]
    documents = []
    for run, (out, err) in zip(runs, outputs):
        assert run.returncode == 1 and "Traceback" not in err, err
        documents.append(json.loads(out))
        assert_valid_report(documents[-1], report_schema)
    assert documents[0]["dry_run"]["status"] == documents[1]["dry_run"]["status"] == "failed"
    entries = list((tmp_path / "shared-cache" / "results").glob("*/*.json"))
    assert entries and all(json.loads(e.read_text())["format"] == "kvdoctor-dryrun-1" for e in entries)
    assert not list((tmp_path / "shared-cache" / "results").glob("*/.tmp-*"))
    third = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO)
    assert all(k["cached"] for k in json.loads(third.stdout)["dry_run"]["kernels"])


@pytest.mark.parametrize("garbage", [
    "", "{not json", "[]", '{"format": "kvdoctor-dryrun-1", "key": "wrong", "result": {}}',
    "SAME-KEY-MISSING-FIELDS", "\x00\xff binary",
], ids=["empty", "torn", "list", "wrong-key", "missing-fields", "binary"])
def test_corrupt_cache_entry_is_recompiled(run_cli, cli_env, report_schema, garbage):
    first = report(run_cli(*ON_A100), report_schema)
    entries = list(Path(cli_env["KVDOCTOR_CACHE_DIR"]).glob("results/*/*.json"))
    assert entries
    for entry in entries:
        key = entry.stem
        text = garbage
        if garbage == "SAME-KEY-MISSING-FIELDS":
            text = json.dumps({"format": "kvdoctor-dryrun-1", "key": key, "result": {"status": "passed"}})
        entry.write_bytes(text.encode("utf-8", "surrogateescape"))
    second = report(run_cli(*ON_A100), report_schema)
    assert second["dry_run"]["status"] == first["dry_run"]["status"] == "failed"
    assert not any(k["cached"] for k in second["dry_run"]["kernels"])
    assert all(json.loads(e.read_text())["key"] == e.stem for e in entries)  # rewritten whole
