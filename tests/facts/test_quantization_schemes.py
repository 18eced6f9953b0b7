"""compressed-tensors' per-layer schemes, weight-only fallbacks and KV scales as check judges them (issue 25), against
vLLM's own code.

vLLM's answers (tests/fixtures/configs/quantized/vllm_scheme_answers.json) come from its own
CompressedTensorsConfig._get_scheme_from_parts and _check_scheme_supported, imported from each release wheel at hand
with the GPU's capability stubbed (kvdoctor.builders.vllm_pack.child_quantization); a test regenerates them when the
pack builder's venv is there. The held-back third of the hub checkpoints (hub/held_back.txt, drawn at random before
any rule was written) is judged by check and compared with vLLM's answers.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from conftest import CONFIGS
from dryrun_support import wheel_dir

from kvdoctor.check.run import derived_facts
from kvdoctor.facts.collect import CheckOptions, collect_facts
from kvdoctor.rules import load_all_rules
from kvdoctor.rules.engine import evaluate_rules
from kvdoctor.vllm_pack.quantization import release_quantization
from kvdoctor.vllm_pack.quantization_schemes import judge_moe, judge_schemes
from kvdoctor.vllm_pack.store import pack_releases

QUANTIZED = CONFIGS / "quantized"
HUB = QUANTIZED / "hub"
ANSWERS = json.loads((QUANTIZED / "vllm_scheme_answers.json").read_text())["answers"]
HELD_BACK = [n for n in (HUB / "held_back.txt").read_text().splitlines() if n and not n.startswith("#")]
RULES = load_all_rules()
GPUS = {"V100": 70, "T4": 75, "A100": 80, "L4": 89, "H100": 90}
REFUSALS = {"KVD190", "KVD191", "KVD193", "KVD194", "KVD196"}


def _path(name: str) -> Path:
    for candidate in (HUB / f"{name}.json", HUB / name / "config.json", QUANTIZED / f"{name}.json"):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(name)


def _quant_config(name: str) -> dict:
    raw = json.loads(_path(name).read_text())
    return raw.get("quantization_config") or raw.get("compression_config") or {}


def _flat(model: Path, gpu: str, vllm: str | None, serve=(), kv="auto") -> dict:
    facts = collect_facts(CheckOptions(model=str(model), serve_argv=tuple(serve), kv_cache_dtype=kv, gpu=gpu,
                                       vllm_version=vllm, environ={}))  # fmt: skip
    return derived_facts(facts)


def _statuses(flat: dict) -> dict[str, str]:
    return {f.rule_id: f.status for f in evaluate_rules(RULES, flat) if f.rule_id.startswith("KVD19")}


def _verdict(statuses: dict[str, str]) -> str:
    if any(statuses.get(r) == "fired" for r in REFUSALS):
        return "refuse"
    return "undecided" if statuses.get("KVD195") == "fired" else "start"


@pytest.mark.parametrize("version", sorted(ANSWERS))
def test_the_replay_chooses_what_vllm_chooses(version):
    """Every stored answer of vLLM's own scheme choice: the same scheme classes, or the same refusal word for word;
    for a MoE model's experts, the same MoE method class or the same "Unsupported FusedMoe scheme" refusal."""
    schemes = release_quantization(version).ct_schemes
    compared = moe_compared = 0
    for name, by_sm in ANSWERS[version].items():
        for sm, answer in by_sm.items():
            verdict = judge_schemes(schemes, _quant_config(name), int(sm))
            assert verdict.undecided is None, (version, name, sm, verdict.undecided)
            assert verdict.error == answer["error"], (version, name, sm)
            if answer["error"] is None:
                assert list(verdict.schemes) == list(dict.fromkeys(answer["schemes"])), (version, name, sm)
            compared += 1
            experts, theirs = judge_moe(schemes, _quant_config(name), int(sm)), answer["moe"]
            if theirs.startswith("error: Unsupported FusedMoe scheme"):  # vLLM prints the args' pydantic repr
                assert experts.error and experts.error.startswith("Unsupported FusedMoe scheme: "), (version, name)
                moe_compared += 1
            elif not theirs.startswith("error:"):  # an error of the child's stand-in layer asks nothing of vLLM
                assert experts.error is None and theirs in experts.candidates, (version, name, sm, theirs)
                moe_compared += 1
    assert compared >= 80 and moe_compared >= 70  # the WNA16 Marlin check reads more of the layer than the stand-in has


@pytest.mark.vllm_wheel
def test_vllms_own_answers_are_what_the_child_reports():
    """The stored answers are vLLM's: the child asks 0.34.0's CompressedTensorsConfig again and gets them."""
    python = os.environ.get("KVDOCTOR_PACK_PYTHON")
    if not python:
        pytest.skip("KVDOCTOR_PACK_PYTHON (the builder's venv, made by .ci/run) is not set")
    from kvdoctor.builders.vllm_pack.build import run_child
    from kvdoctor.builders.vllm_pack.wheel import extract, find_wheel, stub_versions

    version = "0.34.0"
    wheel = find_wheel(wheel_dir(), version)
    if wheel is None:
        pytest.skip(f"no vllm-{version} wheel")
    stored = ANSWERS[version]
    with tempfile.TemporaryDirectory() as tmp:
        shipped = extract(wheel, Path(tmp))
        pins = {name: spec for name, spec, _ in shipped["requirements"]}
        request = {"version": version, "tasks": ["module:quantization"], "legacy": True,
                   "compiled_modules": shipped["compiled_modules"], "stub_packages": stub_versions(pins),
                   "scheme_configs": {n: _quant_config(n) for n in stored},
                   "scheme_capabilities": [[int(sm) // 10, int(sm) % 10] for sm in next(iter(stored.values()))]}
        raw = run_child(python, Path(tmp), request, timeout=600)
    fresh = raw["quantization"]["schemes"]
    assert {n: {sm: {"error": a["error"], "schemes": a["schemes"], "moe": a["moe"]} for sm, a in by.items()}
            for n, by in fresh.items()} == stored  # fmt: skip


def test_compressed_tensors_is_registered_from_0_5():
    without = [v for v in pack_releases() if "compressed-tensors" not in release_quantization(v).methods]
    assert without == [v for v in pack_releases() if v.startswith("0.4.")], without


@pytest.mark.parametrize("version", [v for v in pack_releases() if "compressed-tensors" in release_quantization(v).methods])
def test_each_release_refuses_a_scheme_just_below_its_minimum_and_not_at_it(version):
    """The truth for every release that registers compressed-tensors (0.5 added it): the W8A8-FP8 and W4A16
    checkpoints' schemes (as this release chooses them) are refused one step below their minimum with the release's
    own words, and start at it."""
    quant = release_quantization(version)
    if quant.ct_schemes is None:
        pytest.fail(f"{version}: the pack holds no compressed-tensors scheme facts")
    for name in ("llama-3.1-8b-ct-w8a8-fp8", "llama-3.1-8b-ct-w4a16"):
        at_hopper = judge_schemes(quant.ct_schemes, _quant_config(name), 90)
        low = min(judge_schemes(quant.ct_schemes, _quant_config(name), sm).min_capability or 0 for sm in (70, 75, 80))
        assert at_hopper.error is None and low > 70, (version, name)
        below = judge_schemes(quant.ct_schemes, _quant_config(name), low - 1)
        assert below.error is not None and f"Min capability: {low}. " in below.error, (version, name, below)
        assert judge_schemes(quant.ct_schemes, _quant_config(name), low).error is None, (version, name)


def test_the_w8a8_fp8_checkpoint_on_a_v100_is_no_longer_passed():
    """The known false PASS: compressed-tensors W8A8-FP8 on a V100 now fails with vLLM's scheme message, on an A100
    it starts weight-only (a warning saying so), on an H100 neither."""
    model = QUANTIZED / "llama-3.1-8b-ct-w8a8-fp8.json"
    v100 = _flat(model, "V100", "0.33.0")
    assert _statuses(v100).get("KVD196") == "fired"
    assert v100["quant.error"] == ("Quantization scheme is not supported for the current GPU. Min capability: 75. "
                                   "Current capability: 70.")  # fmt: skip
    assert "T4" in v100["quant.fix_gpus"] and v100["quant.fix_releases"] == "none"  # no release serves it on SM 7.0
    a100 = _flat(model, "A100", "0.33.0")
    assert _statuses(a100).get("KVD197") == "fired" and "KVD196" not in _statuses(a100)
    assert "Marlin" in a100["quant.fallback"] and a100["quant.scheme"] == "W8A16Fp8"
    h100 = _flat(model, "H100", "0.33.0")
    assert not {"KVD196", "KVD197"} & set(_statuses(h100)) and h100["quant.scheme"] == "W8A8Fp8"


def test_an_older_release_refuses_the_w8a16_fallback_on_a_t4():
    """0.15.1's W8A16Fp8 needs SM 8.0 (0.16.0 lowered it to 7.5): the fix names the releases that serve it."""
    flat = _flat(QUANTIZED / "llama-3.1-8b-ct-w8a8-fp8.json", "T4", "0.15.1")
    assert _statuses(flat).get("KVD196") == "fired"
    assert flat["quant.fix_releases"].startswith("0.16.0")


def test_fp8_checkpoint_on_ampere_warns_of_marlin_and_kv_scales_with_e5m2_warn():
    fp8 = _flat(QUANTIZED / "llama-3.1-8b-fp8-block.json", "A100", "0.33.0")
    assert _statuses(fp8).get("KVD197") == "fired" and "below SM 8.9" in fp8["quant.fallback"]
    modelopt = CONFIGS / "llama-3.1-8b-instruct-fp8-modelopt.json"
    e5m2 = _flat(modelopt, "H100", "0.33.0", kv="fp8_e5m2")
    assert _statuses(e5m2).get("KVD198") == "fired" and e5m2["quant.kv_scales"] == "FP8 (ModelOpt)"
    assert "KVD198" not in _statuses(_flat(modelopt, "H100", "0.33.0", kv="fp8"))


def _expected(name: str, version: str, sm: int) -> str:
    """vLLM's own answer: its scheme choice for compressed-tensors; otherwise the minimum capability of the class its
    get_quantization_config builds for the checkpoint's method (equal to vLLM's import: test_quantization_pack)."""
    if name in ANSWERS[version]:
        return "refuse" if ANSWERS[version][name][str(sm)]["error"] else "start"
    flat = _flat(_path(name), "H100", version)  # the method as vLLM names it (ModelOpt's quant_algo read)
    entry = release_quantization(version).methods[flat["quant.checkpoint_method"]]
    return "refuse" if sm < entry.min_capability else "start"


def test_held_back_checkpoints_against_vllms_own_answers(capsys):
    """The held-back third, on five GPUs and every release with a wheel at hand: check never passes what vLLM
    refuses; the counts are printed for the report (pytest -s)."""
    counts = {"agree": 0, "false_pass": 0, "false_fail": 0, "undecided": 0}
    for name in HELD_BACK:
        for version in sorted(ANSWERS):
            for gpu, sm in GPUS.items():
                got = _verdict(_statuses(_flat(_path(name), gpu, version)))
                want = _expected(name, version, sm)
                key = "agree" if got == want else "undecided" if got == "undecided" else \
                    "false_pass" if want == "refuse" else "false_fail"
                counts[key] += 1
    with capsys.disabled():
        print(f"\nheld back: {len(HELD_BACK)} checkpoints x {len(ANSWERS)} releases x {len(GPUS)} GPUs: {counts}")
    assert counts["false_pass"] == 0
    assert counts["agree"] >= 0.9 * sum(counts.values())


def test_matrix_over_gpus_judges_the_quantized_checkpoint_through_checks_rules(tmp_path):
    """`kvdoctor matrix` on the W8A8-FP8 checkpoint: FAIL on the V100 (KVD196, vLLM's scheme refusal), the weight-only
    warning on the T4 and A100 (KVD197), neither on the H100, for every KV dtype column."""
    import subprocess
    import sys

    env = {**os.environ, "KVDOCTOR_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "kvdoctor", "matrix", "-m", str(QUANTIZED / "llama-3.1-8b-ct-w8a8-fp8.json"),
                           "--gpus", "V100,T4,A100,H100", "--kv-cache-dtypes", "auto", "--vllm-version", "0.33.0",
                           "--format", "json", "--offline"], cwd=tmp_path, env=env, capture_output=True, text=True)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    cells = {c["gpu"]: c for c in json.loads(proc.stdout)["cells"]}
    fired = {gpu: {r["rule_id"] for r in c["rules"] if r["status"] == "fired"} for gpu, c in cells.items()}
    assert cells["V100"]["verdict"] == "FAIL" and "KVD196" in fired["V100"]
    for gpu in ("T4", "A100"):
        assert "KVD197" in fired[gpu] and "KVD196" not in fired[gpu], gpu
    assert not {"KVD196", "KVD197"} & fired["H100"]


def test_a_moe_model_whose_experts_no_moe_method_takes_fails_in_vllms_words():
    """Static per-tensor INT8 W8A8 loads for linear layers, but get_moe_method has no branch for it: KVD199."""
    flat = _flat(QUANTIZED / "mixtral-8x7b-ct-w8a8-int8-static.json", "H100", "0.33.0")
    assert _statuses(flat).get("KVD199") == "fired"
    assert flat["quant.error"].startswith("Unsupported FusedMoe scheme: num_bits=8 type=int strategy=channel")
    dense = _flat(QUANTIZED / "hub" / "llama-3.2-1b-w8a8-int8-ct.json", "H100", "0.33.0")  # dynamic INT8: taken
    assert "KVD199" not in _statuses(dense) and dense["quant.error_kind"] == "none"


def test_marlin_overrides_claim_only_what_their_conditions_take():
    """0.15.1: gptq_marlin claims a symmetric 4-bit GPTQ checkpoint on SM 7.5+ (Marlin's minimum there), not an
    asymmetric one, which stays on gptq: float16 only, so its bfloat16 config is refused (KVD193, --dtype float16)."""
    sym = _flat(HUB / "qwen2.5-0.5b-gptqmodel-w4a16.json", "A100", "0.15.1")
    assert sym["quant.method"] == "gptq_marlin" and sym["quant.error_kind"] == "none"
    asym = _flat(HUB / "yi-1.5-9b-gptq-asym.json", "A100", "0.15.1")
    assert asym["quant.method"] == "gptq" and _statuses(asym).get("KVD193") == "fired"
    assert asym["quant.fix_dtype"] == "--dtype float16"
    old = _flat(HUB / "qwen2.5-0.5b-gptqmodel-w4a16.json", "T4", "0.12.0")  # Marlin needed SM 8.0 up to 0.13.0
    assert old["quant.method"] == "gptq"
