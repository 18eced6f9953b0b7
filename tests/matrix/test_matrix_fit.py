"""One fit model: every matrix cell's capacity, verdict and fit rules are `kvdoctor check`'s for the same model, GPU,
KV-cache dtype and vLLM release (facts/memory.py, facts/kv_capacity.py); a cell that cannot hold one request is FAIL
with the fit rule's id; a quantized checkpoint's cells come out through check's quantization rules (KVD190-195)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
QWEN = REPO / "examples" / "qwen2.5-3b-instruct"
DEEPSEEK = REPO / "examples" / "deepseek-v2-lite-chat"
QUANTIZED = REPO / "tests" / "fixtures" / "configs" / "quantized"
SAME = ("memory.fit", "memory.kv_tokens", "memory.max_concurrency", "memory.kv_budget_gib", "memory.band_gib",
        "memory.kv_bytes_per_token", "memory.weights_bytes", "memory.fitting_max_model_len", "memory.vllm_log",
        "context.max_model_len")  # fmt: skip
CAPACITY_FIELD = {"memory.fit": "fit", "memory.kv_tokens": "tokens", "memory.max_concurrency": "max_concurrency",
                  "memory.kv_budget_gib": "kv_budget_gib", "memory.band_gib": "band_gib",
                  "memory.kv_bytes_per_token": "kv_bytes_per_token", "memory.weights_bytes": "weights_bytes",
                  "memory.fitting_max_model_len": "fitting_max_model_len", "memory.vllm_log": "vllm_log",
                  "context.max_model_len": "max_model_len"}  # fmt: skip


def _kvdoctor(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KVDOCTOR_"))}
    env.update(KVDOCTOR_CACHE_DIR=str(tmp_path / "cache"), HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "kvdoctor", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def _matrix(tmp_path: Path, model: Path, gpus: str, dtypes: str, *flags: str) -> dict:
    done = _kvdoctor(tmp_path, "matrix", "-m", str(model), "--gpus", gpus, "--kv-cache-dtypes", dtypes,
                     "--vllm-version", "0.33.0", "--no-compile", "--workers", "2", *flags, "-f", "json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["schema_version"] == "2.0"
    return data


SETUPS = {
    # 12 cells; at 0.4 of memory the 16 GiB T4 cannot hold one 32k request (KVD181), the L4 and A10 sit in the band
    "qwen2.5-3b at 0.4": (QWEN, "T4,L4,A10,H100", "auto,fp8,turboquant_4bit_nc", ("--gpu-memory-utilization", "0.4")),
    # MLA at the release's default utilization and the model's own 163840 tokens
    "deepseek-v2-lite": (DEEPSEEK, "A100,L40S,H200", "auto,fp8", ()),
}


@pytest.mark.parametrize("setup", SETUPS, ids=list(SETUPS))
def test_every_cell_equals_check_for_the_same_inputs(tmp_path, setup):
    model, gpus, dtypes, flags = SETUPS[setup]
    matrix = _matrix(tmp_path, model, gpus, dtypes, *flags)
    compared = 0
    for cell in matrix["cells"]:
        done = _kvdoctor(tmp_path, "check", "--model", str(model), "--gpu", cell["gpu"], "--kv-cache-dtype",
                         cell["kv_cache_dtype"], "--vllm-version", "0.33.0", "--no-compile", *flags, "-f", "json")  # fmt: skip
        check = json.loads(done.stdout)
        where = (cell["gpu"], cell["kv_cache_dtype"])
        assert cell["verdict"] == check["verdict"], where
        fired = [r["rule_id"] for r in cell["rules"] if r["status"] == "fired"]
        assert sorted(fired) == sorted(f["rule_id"] for f in check["findings"] if f["status"] == "fired"), where
        for fact in SAME:
            assert cell["capacity"][CAPACITY_FIELD[fact]] == check["facts"][fact], (where, fact)
        assert check["facts"]["memory.kv_tokens"] is not None, where  # a real number compared, not two Nones
        compared += 1
    assert compared == len(gpus.split(",")) * len(dtypes.split(","))


def test_a_cell_that_holds_less_than_one_request_is_fail_with_the_fit_rule(tmp_path):
    data = _matrix(tmp_path, QWEN, "T4,H100", "auto", "--gpu-memory-utilization", "0.45")
    cells = {c["gpu"]: c for c in data["cells"]}
    t4, h100 = cells["T4"], cells["H100"]
    assert t4["capacity"]["fit"] == "does_not_fit" and t4["verdict"] == "FAIL"
    assert "KVD181" in [r["rule_id"] for r in t4["rules"] if r["status"] == "fired"]
    assert t4["capacity"]["tokens"] < data["max_model_len"] == 32768
    assert h100["verdict"] == "PASS" and h100["capacity"]["max_concurrency"] >= 1
    # and no memory left at all after the weights: KVD182
    low = _matrix(tmp_path, QWEN, "T4", "auto", "--gpu-memory-utilization", "0.2")["cells"][0]
    assert low["verdict"] == "FAIL" and low["capacity"]["fit"] == "no_memory"
    assert "KVD182" in [r["rule_id"] for r in low["rules"] if r["status"] == "fired"]


def test_less_than_one_request_is_fail_outside_the_band_and_warn_inside_it_saying_the_band(tmp_path):
    """Swept over --gpu-memory-utilization so the band is crossed whatever the calibration: a cell whose budget's
    high edge cannot hold one 32k request is FAIL (KVD181), one where only the band decides is WARN (KVD183) and its
    text states the band."""
    from kvdoctor.matrix import Capacity, Cell
    from kvdoctor.report.matrix.cells import capacity_text

    seen = set()
    for step in range(40, 62, 2):
        for cell in _matrix(tmp_path, QWEN, "T4,L4", "auto", "--gpu-memory-utilization", f"{step / 100}")["cells"]:
            cap = cell["capacity"]
            fired = [r["rule_id"] for r in cell["rules"] if r["status"] == "fired"]
            text = capacity_text(Cell(cell["gpu"], "auto", cell["verdict"], capacity=Capacity(**{k: v for k, v in cap.items() if k != "max_concurrent_seqs"})))
            if cap["fit"] == "does_not_fit":
                assert cell["verdict"] == "FAIL" and "KVD181" in fired and cap["max_concurrency"] < 1, cell
                assert text.endswith("(< 1 request)")
            elif cap["fit"] == "within_band":
                assert cell["verdict"] == "WARN" and "KVD183" in fired and "KVD181" not in fired, cell
                assert f"+-{cap['band_gib']:g} GiB band" in text and cap["band_gib"] > 0
            seen.add((cap["fit"], cap["max_concurrency"] is not None and cap["max_concurrency"] < 1))
    assert {("does_not_fit", True), ("within_band", True)} <= seen, seen  # both sides of the band, below 1 request


def test_max_model_len_sets_the_request_not_the_pool(tmp_path):
    """vLLM's pool of blocks does not depend on --max-model-len for full attention; its concurrency does."""
    short = _matrix(tmp_path, DEEPSEEK, "H100", "auto", "--max-model-len", "4096")["cells"][0]["capacity"]
    longest = _matrix(tmp_path, DEEPSEEK, "H100", "auto")["cells"][0]["capacity"]
    assert short["max_model_len"] == 4096 and longest["max_model_len"] == 163840  # the model's own, as check derives
    assert short["tokens"] == longest["tokens"] > 0
    assert short["max_concurrency"] == pytest.approx(short["tokens"] / 4096, abs=0.01)
    assert longest["max_concurrency"] == pytest.approx(longest["tokens"] / 163840, abs=0.01)


QUANTIZED_ROWS = [  # vLLM 0.33.0 refuses MXFP4 below SM 8.0 and FP8 below SM 7.5 (KVD190, vLLM's own words)
    ("gpt-oss-20b-mxfp4.json", {"V100": "KVD190", "T4": "KVD190", "A100": None}),
    ("llama-3.1-8b-fp8-block.json", {"V100": "KVD190", "T4": None, "H100": None}),
]


@pytest.mark.parametrize("config,row", QUANTIZED_ROWS, ids=[c for c, _ in QUANTIZED_ROWS])
def test_quantized_checkpoints_across_gpus_go_through_checks_quantization_rules(tmp_path, config, row):
    data = _matrix(tmp_path, QUANTIZED / config, ",".join(row), "auto")
    for cell in data["cells"]:
        fired = [r["rule_id"] for r in cell["rules"] if r["status"] == "fired"]
        refused = row[cell["gpu"]]
        if refused:
            assert cell["verdict"] == "FAIL" and refused in fired, (config, cell["gpu"], fired)
        else:
            assert not {"KVD190", "KVD191", "KVD192", "KVD195"} & set(fired), (config, cell["gpu"], fired)


def test_an_unknown_quantization_override_is_refused_in_every_cell(tmp_path):
    data = _matrix(tmp_path, QWEN, "A100,H100", "auto", "--quantization", "fp9")
    assert all(c["verdict"] == "FAIL" and "KVD191" in [r["rule_id"] for r in c["rules"]] for c in data["cells"])


def test_capacity_text_says_what_check_decided_and_nothing_more():
    from kvdoctor.matrix import Capacity, Cell
    from kvdoctor.report.matrix.cells import capacity_detail, capacity_text

    def cell(**fields) -> Cell:
        base = dict(fit="fits", why_not=None, max_model_len=32768, kv_budget_gib=66.25, band_gib=1.86,
                    kv_bytes_per_token=36864, tokens=1929760, max_concurrency=58.89, fitting_max_model_len=None,
                    weights_bytes=1, weights_estimated=True, vllm_log=None)  # fmt: skip
        return Cell("A100", "auto", "PASS", capacity=Capacity(**(base | fields)))

    assert capacity_text(cell()) == "1.93M tok / 58.89 seq"
    assert capacity_text(cell(fit="does_not_fit", tokens=4464, max_concurrency=0.14)) == "4.46k tok / 0.14 seq (< 1 request)"
    assert capacity_text(cell(fit="no_memory", tokens=0, max_concurrency=0.0)) == "no KV memory left"
    # no --vllm-version: the releases agree that it fits, not on the size
    assert capacity_text(cell(tokens=None, max_concurrency=None, kv_budget_gib=None)) == "fits; size differs by release"
    why = "--kv-cache-dtype nvfp4's page size is not modelled"
    not_judged = cell(fit="not_modelled", why_not=why, tokens=None, max_concurrency=None)
    assert capacity_text(not_judged) == "capacity n/a" and capacity_detail(not_judged) == f"fit not judged: {why}"
    assert capacity_text(Cell("A100", "auto", "FAIL")) == "capacity n/a"
