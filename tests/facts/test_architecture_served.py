"""vllm.arch_served: each release's own model registry decides whether it serves config.json's architectures."""

from __future__ import annotations

import json

from conftest import CONFIGS
from kvdoctor.check.run import derived_facts
from kvdoctor.facts.collect import CheckOptions, collect_facts
from kvdoctor.vllm_pack.architectures import load_architectures
from kvdoctor.vllm_pack.candidates import candidates
from rules_support import MODELS, scenario_facts


def _facts_for(tmp_path, architectures, vllm, serve=()):
    config = json.loads((CONFIGS / "llama-3.1-8b-instruct.json").read_text())
    config["architectures"] = list(architectures)
    (tmp_path / "config.json").write_text(json.dumps(config))
    options = CheckOptions(model=str(tmp_path / "config.json"), serve_argv=tuple(serve), kv_cache_dtype="auto",
                           gpu="H100", vllm_version=vllm, environ={})  # fmt: skip
    return derived_facts(collect_facts(options))


def test_qwen3_fails_the_release_before_it_was_registered_and_passes_at_it():
    assert "Qwen3ForCausalLM" not in load_architectures("0.7.3")["architectures"]
    assert "Qwen3ForCausalLM" in load_architectures("0.8.5")["architectures"]
    before = scenario_facts("qwen3", gpu="H100", vllm="0.7.3", serve=["--model-impl", "vllm"])
    assert before["vllm.arch_served"] == "no"
    assert before["vllm.arch_refusal"].startswith("Model architectures ['Qwen3ForCausalLM'] are not supported for now.")
    assert before["vllm.arch_first_served"] == "0.8.4"  # the first release read that registers it
    at = scenario_facts("qwen3", gpu="H100", vllm="0.8.5", serve=["--model-impl", "vllm"])
    assert at["vllm.arch_served"] == "yes" and at["vllm.arch_refusal"] == "none"


def test_the_transformers_fallback_leaves_an_unregistered_architecture_undecided():
    facts = scenario_facts("qwen3", gpu="H100", vllm="0.7.3")  # --model-impl auto: transformers may have Qwen3
    assert facts["vllm.arch_served"] is None
    assert "Transformers backend (vllm/model_executor/model_loader/utils.py:" in facts["vllm.arch_undecided"]


def test_an_unknown_architecture_fails_in_each_releases_words(tmp_path):
    old = _facts_for(tmp_path, ["NoSuchModelForCausalLM"], "0.6.6.post1")
    template = load_architectures("0.6.6.post1")["messages"]["unsupported"]["template"]
    assert old["vllm.arch_served"] == "no"
    assert old["vllm.arch_refusal"].startswith(template.split("{")[0] + "['NoSuchModelForCausalLM'] are not supported")
    assert old["vllm.arch_refusal_at"] == load_architectures("0.6.6.post1")["messages"]["unsupported"]["at"]
    assert old["vllm.arch_first_served"] == "none" and old["vllm.arch_served_by"] == "none"
    new = _facts_for(tmp_path, ["NoSuchModelForCausalLM"], "0.34.0", ["--model-impl", "vllm"])
    assert new["vllm.arch_refusal_at"] == "vllm/model_executor/models/registry.py:1328"
    assert "the 426 architectures vLLM 0.34.0 registers" in new["vllm.arch_refusal"]


def test_a_removed_architecture_is_left_to_kvd185():
    facts = scenario_facts("mpt", gpu="H100", vllm="0.33.0")
    assert facts["vllm.arch_served"] == "no" and facts["vllm.arch_refusal"] == "none"
    assert facts["vllm.arch_removed"].startswith("Model architecture MPTForCausalLM was supported in vLLM until v0.28.0")


def test_releases_that_disagree_leave_it_undecided_without_a_version(tmp_path):
    releases = [r.version for r in candidates(None).releases]
    oldest, newest = load_architectures(releases[0]), load_architectures(releases[-1])
    added = next(a for a in sorted(newest["architectures"]) if a not in oldest["architectures"])
    facts = _facts_for(tmp_path, [added], None, ["--model-impl", "vllm"])
    assert facts["vllm.arch_served"] is None
    assert "yes by" in facts["vllm.arch_undecided"] and "no by" in facts["vllm.arch_undecided"]
    assert "--vllm-version" in facts["vllm.arch_undecided"]
    assert _facts_for(tmp_path, [added], releases[-1], ["--model-impl", "vllm"])["vllm.arch_served"] == "yes"


def test_fixture_models_are_what_the_names_say():
    assert json.loads(MODELS["qwen3"].read_text())["architectures"] == ["Qwen3ForCausalLM"]


def test_the_hand_read_removed_list_agrees_with_every_release_registry():
    """data/removed_architectures.yaml (read by hand from 5 releases, still used outside the pack) says what each pack
    release's own _PREVIOUSLY_SUPPORTED_MODELS says, wherever it decides."""
    from kvdoctor.facts.architecture import _table
    from kvdoctor.vllm_pack.architectures import judge_architectures
    from kvdoctor.vllm_pack.store import pack_releases

    table = _table()
    decided = 0
    for arch, entry in table["architectures"].items():
        for version in pack_releases():
            record = load_architectures(version)
            if arch in record["previously_supported"]:
                assert record["previously_supported"][arch] == entry["last"], (arch, version)
                verdict = judge_architectures((arch,), version, "vllm")
                if "until v{" in record["messages"]["removed"]["template"]:
                    assert verdict.message == table["message"].format(arch=arch, last=entry["last"])
                else:  # 0.10.0-0.10.1.1 raise it in model_loader/utils.py, worded "until version X"
                    assert f"{arch} was supported in vLLM until version {entry['last']}," in verdict.message
                decided += 1
    assert decided > 300
