"""Weight quantization as check judges it, against each release's own code (issue 25).

The truth test: for every release in the pack and every method it registers whose config class states a minimum
capability, check refuses `--quantization METHOD` on a GPU one step below that capability (KVD190, vLLM's words)
and does not refuse it at that capability. The rest: the issue's table (a Llama-3.1-8B with a quantization_config,
vLLM 0.33.0) through the CLI, unknown methods, conflicts, and the checkpoint's quant_method read as vLLM reads it.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
from conftest import CONFIGS

from kvdoctor.check.run import derived_facts
from kvdoctor.facts.collect import CheckOptions, collect_facts
from kvdoctor.facts.quantization import quantization_facts
from kvdoctor.model.facts import GpuDevice, GpuFacts
from kvdoctor.rules import load_all_rules
from kvdoctor.rules.engine import evaluate_rules
from kvdoctor.vllm_pack.candidates import candidates
from kvdoctor.vllm_pack.quantization import release_quantization
from kvdoctor.vllm_pack.store import pack_releases

QUANTIZED = CONFIGS / "quantized"
LLAMA = CONFIGS / "llama-3.1-8b-instruct.json"
RULES = {r.id: r for r in load_all_rules()}


def _facts(model=LLAMA, gpu="H100", vllm="0.33.0", serve=()):
    return collect_facts(CheckOptions(model=str(model), serve_argv=tuple(serve), kv_cache_dtype="auto", gpu=gpu,
                                      vllm_version=vllm, environ={}))  # fmt: skip


def _on_gpu(facts, capability: int):
    device = GpuDevice(f"SM {capability}", divmod(capability, 10), 80.0)
    return replace(facts, gpu=GpuFacts(source="target", devices=(device,)))


def _verdict(flat) -> dict[str, str]:
    return {f.rule_id: f.status for f in evaluate_rules(list(RULES.values()), flat) if f.rule_id.startswith("KVD19")}


@pytest.mark.parametrize("version", pack_releases())
def test_refused_just_below_each_methods_minimum_capability_and_not_at_it(version):
    quant = release_quantization(version)
    base = _facts(vllm=version)
    flat_base = derived_facts(base)
    releases = candidates(version)
    judged = 0
    for method, entry in quant.methods.items():
        if entry.min_capability is None or entry.min_capability <= 0 or method in quant.deprecated:
            continue  # computed / CPU-only: undecided by design; deprecated: refused for that first
        asked = replace(base, serve=replace(base.serve, quantization=method))
        for capability, refused in ((entry.min_capability - 1, True), (entry.min_capability, False)):
            facts = _on_gpu(asked, capability)
            flat = flat_base | {"gpu.capability": capability / 10, "gpu.name": f"SM {capability}",
                                "serve.quantization": method} | quantization_facts(facts, releases)  # fmt: skip
            verdict = _verdict(flat)
            where = f"vLLM {version} --quantization {method} on SM {capability}"
            if refused:
                assert verdict.get("KVD190") == "fired", where
                assert flat["quant.error"] == (f"The quantization method {method} is not supported for the current "
                                               f"GPU. Minimum capability: {entry.min_capability}. Current capability: "
                                               f"{capability}."), where  # fmt: skip
            else:
                assert "KVD190" not in verdict, where
                assert flat["quant.error_kind"] in ("none", "act_dtype"), where
            judged += 1
    assert judged >= 14, f"only {judged} verdicts for {version}"  # two per method, 7+ methods a release (0.4.2: 7)


# The issue's table: vLLM 0.33.0 refuses AWQ and FP8 on the V100 and MXFP4 on the V100 and the T4.
ISSUE_TABLE = [
    ("llama-3.1-8b-awq-int4.json", {"V100": True, "T4": False, "A100": False}),
    ("llama-3.1-8b-fp8-block.json", {"V100": True, "T4": False, "A100": False}),
    ("gpt-oss-20b-mxfp4.json", {"V100": True, "T4": True, "A100": False}),
]


@pytest.mark.parametrize("config,refused", ISSUE_TABLE, ids=[c for c, _ in ISSUE_TABLE])
def test_the_issue_table_through_the_cli(run_cli, config, refused):
    for gpu, is_refused in refused.items():
        out = run_cli("check", "--model", str(QUANTIZED / config), "--gpu", gpu, "--vllm-version", "0.33.0",
                      "--no-compile", "--format", "json")  # fmt: skip
        report = json.loads(out.stdout)
        ids = {f["rule_id"]: f for f in report["findings"]}
        if is_refused:
            assert out.code == 1 and "KVD190" in ids, (config, gpu, out.stderr)
            assert "is not supported for the current GPU. Minimum capability:" in ids["KVD190"]["cause"]
        else:
            assert not {"KVD190", "KVD191", "KVD192", "KVD195"} & set(ids), (config, gpu, ids.keys())


def test_an_unknown_method_is_refused_in_vllms_words(run_cli):
    out = run_cli("check", "--model", str(LLAMA), "--gpu", "H100", "--vllm-version", "0.33.0", "--no-compile",
                  "--quantization", "fp9")  # fmt: skip
    assert out.code == 1, out.stdout
    assert "KVD191" in out.stdout and "Unknown quantization method: fp9. Must be one of ['awq'," in out.stdout


def test_an_unregistered_method_without_the_models_config_is_left_to_the_checkpoint(run_cli, tmp_path):
    """A public launcher (vLLM 0.24.0, an NVFP4 checkpoint on a volume) passes --quantization fp4, which 0.24.0 does
    not register: ModelOpt's override claims an NVFP4 checkpoint whatever was asked, so without the model's config
    the refusal is not decided (KVD195 naming config.json), never an error; with an unquantized config it is."""
    script = tmp_path / "serve.sh"
    script.write_text("docker run --gpus all vllm/vllm-openai:v0.24.0 --model nvidia/Some-NVFP4 --quantization fp4\n")
    out = run_cli("scan", str(script), "--format", "json")
    findings = {f["rule_id"]: f for w in json.loads(out.stdout)["workloads"] for f in w["report"]["findings"]}
    assert "KVD191" not in findings or findings["KVD191"]["status"] != "fired", findings.get("KVD191")
    assert findings["KVD195"]["status"] == "fired" and "config.json decides" in findings["KVD195"]["cause"]
    known = derived_facts(_facts(vllm="0.24.0", serve=("--quantization", "fp4")))
    assert known["quant.error_kind"] == "unknown_method" and _verdict(known)["KVD191"] == "fired"


def test_an_override_that_may_claim_the_checkpoint_stays_undecided_not_passed():
    """An AWQ checkpoint served with --quantization moe_wna16 (0.33.0): whether vLLM's AWQ overrides claim it
    depends on checks kvdoctor does not replay, so it is undecided (KVD195), never a PASS or a guessed FAIL."""
    flat = derived_facts(_facts(QUANTIZED / "llama-3.1-8b-awq-int4.json", serve=("--quantization", "moe_wna16")))
    assert flat["quant.error_kind"] is None
    assert "override_quantization_method" in flat["quant.undecided"]
    assert _verdict(flat) == {"KVD195": "fired"}


def test_awq_on_a_t4_starts_on_every_release_that_reads_it_75():
    """AWQ and AWQ-Marlin both state SM 7.5 from 0.20.0 on: a T4 is not refused, whichever the override picks."""
    flat = derived_facts(_facts(QUANTIZED / "llama-3.1-8b-awq-int4.json", gpu="T4", vllm=None))
    assert (flat["quant.error_kind"], flat["quant.refused_by"]) == ("none", "none")


def test_a_checkpoint_and_a_contradicting_quantization_is_vllms_mismatch_error():
    flat = derived_facts(_facts(QUANTIZED / "llama-3.1-8b-ct-w4a16.json", serve=("--quantization", "fp8")))
    assert flat["quant.error_kind"] == "mismatch"
    assert flat["quant.error"] == ("Quantization method specified in the model config (compressed-tensors) does not "
                                   "match the quantization method specified in the `quantization` argument (fp8).")
    assert _verdict(flat) == {"KVD192": "fired"}


def test_an_unquantized_model_is_decided_and_quiet():
    flat = derived_facts(_facts())
    assert (flat["quant.method"], flat["quant.error_kind"]) == ("none", "none")
    assert _verdict(flat) == {}


def test_fixes_are_replayed_again():
    flat = derived_facts(_facts(QUANTIZED / "gpt-oss-20b-mxfp4.json", gpu="T4"))
    assert flat["quant.fix_gpus"].startswith("A100 80GB (SM 8.0)")  # every GPU named starts with it (replayed)
    flat = derived_facts(_facts(serve=("--quantization", "mxfp4", "--dtype", "float16")))
    assert flat["quant.error_kind"] == "act_dtype"
    assert flat["quant.error"] == ("torch.float16 is not supported for quantization method mxfp4. Supported dtypes: "
                                   "[torch.bfloat16]")
    assert flat["quant.fix_dtype"] == "none"  # float16 is the problem here, not the fix


@pytest.mark.parametrize("config,method", [
    ("llama-3.1-8b-awq-int4.json", "awq"),
    ("llama-3.1-8b-ct-w8a8-fp8.json", "compressed-tensors"),
    ("llama-3.1-8b-bnb-4bit.json", "bitsandbytes"),
    ("gpt-oss-20b-mxfp4.json", "mxfp4"),
])
def test_the_checkpoint_method_is_read_as_vllm_compares_it(config, method):
    assert _facts(QUANTIZED / config).model.quant_method == method


def test_modelopt_hf_quant_config_beside_config_json_names_nvfp4(tmp_path):
    """ModelOpt 0.29 writes hf_quant_config.json; vLLM reads it when config.json has no quantization_config and
    names the method by its quant_algo (NVFP4 -> modelopt_fp4)."""
    model = tmp_path / "nvfp4"
    shutil.copytree(QUANTIZED / "llama-3.1-8b-nvfp4-modelopt", model)
    facts = _facts(model / "config.json", gpu="V100")
    assert (facts.model.quant_method, facts.model.kv_cache_quant_algo) == ("modelopt_fp4", "FP8")
    assert _verdict(derived_facts(facts)) == {"KVD190": "fired"}


def test_compressed_tensors_spelt_with_an_underscore_and_compression_config(tmp_path):
    config = json.loads(LLAMA.read_text())
    config["compression_config"] = {"quant_method": "Compressed_Tensors", "config_groups": {}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert _facts(tmp_path / "config.json").model.quant_method == "compressed-tensors"
