"""Round 18 (batch 35's seen miss, by mechanism): where the message index places a message at a frame of the
traceback, an outer caller's place (a drafter loader calling the model loader) does not claim it for another family;
a weight-loading failure under the drafter's frames is the speculative-decoding family (KVD442), elsewhere it is not.
Lines written from vLLM's own message and frame formats."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text

FRAMES = """\
Traceback (most recent call last):
  File ".../vllm/v1/worker/gpu/model_runner.py", line 322, in load_model
    self.{caller}
  File ".../vllm/model_executor/model_loader/default_loader.py", line 467, in track_weights_loading
    raise ValueError(...)
ValueError: Following weights were not initialized from checkpoint: {{'{weight}'}}
"""
DRAFTER = """\
  File ".../vllm/v1/worker/gpu/spec_decode/eagle/utils.py", line 51, in load_eagle_model
    eagle_model = get_model(...)
"""


def test_a_drafters_weights_not_loading_is_the_speculative_decoding_family():
    text = FRAMES.replace("  File \".../vllm/model_executor", DRAFTER + "  File \".../vllm/model_executor").format(
        caller="speculator.load_model(self.model)", weight="model.layers.16.eh_proj.weight")
    report = explain_text(text)
    assert (report.exit_code("error"), report.extra["family"]) == (1, "spec_decode_config")
    assert report.findings[0].rule_id == "KVD442" and "model.layers.16.eh_proj.weight" in report.findings[0].title


def test_the_targets_weights_not_loading_is_no_drafter_rule():
    report = explain_text(FRAMES.format(caller="model = get_model(...)", weight="vision_tower.blocks.0.attn.qkv.weight"))
    assert report.exit_code("error") == 1
    assert not {"KVD442", "KVD381"} & {f.rule_id for f in report.findings if f.status == "fired"}


def test_an_unknown_failure_quotes_the_warning_logged_just_before_it():
    # batch 35 (ovg-project/kvcached #262): a plugin's warning right before the engine's fatal wrapper
    text = ("  [kvcached][WARNING] kv_cache_manager.py:174 available_size()=71 < need_size=76\n"
            "  ERROR core.py:938 EngineCore encountered a fatal error.\n"
            "RuntimeError: allocation failed\n")
    report = explain_text(text)
    assert (report.exit_code("error"), report.findings[0].rule_id) == (1, "KVD399")
    assert "Logged just before it (line 1): [kvcached][WARNING]" in report.findings[0].cause


def test_a_warning_far_above_the_failure_is_not_quoted():
    text = "WARNING 05-02 10:22:18 [config.py:1] something\n" + "INFO 05-02 10:22:18 [x.py:1] step\n" * 8 + \
        "RuntimeError: the flux capacitor is not charged\n"
    report = explain_text(text)
    assert report.findings[0].rule_id == "KVD399" and "Logged just before it" not in report.findings[0].cause
