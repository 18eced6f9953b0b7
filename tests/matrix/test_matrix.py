import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dryrun_support import wheel_dir

from kvdoctor.check.run import CheckSettings
from kvdoctor.facts.collect import CheckOptions
from kvdoctor.matrix import MatrixRequest, run_matrix

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "examples" / "qwen2.5-3b-instruct"
WHEELS = wheel_dir()


def _wheel(version: str) -> Path:
    found = sorted(WHEELS.glob(f"vllm-{version}-*.whl"))
    if not found:
        pytest.skip(f"vLLM {version} wheel not in {WHEELS} (tests/dryrun_support.py downloads it)")
    return found[0]


def _kvdoctor(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KVDOCTOR_"))}
    env.update(KVDOCTOR_CACHE_DIR=str(tmp_path / "cache"), HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "kvdoctor", *args], cwd=tmp_path, env=env, capture_output=True, text=True)


def _cache_entries(cache_dir: Path) -> dict[str, tuple[int, int]]:
    """Each compile result in the cache with its inode and mtime: a compile writes its entry anew."""
    stats = {str(p): p.stat() for p in (cache_dir / "results").rglob("*.json")}
    return {path: (stat.st_ino, stat.st_mtime_ns) for path, stat in stats.items()}


@pytest.mark.vllm_wheel
def test_real_compiles_cold_then_warm_from_cache(tmp_path):
    wheel = _wheel("0.25.1")
    request = MatrixRequest(
        model=str(MODEL), gpus=("A100", "RTX 3090", "L4"), kv_cache_dtypes=("turboquant_k8v4", "turboquant_4bit_nc"),
        # the V1 runner, where 0.25.1 also has the 'auto' bug (a dense model runs V2 by default)
        options=CheckOptions(model=str(MODEL), vllm_source=str(wheel), cache_dir=tmp_path,
                             environ={"VLLM_USE_V2_MODEL_RUNNER": "0"}),
        settings=CheckSettings(), workers=2,
    )
    seen = []
    cold = run_matrix(request, on_cell=seen.append)
    assert len(seen) == 6
    a100 = cold.cell("A100", "turboquant_k8v4")
    assert a100.verdict == "FAIL" and a100.dry_run == "failed"
    assert [r for r, _, state in a100.rules if state == "fired"][:2] == ["KVD101", "KVD102"]
    assert cold.cell("L4", "turboquant_k8v4").dry_run == "passed"  # SM89 stores e4m3: no bf16 assert
    assert cold.cell("A100", "turboquant_4bit_nc").dry_run == "passed"  # MSE preset never converts to fp8
    assert cold.vllm_version == "0.25.1"
    compiled = _cache_entries(tmp_path)
    warm = run_matrix(request)
    assert all(c.cached for c in warm.cells if c.dry_run)
    assert [c.verdict for c in warm.cells] == [c.verdict for c in cold.cells]
    assert compiled and _cache_entries(tmp_path) == compiled  # the warm run compiled nothing (no entry written)


def test_cli_json_and_csv_carry_verdicts_and_capacity(tmp_path):
    args = ["matrix", "-m", str(MODEL), "--gpus", "A100,T4,L4", "--kv-cache-dtypes", "auto,fp8,turboquant_3bit_nc",
            "--vllm-version", "0.27.0", "--no-compile", "--max-model-len", "8192"]  # fmt: skip
    done = _kvdoctor(tmp_path, *args, "-f", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["command"] == "matrix" and data["schema_version"] == "2.0" and len(data["cells"]) == 9
    cells = {(c["gpu"], c["kv_cache_dtype"]): c for c in data["cells"]}
    assert cells[("A100", "auto")]["verdict"] == "PASS"
    assert cells[("T4", "turboquant_3bit_nc")]["verdict"] == "FAIL"
    assert "KVD103" in [r["rule_id"] for r in cells[("T4", "turboquant_3bit_nc")]["rules"]]
    a100 = cells[("A100", "turboquant_3bit_nc")]["capacity"]
    assert a100["fit"] == "fits" and a100["max_model_len"] == 8192
    assert a100["max_concurrency"] == pytest.approx(a100["tokens"] / 8192, abs=0.01)
    assert a100["vllm_log"].startswith("GPU KV cache size: ")
    # TurboQuant packs the middle layers: fewer bytes per token than auto's bf16
    assert a100["kv_bytes_per_token"] < cells[("A100", "auto")]["capacity"]["kv_bytes_per_token"]
    assert cells[("L4", "auto")]["capacity"]["tokens"] < cells[("A100", "auto")]["capacity"]["tokens"]
    assert any("check's own fit model" in a for a in data["assumptions"])
    rows = list(csv.DictReader(io.StringIO(_kvdoctor(tmp_path, *args, "-f", "csv").stdout)))
    assert len(rows) == 9 and {r["verdict"] for r in rows} <= {"PASS", "WARN", "FAIL"}
    assert next(r for r in rows if r["gpu"] == "T4" and r["kv_cache_dtype"] == "fp8")["rules_fired"]


def test_terminal_table_and_output_file(tmp_path):
    done = _kvdoctor(tmp_path, "matrix", "-m", str(MODEL), "--gpus", "A100,L4", "--kv-cache-dtypes", "auto,fp8",
                     "--vllm-version", "0.27.0", "--no-compile", "-f", "html", "-o", "m.html")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "A100 80GB (SM 8.0)" in done.stdout and "PASS" in done.stdout  # the table still goes to the terminal
    assert (tmp_path / "m.html").read_text().startswith("<!DOCTYPE html>")


def test_unknown_gpu_is_one_line_exit_2(tmp_path):
    done = _kvdoctor(tmp_path, "matrix", "-m", str(MODEL), "--gpus", "A100,Z9000", "--no-compile")
    assert done.returncode == 2 and "unknown GPU 'Z9000'" in done.stderr and done.stderr.count("\n") == 1


def test_default_axes_follow_the_gpu_table_and_vllm_version():
    from kvdoctor.commands.matrix import default_gpus, default_kv_dtypes

    gpus = default_gpus()
    assert gpus[0] == "Tesla P100" and "H100 80GB" in gpus and len(gpus) == len(set(gpus))
    assert "int4_per_token_head" not in default_kv_dtypes("0.24.0")
    assert "nvfp4_4over6" in default_kv_dtypes("0.28.0") and "turboquant_k8v4" in default_kv_dtypes("0.28.0")
