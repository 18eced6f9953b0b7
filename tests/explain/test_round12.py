"""Round 12 of issue 28 (interface drift): the exceptions Python raises where a caller and a callee written for
different releases meet are wrapper_api_mismatch when the interface is vLLM's or a vLLM plugin's (decided from the
traceback's frames, then from vLLM's API history, then from a name that carries vllm); the same shapes on NoneType,
builtins, transformers' or torch's own objects stay what they were. Synthetic lines, none copied from a real log."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.report.check.text import render

_PROGRAM = '  File "/opt/framework/workers/rollout.py", line 88, in start\n    engine.run()\n'
_PLUGIN = '  File "/usr/lib/python3.11/site-packages/vllm_acme/worker/model_runner.py", line 41, in load_model\n    x()\n'
_VLLM = '  File "/usr/lib/python3.11/site-packages/vllm/engine/arg_utils.py", line 1102, in create_engine_config\n    x()\n'
_TRANSFORMERS = ('  File "/usr/lib/python3.11/site-packages/transformers/tokenization_utils_base.py", line 1600, '
                 'in apply_chat_template\n    x()\n')
_TORCH = '  File "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1736, in _call_impl\n    x()\n'


def _traceback(*frames: str) -> str:
    return "Traceback (most recent call last):\n" + "".join(frames)


def _report(log: str):
    """The family, the primary rule and the text report."""
    report = explain_text(log)
    return report.extra.get("family"), report.extra["primary"]["rule_id"], " ".join(render(report).split())


@pytest.mark.parametrize("log, names", [
    # a vLLM layer class (the history keeps its name, not its members) built with a keyword it does not take
    ("TypeError: RowParallelLinear.__init__() got an unexpected keyword argument 'skip_bias_add_v2'",
     ["RowParallelLinear", "skip_bias_add_v2"]),
    # a plugin's model runner calls a vLLM class's method without an argument the installed release requires
    (_traceback(_PROGRAM, _PLUGIN) + "TypeError: GPUModelRunner.load_model() missing 1 required positional argument: "
     "'eep_scale_up'", ["GPUModelRunner.load_model", "eep_scale_up", "vllm_acme"]),
    # a program's own subclass of a vLLM engine, its name carrying vLLM, lacks a member the program expects
    (_traceback(_PROGRAM) + "AttributeError: 'AcmeVLLMRollout' object has no attribute 'inference_engine'",
     ["AcmeVLLMRollout", "inference_engine"]),
    # a vLLM config class lacking a member the API history shows it having in other releases
    ("(EngineCore pid=7) AttributeError: 'CacheConfig' object has no attribute 'calculate_kv_scales'",
     ["CacheConfig", "calculate_kv_scales", "0."]),
    # a class attribute read on a vLLM layer class a patched model file expects
    ("AttributeError: type object 'VocabParallelEmbedding' has no attribute 'from_padded_vocab'",
     ["VocabParallelEmbedding", "from_padded_vocab"]),
    # a plugin calls vLLM's scheduler method with an argument more than the installed release takes
    (_traceback(_PLUGIN) + "TypeError: Scheduler.schedule() takes 1 positional argument but 2 were given",
     ["Scheduler.schedule", "vllm_acme"]),
    # a plugin's own class, raised in the plugin under vLLM's call: the traceback crosses their interface
    (_traceback(_VLLM, _PLUGIN) + "AttributeError: 'NPUModelRunner' object has no attribute 'kv_cache_config'",
     ["NPUModelRunner", "kv_cache_config", "vllm_acme"]),
    # a closure another package patched over vLLM's function, called by vLLM with the installed release's arguments:
    # the name vLLM calls, the wrapper and the package the traceback passes through (vllm-ascend issue 2146's shape)
    (_traceback(_VLLM, '  File "/usr/lib/python3.10/site-packages/acme_turbo/adaptor/vllm/weight_utils.py", line 94, '
                'in postprocess_loading\n    func(self)\n', _PLUGIN,
                '  File "/usr/lib/python3.11/site-packages/vllm/model_executor/model_loader/default_loader.py", line '
                '198, in _get_weights_iterator\n    weights_iterator = safetensors_weights_iterator(\n')
     + "TypeError: wrapper_weights_iterator.<locals>._safetensors_weights_iterator() takes 1 positional argument but 2 "
     "were given", ["vLLM's code calls `safetensors_weights_iterator`",
                    "`wrapper_weights_iterator.<locals>._safetensors_weights_iterator`", "`acme_turbo`"]),
    # a plugin's submodule the installed plugin release does not have
    ("ModuleNotFoundError: No module named 'vllm_acme.ops.rotary_embedding'", ["vllm_acme.ops.rotary_embedding"]),
])  # fmt: skip
def test_an_interface_a_caller_and_vllm_disagree_on_is_wrapper_api_mismatch(log, names):
    family, rule, text = _report(log)
    assert family == "wrapper_api_mismatch" and rule != "KVD399", text  # a rule's, not the nearest report's guess
    for name in names:
        assert name in text, (name, text)


def test_every_mismatch_the_log_shows_is_named():
    log = ("AttributeError: 'CacheConfig' object has no attribute 'calculate_kv_scales'\n\nand for pooling models:\n"
           "AttributeError: type object 'Pooler' has no attribute 'for_embed_legacy'\n")
    family, rule, text = _report(log)
    assert family == "wrapper_api_mismatch" and rule != "KVD399"
    assert "calculate_kv_scales" in text and "for_embed_legacy" in text


@pytest.mark.parametrize("log", [
    # a value that is missing, not an interface
    _traceback(_PROGRAM, _VLLM) + "AttributeError: 'NoneType' object has no attribute 'prompt_lookup_min'",
    _traceback(_PROGRAM) + "AttributeError: 'str' object has no attribute 'items'",
    _traceback(_VLLM, _PLUGIN) + "AttributeError: 'NoneType' object has no attribute 'kv_cache_config'",
    # a program's own class, under vLLM's frames: no plugin, no vLLM name, no class vLLM defines
    _traceback(_PROGRAM, _VLLM) + "AttributeError: 'RewardModel' object has no attribute 'score_head'",
    # vLLM's own code treating its config object as a dict: no release has the member, every frame is vLLM's
    _traceback(_VLLM) + "AttributeError: 'CacheConfig' object has no attribute 'get'",
    # transformers' and torch's interfaces, raised in their own code
    _traceback(_PROGRAM, _TRANSFORMERS) + "AttributeError: 'Qwen2TokenizerFast' object has no attribute "
    "'apply_chat_template_v2'",
    "AttributeError: 'PreTrainedTokenizerFast' object has no attribute 'chat_template_kwargs'",
    _traceback(_PROGRAM, _TORCH) + "TypeError: Linear.forward() got an unexpected keyword argument 'lora_mapping'",
    "TypeError: Tensor.view() takes 2 positional arguments but 3 were given",
    # vLLM's code calling a bare function (torch's softmax; vLLM has one of that name too) with a keyword it lacks
    _traceback(_VLLM) + "TypeError: softmax() got an unexpected keyword argument 'dtype_out'",
    "ImportError: cannot import name 'LogitsWarper' from 'transformers.generation.logits_process'",
    "ModuleNotFoundError: No module named 'vllm_acme'",
])  # fmt: skip
def test_the_same_shapes_on_other_interfaces_are_not_claimed(log):
    family, rule, text = _report(log)
    assert rule not in ("KVD422", "KVD403"), text


def test_a_specific_family_still_wins():
    log = "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'compilation_config'"
    report = explain_text(log)
    assert report.extra["primary"]["rule_id"] == "KVD379"


@pytest.mark.parametrize("log, names", [
    # Python < 3.10 names no class: the innermost frame's code line says what it constructs
    (_traceback(_PROGRAM, '  File "/models/patched_model.py", line 120, in __init__\n'
     '    self.experts = FusedMoE(num_experts=8, reduce_results=True)\n')
     + "TypeError: __init__() got an unexpected keyword argument 'reduce_results'", ["FusedMoE", "reduce_results"]),
    # a plugin's platform class lacking a method vLLM's Platform declares abstract (3.12's wording, then 3.8's)
    ("TypeError: Can't instantiate abstract class AcmePlatform without an implementation for abstract method "
     "'get_attn_backend_cls'", ["AcmePlatform", "get_attn_backend_cls"]),
    ("TypeError: Can't instantiate abstract class AcmePlatform with abstract methods get_attn_backend_cls",
     ["AcmePlatform", "get_attn_backend_cls"]),
    # a positional parameter a newer release inserted before the one the caller passes by keyword
    (_traceback(_PROGRAM) + "TypeError: SamplingParams.__init__() got multiple values for argument 'n'",
     ["SamplingParams", "'n'"]),
])  # fmt: skip
def test_older_wordings_and_abstract_methods_are_interface_drift_too(log, names):
    family, rule, text = _report(log)
    assert family == "wrapper_api_mismatch" and rule != "KVD399", text
    for name in names:
        assert name in text, (name, text)


@pytest.mark.parametrize("log", [
    "TypeError: Can't instantiate abstract class MyDataset with abstract method __len__",
    "TypeError: Can't instantiate abstract class MyHead without an implementation for abstract method 'forward'",
    _traceback(_PROGRAM) + "TypeError: __init__() got an unexpected keyword argument 'lr'",
])  # fmt: skip
def test_abstract_classes_and_bare_constructors_of_other_interfaces_are_not_claimed(log):
    family, rule, text = _report(log)
    assert rule != "KVD422", text
