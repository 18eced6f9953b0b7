"""Flat facts for a scenario, built by `kvdoctor check`'s own phases (kvdoctor.check.run), without compiling."""

from __future__ import annotations

from dataclasses import replace

from conftest import CONFIGS, EXAMPLE_MODEL
from kvdoctor.check.run import derived_facts, with_dry_run_facts
from kvdoctor.facts.collect import CheckOptions, collect_facts
from kvdoctor.rules import load_all_rules
from kvdoctor.rules.engine import evaluate_rules

MODELS = {
    "qwen": EXAMPLE_MODEL,
    "llama": CONFIGS / "llama-3.1-8b-instruct.json",
    "deepseek": CONFIGS / "deepseek-v2-lite.json",
    "jamba": CONFIGS / "jamba-v0.1.json",
    "gemma2": CONFIGS / "gemma-2-9b-it.json",
    "gpt2": CONFIGS / "gpt2.json",
    "mpt": CONFIGS / "layer_features" / "mpt-7b-instruct.json",
    "qwen3": CONFIGS.parent / "configs_public" / "qwen--qwen3-1.7b" / "config.json",
    "step3p7": CONFIGS.parent / "configs_public" / "stepfun-ai--step-3.7-flash" / "config.json",
    "modelopt": CONFIGS / "llama-3.1-8b-instruct-fp8-modelopt.json",
    "mistral-fp16": CONFIGS / "mistral-7b-v0.1-fp16.json",
    "ct-fp8": CONFIGS / "quantized" / "llama-3.1-8b-ct-w8a8-fp8.json",
    "fp8-block": CONFIGS / "quantized" / "llama-3.1-8b-fp8-block.json",
    "ct-int8-static-moe": CONFIGS / "quantized" / "mixtral-8x7b-ct-w8a8-int8-static.json",
    "gpt-oss-mxfp4": CONFIGS / "quantized" / "gpt-oss-20b-mxfp4.json",
    "deepseek-v3-fp8": CONFIGS / "quantized" / "hub" / "deepseek-v3-fp8-block.json",
    "nvfp4-dense": CONFIGS / "quantized" / "llama-3.1-8b-nvfp4-modelopt" / "config.json",
    "mixed-nvfp4-moe": CONFIGS / "quantized" / "hub" / "qwen3.5-397b-a17b-nvfp4-v2-mixed" / "config.json",
    "mixed-w4a16-moe": CONFIGS / "quantized" / "hub" / "qwen3.6-35b-a3b-nvfp4-mixed" / "config.json",
}
_RULES = None


def rules():
    global _RULES
    if _RULES is None:
        _RULES = load_all_rules()
    return _RULES


def scenario_facts(model="qwen", gpu="A100", kv="auto", vllm="0.27.0", serve=(), flashinfer=None, triton=None,
                   dry_run=None):
    """The facts `kvdoctor check` would judge for this scenario: its own collection and derivation phases
    (kvdoctor.check.run), with `dry_run` (a short dict, see typed_dry_run) standing in for the compile."""
    options = CheckOptions(
        model=str(MODELS[model]) if model else None,
        serve_argv=tuple(serve),
        kv_cache_dtype=kv,
        gpu=gpu,
        vllm_version=vllm,
        environ={},
    )
    facts = collect_facts(options)
    if flashinfer is not None or triton is not None:  # stand-ins for what this machine has installed
        versions = replace(facts.versions, vllm_source="installed", flashinfer=flashinfer, triton=triton)
        facts = replace(facts, versions=versions)
    return with_dry_run_facts(derived_facts(facts), typed_dry_run(dry_run), rules())


def typed_dry_run(data: dict | None):
    """A DryRunReport from a test's short dict form (missing fields take neutral defaults); None stays None."""
    from kvdoctor.model.dry_run import from_json

    if data is None or not isinstance(data, dict):
        return data
    request = {"kv_cache_dtype": "turboquant_k8v4", "model_dtype": "bfloat16", "head_dim": 128, "num_kv_heads": 2,
               "capability": [8, 0], **data.get("request", {})}  # fmt: skip
    kernels = [{"source_file": "", "seconds": 0.0, "cached": False, **k} for k in data.get("kernels", [])]
    return from_json({"source_label": "", "seconds": 0.0, **data, "request": request, "kernels": kernels})


def fired(**scenario) -> set[str]:
    return {f.rule_id for f in evaluate_rules(rules(), scenario_facts(**scenario)) if f.status == "fired"}


def undecided(**scenario) -> set[str]:
    return {f.rule_id for f in evaluate_rules(rules(), scenario_facts(**scenario)) if f.status == "undecided"}
