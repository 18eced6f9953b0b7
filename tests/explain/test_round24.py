"""Round 24 of issue 28 (logs batches 51-52): torch's allocator sentence quoted without its "CUDA out of memory."
opening; vLLM 0.6's world-size check, met when vLLM runs inside another distributed launcher; the multimodal
placeholder count vLLM's model code and the processor disagree on; vLLM 0.2-0.3's DeviceConfig finding no device;
Python's resource tracker printing an exception and carrying on; pydantic v1's validation lines."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text


def _first(text: str):
    report = explain_text(text)
    assert report.exit_code("error") == 1
    return report.findings[0], report.extra.get("family")


def test_the_allocator_sentence_without_its_opening_is_an_out_of_memory():
    first, family = _first("    Tried to allocate 136.00 MiB. GPU 0 has a total capacity of 22.36 GiB of\n"
                           "    which 120.88 MiB is free. ... If this problem persists, try setting\n")
    assert family == "oom_profiling"
    assert "136.00 MiB" in first.title and "22.36 GiB" in first.cause


def test_a_launcher_world_larger_than_tensor_times_pipeline_names_both_and_the_release_that_lifts_it():
    first, family = _first("[rank1]: **RuntimeError: world_size (8) is not equal to tensor_model_parallel_size (4) x "
                           "pipeline_model_parallel_size (1)**\n")
    assert (first.rule_id, family) == ("KVD450", "parallel_divisibility")
    assert "8 ranks" in first.cause and "4 x 1" in first.cause
    assert any("0.7.3" in fix.title and "external_launcher" in fix.title for fix in first.fixes)


def test_a_placeholder_count_the_encoder_does_not_match_is_a_request_failure_with_both_counts():
    first, family = _first("ValueError: Attempted to assign 1 x 729 = 729 multimodal tokens to 730 placeholders\n")
    assert (first.rule_id, family) == ("KVD451", "first_request_failure")
    assert "730 multimodal placeholder" in first.title and "729 embeddings" in first.title
    assert "transformers" in first.cause


def test_vllm_0_3s_device_config_finding_no_device_is_no_gpu_visible():
    first, family = _first('  File "/workspace/code/vllm/vllm/config.py", line 484, in __init__\n'
                           '    raise RuntimeError("No supported device detected.")\n'
                           "RuntimeError: No supported device detected.\n")
    assert (first.rule_id, family) == ("KVD350", "no_gpu_visible")


TRACKER = """\
(VllmWorkerProcess pid=445420) INFO 06-21 19:23:24 pynccl.py:63] vLLM is using nccl==2.20.5
Traceback (most recent call last):
  File "/usr/lib/python3.10/multiprocessing/resource_tracker.py", line 209, in main
    cache[rtype].remove(name)
KeyError: '/psm_ed65b7e3'
"""


def test_pythons_resource_tracker_printing_and_carrying_on_is_no_failure():
    assert explain_text(TRACKER).exit_code("error") == 0
    # the same traceback raised in vLLM's own code is one
    own = TRACKER.replace("multiprocessing/resource_tracker.py", "vllm/distributed/device_communicators/shm.py")
    assert explain_text(own).exit_code("error") == 1


def test_a_pydantic_v1_validation_line_is_a_failure_line():
    report = explain_text("Please use Flashinfer backend for models with logits_soft_cap (i.e., Gemma-2). Otherwise, the "
                          "output might be wrong. Set Flashinfer backend by export VLLM_ATTENTION_BACKEND=FLASHINFER. "
                          "(type=value_error)\n")
    assert report.exit_code("error") == 1
    assert explain_text("INFO 05-02 10:22:18 [api_server.py:1] field type=value_error counted 0\n").exit_code("error") == 0
