"""The families fed by vLLM's raise sites and the knowledge pack: MoE kernel selection, device placement, hybrid
block sizes, the speculative drafter's KV cache, MLA layouts, torch's architecture list, and the weight-quantization
minimum read from the pack. Every log here is synthetic, made from the message template of a raise site in the vLLM
wheels (file:function named beside it), not copied from a real log."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.family_values import family_values, quant_capability_values

# (synthetic line from the raise site's template, the family, text the report must show)
CASES = [
    # fused_moe/oracle/fp8.py:select_fp8_moe_backend (0.20-0.34)
    ("NotImplementedError: No FP8 MoE backend supports the deployment configuration.", "moe_kernel_selection",
     ["No FP8 MoE kernel", "VLLM_LOGGING_LEVEL=DEBUG"]),
    # fused_moe/oracle/mxfp4.py:select_mxfp4_moe_backend (0.27-0.34): the reasons are in the message
    ("NotImplementedError: No MXFP4 MoE backend supports the deployment configuration. weight_key=kMxfp4Static, "
     "activation_key=None. Candidate backends were: ['FLASHINFER_TRTLLM', 'TRITON']. Unsupported reasons: kernel does "
     "not support current device NVIDIA A10G.", "moe_kernel_selection", ["kernel does not support current device NVIDIA A10G"]),
    # fused_moe/oracle/base.py:return_or_raise via make_log_unsupported (0.34)
    ("ValueError: Fp8 MoE backend 'DEEPGEMM' does not support the deployment configuration since kernel does not "
     "support quantization scheme kFp8StaticChannelSymxkFp8DynamicTokenSym.", "moe_kernel_selection",
     ["the DEEPGEMM backend refused", "quantization scheme kFp8StaticChannelSym"]),
    # v1/executor/ray_utils.py:initialize_ray_cluster
    ("ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group. "
     "Required number of devices: 8. Total number of devices: 4.", "device_placement", ["(needs 8, 4 visible)"]),
    # platforms/interface.py:visible_device_id_to_physical_device_id (0.24-0.34)
    ("IndexError: visible device ordinal 2 is out of range for CUDA_VISIBLE_DEVICES=0,1", "device_placement",
     ["CUDA_VISIBLE_DEVICES=0,1"]),
    # v1/core/kv_cache_utils.py:unify_kv_cache_spec_page_size (0.20-0.23 wording)
    ("NotImplementedError: The page size of the layer is not divisible by the maximum page size. Cannot unify by "
     "adjusting block_size.", "hybrid_block_size", ["Cannot unify by adjusting block_size", "--mamba-cache-mode align"]),
    # models/qwen3_next.py:__init__ (0.20-0.31)
    ("NotImplementedError: Qwen3Next currently does not support 'all' prefix caching, please use "
     "'--mamba-cache-mode=align' instead", "hybrid_block_size", ["Qwen3Next"]),
    # v1/spec_decode/llm_base_proposer.py:propose
    ("ValueError: Unsupported attention metadata type for speculative decoding with num_speculative_tokens > 1: "
     "<class 'FlashInferMetadata'>. Supported types are: (TritonAttentionMetadata,)", "spec_draft_kv",
     ["TritonAttentionMetadata"]),
    # v1/attention/backends/mla/tokenspeed_mla.py:__init__ (0.21-0.34)
    ("NotImplementedError: TokenspeedMLAImpl requires an FP8 KV cache (--kv-cache-dtype fp8 or fp8_e4m3); got "
     "kv_cache_dtype=auto.", "mla_sparse", ["TokenspeedMLAImpl", "--kv-cache-dtype fp8"]),
]


@pytest.mark.parametrize("log, family, shows", CASES, ids=[c[1] + str(i) for i, c in enumerate(CASES)])
def test_a_raise_site_message_is_explained_in_its_family(log, family, shows):
    report = explain_text(log)
    assert report.exit_code("error") == 1
    assert report.extra["family"] == family
    primary = report.findings[0]
    text = " ".join([primary.title, primary.cause, *primary.evidence, *(f"{f.title} {f.flag or ''} {f.env or ''}"
                                                                         for f in primary.fixes)])
    for value in shows:
        assert value in text, (value, text)


@pytest.mark.parametrize("log, family", [
    # fused_moe/oracle/mxfp4.py:select_gpt_oss_mxfp4_moe_backend (0.20): no signature, the raise site claims it
    ("NotImplementedError: Mxfp4 LoRA is currently only supported on CUDA.", "moe_kernel_selection"),
    # v1/executor/ray_utils.py:initialize_ray_cluster
    ("ValueError: Placement group bundle cannot have more than 1 GPU.", "device_placement"),
    # v1/spec_decode/extract_hidden_states.py:_build_attn_metadata_builder
    ("ValueError: No attention layers found for ExtractHiddenStatesModel", "spec_draft_kv"),
])
def test_a_message_without_a_signature_belongs_to_the_family_of_the_function_that_raises_it(log, family):
    report = explain_text(log)
    assert report.extra["family"] == family
    assert any("matched by where vLLM raises it" in e for e in report.findings[0].evidence)


def test_healthy_lines_of_these_subsystems_stay_quiet():
    log = ("INFO 05-02 10:22:18 [fp8.py:1] Using TRITON Fp8 MoE backend out of potential backends: ['TRITON'].\n"
           "INFO 05-02 10:22:19 [interface.py:1] Setting attention block size to 544 tokens to ensure that attention "
           "page size is >= mamba page size.\n"
           "INFO 05-02 10:22:19 [interface.py:1] Padding mamba page size by 1.49% to ensure that mamba page size and "
           "attention page size are exactly equal.\n"
           "INFO 05-02 10:22:20 [ray_utils.py:1] Using ray placement group with 4 GPUs\n")
    report = explain_text(log)
    assert report.exit_code("error") == 0
    assert report.extra.get("family") is None


def test_the_quantization_minimum_and_the_gpus_that_serve_it_come_from_the_pack():
    values = {"method": "fp8", "min_capability": "89", "current_capability": "80"}
    out = quant_capability_values(values, {"vllm.version": "0.34.0"})
    from kvdoctor.vllm_pack.quantization import release_quantization

    fp8 = release_quantization("0.34.0").methods["fp8"]
    assert f"returns {fp8.min_capability} ({fp8.min_capability_where})" in out["pack_text"]
    # every GPU of SM 8.9 or newer in data/gpus.yaml, grouped by capability; none older
    assert out["serving_gpus"].startswith("SM 8.9 (")
    assert "H100" in out["serving_gpus"] and "A100" not in out["serving_gpus"]
    assert "fp8" not in out["usable_methods"].split(": ")[1].split(", ")  # not usable on SM 8.0 when it needs 8.9


def test_a_minimum_that_differs_from_the_release_s_is_said_not_hidden():
    from kvdoctor.vllm_pack.quantization import release_quantization

    mxfp4 = release_quantization("0.25.1").methods["mxfp4"]
    logged = str(mxfp4.min_capability + 10)
    out = quant_capability_values({"method": "mxfp4", "min_capability": logged, "current_capability": "86"},
                                  {"vllm.version": "0.25.1"})
    assert f"not the {logged} the message shows" in out["pack_text"]


def test_without_the_release_the_pack_is_not_cited_and_the_cause_says_why():
    out = quant_capability_values({"method": "mxfp4", "min_capability": "100", "current_capability": "86"}, {})
    assert "does not name the vLLM release" in out["pack_text"]
    report = explain_text("Value error, The quantization method mxfp4 is not supported for the current GPU. Minimum "
                          "capability: 100. Current capability: 86.")
    cause = report.findings[0].cause
    assert "does not name the vLLM release" in cause
    assert "SM 10.0 (B200, GB200)" in cause


def test_torch_s_architecture_warning_gives_the_no_kernel_image_cause_its_values():
    log = ("/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:262: UserWarning:\n"
           "NVIDIA GeForce RTX 5080 with CUDA capability sm_120 is not compatible with the current PyTorch installation.\n"
           "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90.\n"
           "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    report = explain_text(log)
    primary = report.findings[0]
    assert report.extra["family"] == "no_kernel_image"
    assert primary.rule_id == "KVD304"  # check's rule keeps its id, with the values of the explain rule
    assert "sm_120" in primary.title and "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90" in primary.title
    assert "TORCH_CUDA_ARCH_LIST=12.0" in {fix.env for fix in primary.fixes}


def test_family_values_for_a_family_without_extra_knowledge_add_only_clauses():
    assert family_values("other", {}, {}) == {}
    assert family_values("device_placement", {"required": "4", "available": "2"}, {})["visible_list"] == "0,1,2,3"


def test_a_cause_names_the_start_up_facts_that_bear_on_it_or_says_the_log_lacks_them():
    no_gpu = explain_text("export CUDA_VISIBLE_DEVICES=\nRuntimeError: No CUDA GPUs are available").findings[0].cause
    assert "CUDA_VISIBLE_DEVICES empty, which hides every GPU" in no_gpu
    ptx = "torch.AcceleratorError: CUDA error: the provided PTX was compiled with an unsupported toolchain."
    bare = explain_text(ptx).findings[0].cause
    assert "The log shows neither the driver's version nor the CUDA torch was built with" in bare
    with_env = explain_text("CUDA used to build PyTorch: 12.8\nNvidia driver version: 550.54.15\n" + ptx)
    assert "NVIDIA driver 550.54.15; torch built with CUDA 12.8" in with_env.findings[0].cause
    oom = explain_text("INFO 05-02 10:20:01 [gpu_model_runner.py:1] Model loading took 22.5 GiB memory and 3 seconds\n"
                       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.74 GiB. GPU 0 has a total "
                       "capacity of 23.57 GiB of which 605.88 MiB is free.").findings[0].cause
    assert "The log's memory lines: weights 22.5 GiB." in oom


def test_a_bare_assert_lands_in_the_family_of_the_function_its_traceback_ends_in():
    log = ("Traceback (most recent call last):\n"
           '  File "/usr/local/lib/python3.12/dist-packages/vllm/platforms/interface.py", line 901, in '
           "update_block_size_for_backend\n"
           "    assert attn_block_size > 0\n"
           "AssertionError\n")
    report = explain_text(log)
    assert report.extra["family"] == "hybrid_block_size"
    assert any("matched by where vLLM raises it: vllm/platforms/interface.py:update_block_size_for_backend" in e
               for e in report.findings[0].evidence)


def test_shared_memory_numbers_are_said_in_kib():
    log = ("triton.runtime.errors.OutOfResources: out of resource: shared memory,\n"
           "Required: 98304, Hardware limit: 65536.\n")
    report = explain_text(log)
    assert report.exit_code("error") == 1  # Triton's OutOfResources is an exception line, not text
    assert "(96 KiB of shared memory per block needed, 64 KiB on this GPU)" in report.findings[0].title
