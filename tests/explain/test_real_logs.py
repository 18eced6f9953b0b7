"""Real failure logs from public threads (tests/fixtures/logs_real, seen entries only): the family and the
values the thread's error lines name. Held-out entries are measured by tools/measure_explain.py, not here."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "fixtures" / "logs_real"
MIN_SHARE = 0.9
# Known misses: seen logs of a batch that explain did not get right when the batch was added (mostly failure
# families explain has no family for yet). They stay measured (tools/measure_explain.py --batch N) but are kept out
# of the share below, so the bar for the logs before them does not move; drop a name once explain gets it right.
# Batch 5 (issue 28): 31 of its 37 seen logs; batch 6: 9 of its 12; batch 7: 1 of its 2. Round 4 (E3): 39 of the 41
# now explained and dropped; the two left need what their logs do not show (a notebook's other process, a
# request's template error cut from the log). Batch 8: 16 of its 41 seen logs, measured before any fix. Batch 9: 4
# of its 14 seen logs, measured before any fix. Round 5: all 20 explained and dropped, and the notebook's OOM
# allocating the KV cache (where it surfaced decides: KVD401). Batch 10: 6 of its 19 seen failing logs, measured
# before any fix (at d5cc2a5); its one healthy seen miss (of 7) is in KNOWN_HEALTHY_MISSES below. Round 6: four of
# the six explained and dropped (full-width punctuation, NPU OOM, a get_config wording, NumPy's ABI, a client's error),
# then verl's bare rope_scaling assert (a raise-site claim quotes the failed assert).
# Batch 11: 4 of its 11 seen failing logs, measured before any fix (at 4ad10a5); its one healthy seen miss (of 2) is
# in KNOWN_HEALTHY_MISSES below.
# Batch 12 (logs from 30 projects outside vllm-project/vllm): 15 of its 27 seen logs, measured before any fix (at
# 0e36f2f, the cut), none of them healthy. Round 6 after them: batch 11's C++ check failure (exit 0 before) and batch
# 12's prompt-length refusal a client printed (a round-6 regression at the cut) dropped; then five of batch 12's six
# wrapper_api_mismatch logs (names a program imports or reaches into, a framework client's 404, serving entry points),
# and the Ascend placement group that never formed (exit 0 before: Ray's GCS failures, NPU wording); then a traceback
# cut at its raise (LoRA refusal), the hybrid spec unification, TRL's device choice, and an unknown failure quoting the
# code line that failed.
# Batch 13 (staged outside the repo while round 6 ran): 10 of its 21 seen logs, measured before any fix on them (at
# the cut), none healthy.
KNOWN_MISSES = frozenset({
    # batches 55-56 (stop 52), measured as they came: a libcuda not on LD_LIBRARY_PATH seen only as no device, an
    # NCCL library path's load failure, a Ctrl-C tail whose cause the thread gives, a kernel's sm100f-only refusal
    # read as no kernel image, Ray's no-GPU node read as placement, a Jetson image tag cut from its error
    "libcuda_missing__kinetic_269.log", "other__trl_3925.log", "oom_profiling__vllm_15469.log",
    "quant_kernel_scheme__vllm_pr39712.log", "ray_driver_no_gpu__vllm_29265.log", "driver_too_old__jetsonailab_421.log",
    "chat_template_missing__agentlightning_57.log",
    "gpu_memory_occupied__vllmomni_469.log",
    "no_gpu_visible__kserve_3769.log",
    "other__llmscaler_361.log",
    "other__vllm_28950.log",
    "other__vllm_49920.log",
    "pp_unsupported__vllmascend_2712.log",
    "wrapper_api_mismatch__arcticinference_pr48.log",
    "wrapper_api_mismatch__unslothzoo_pr783.log",
    "moe_kernel_selection__vllm_pr39825.log",  # batch 15
    "parallel_divisibility__gpustack_2259.log",  # batch 15
    # batch 16: the frames (DeepseekV2DecoderLayer's) are ERROR records; the exception line after them, taken from the
    # issue's title, has no record header and no 'Traceback' line, so nothing ties it to them (an edited paste)
    "other__dgxsparklocalllm_vllmrun1oom.log",  # batch 17: OOM killer; the log just stops during torch.compile
    # batch 17: KVD321 names it since round 15, but at the first request the corpus's convention is first_request_failure
    # (first_request_failure__vllm_7714 is a kv_dtype_backend rule at request time): the two labels disagree
    "head_size_smem__exactijcnn_vllmserverlog.log",
    "host_memory__gpullminferenceplatform_vllmcrash.log",  # batch 18 (label inferred from the repository's notes)
    "cache_dir_permission__vllm_9118.log",  # batch 19: the permission error surfaces at a request (first_request)
    "kv_cache_too_small__openrlhf_336.log",  # batch 19: the excerpt ends in the traceback, before the message
    "max_model_len_derived__vllmgb10_7.log",  # batch 19: a device-side assert; the long max_model_len is not in the log
    "other__aibrix_1433.log",  # batch 19
    "other__productionstack_782.log",  # batch 19: a one-line log of a pod the OOM killer stopped (the cause is in k8s)
    "wrapper_api_mismatch__vime_pr22.log",  # batch 19: the method name is only in the thread
    # batch 21: a head node's log that stops while loading (the cause, a forced MoE backend, is in the worker's log);
    # a one-line 'Engine core initialization failed' wrapper whose cause is only in the thread; the LLVM diagnostic
    # ('Unsupported conversion from f16 to f16') under a failure at the first request (first_request_failure quotes the
    # exception, not the bare line above LLVM ERROR)
    "moe_kernel_selection__dsparkgx10_phasec_head.log",
    "libcuda_missing__vllm_30392.log",
    # batch 23, measured at the stop's end: a shared-memory broadcast wait excerpt on Ascend whose notice is not in
    # the report; an OOM at profiling read as another process holding the GPU, and the reverse (the label from the
    # thread); the CUDA 12.8 a FlashInfer JIT needs, named only in the thread
    "other__vllmascend_10591.log",
    "oom_profiling__vllm_42147.log",
    "flashinfer_jit_toolkit__flashinfer_3674.log",
    "gpu_memory_occupied__vllm_2248.log",
    # thread-labelled: the selector's refusal names the backend but the log never names the KV dtype the thread
    # requested (nvfp4 on SM120; turboquant_k8v4 under Gemma-4's forced TRITON_ATTN), so its family cannot be read
    "nvfp4_kv__vllm_pr49818.log",
    "turboquant__vllm_40094.log",
    # batches 24 and 25 (measured whole at the stop's start, then round 17 on their seen part): a bare AssertionError
    # whose cause (an expert width TP slices to one FlashInfer's FP4 MoE kernel does not take) is only in the thread;
    # a CK-tile rmsnorm segfault whose kernel name is on a line the report does not quote; Ray's 'Current node has no
    # GPU available', which the corpus labels device_placement twice and this thread ray_driver_no_gpu
    "parallel_divisibility__flashinfer_3206.log",
    "other__aiter_4302.log",
    "ray_driver_no_gpu__kuberay_2354.log",
    # batch 26: the KV cache too small for max_model_len, whose reason (a second vLLM service holding the GPU) only
    # the repository's own audit names
    "gpu_memory_occupied__clawd_vllmduplicateaudit.log",
    # batch 28 (measured whole at f2f6824 before any explain change; its seen misses): a start-up cut before its
    # error, whose cause (MiniMax-M3 without SupportsPP under --pipeline-parallel-size 7) only the thread's title says;
    # a message-less AssertionError whose cause (Dynamo's patched vLLM without speculative decoding) only a maintainer
    # says; a torch.compile cache write failing with "Disk quota exceeded" under $HOME (an OSError no family reads as a
    # cache-directory problem yet); --numa-bind under srun's CPU binding (vLLM's NUMA detection error, no family); an
    # OOM at a 32K request after start-up at --gpu-memory-utilization 0.94, which the repository's README, not the
    # log, ties to the utilisation
    "pp_unsupported__vllm_45455.log",
    "spec_decode_config__dynamo_331.log",
    "cache_dir_permission__jupiterglm52_home_quota.log",
    "serve_args__jupiterglm52_slurm_numa.log",
    "other__jupiterglm52_hbm094.log",
    # batch 29 (measured whole with explain as of 5e0ad7c before any explain change; its seen misses): tensor + data
    # parallel under GPUStack ending in an IndexError whose cause only the title gives; TRL's vllm-serve on
    # three visible GPUs at TP 2 cut before its NCCL error (the last lines are 200 OKs); rLLM/verl finding "0 actors"
    # with vLLM 0.9.2, which only a maintainer ties to the vLLM version
    "device_placement__gpustack_2501.log",
    "device_placement__trl_3706.log",
    "wrapper_api_mismatch__rllm_158.log",
    # batch 30 (2024-2025 era, measured whole at a78a818 before merging; its seen misses): vLLM 0.4's refusal of a
    # sliding-window model with prefix caching, right family but the report does not name the command's
    # --enable-prefix-caching; vLLM 0.6.0's CPU Torch SDPA refusing Gemma 2's logits soft cap, whose similar reports
    # lend it another family; a one-line Marlin refusal under Xinference that reads as the kernel-scheme family, labelled
    # the minimum-capability one (the same message is both)
    "other__vllm_8660.log",
    "quant_min_capability__xinference_2350.log",
    # (batch 32's llmcompressor_2163 and batch 34's llmscaler_415 left this list in stop 42: a constructor that raised
    # names the class it was building, and a traceback through quantization methods is quant_kernel_scheme)
    # batch 36 (measured whole before any change: 17/26; its seen misses after stop 42's MoE frames and NVML OOM): a
    # segfault right after platform detection whose cause (vLLM built for another torch) only the doc gives; an Ascend
    # stream-resources error quoted without its code; TRL's same-device refusal, which no rule knows
    "vllm_c_abi_mismatch__xinference_torch29_segfault.log",
    "other__vllmascend_faq_aclgraph_stream_resources.log",
    "device_placement__trl_vllm_integration_same_device.log",
    # batch 37 (measured whole before any change: 16/27; its seen misses after the bare argparse line, the divisibility
    # words and a traceback printed after its own error): one-line quotes from docs whose family only the doc's prose
    # gives (xgrammar's 'Unsupported JSON Schema structure false', a Hub 429, Neuron's packed-KV refusal, KeyError
    # 'gemma4', a Jinja namespace() crash at a request, Marlin's min-thread check after a TP split) and an NCCL plugin
    # abort whose quoted lines stop before ncclCommInitRank's own error
    "structured_output_schema__nemogym_tool_schema_false.log",
    "kv_dtype_backend__vllmneuron_llama70b_fp8_unpacked_kv.log",
    "transformers_unknown_arch__gemma4vertex_runbook_keyerror.log",
    "first_request_failure__gemma4vertex_runbook_jinja_namespace.log",
    "parallel_divisibility__qwen36dual3090_marlin_min_thread_n.log",
    "other__cylonlocalinfra_spark_tp2_nccl_plugin_abort.log",
    # batches 41-42 (stop 44), seen misses left after the mechanisms they prompted (prose quoting an exception in
    # backticks, huggingface_hub's exception classes, the base Platform's NotImplementedError, the start-up stage, V0's
    # zero GPU blocks): an XPU device lost after an out-of-resources line, an async-scheduling assert on ROCm, a
    # TurboQuant .tolist() in CUDA graph capture quoted without its frame, vllm-metal's paged-attention RAM check (not
    # in the index), a bitsandbytes Gemma 3 weight-shape assert, Triton's own CUDA OOM at a first request quoted alone
    "other__b70aithings_xpu_devicelost_aee6e73.log",
    "other__rocmaic_recompute_async.log",
    "turboquant__qwen3627bsingle3090_tolist.log",
    "gpu_memory_occupied__homelabllm_vllmmetal_paged.log",
    "other__zhenlan0426ari2025_vllm.log",
    "first_request_failure__joshua8_qwen35_35b_rtx5090.log",
    # batch 43 (stop 44), seen misses left after KVD446 (a feature V1 refuses) and KVD447 (a backend's KV-dtype assert):
    # a SpeculativeConfig refusal the corpus files under spec_decode_config where another seen log has it as
    # serve_args, a DeepGEMM helper a fork's fp8 path no longer finds, an MLA prefill selector with no backend for
    # 64-wide heads, vllm-metal's KeyError 'METAL' at a request, a hybrid config without layers_block_type
    "spec_decode_config__dsv41quadspark_dspark_k7.log",
    "wrapper_api_mismatch__nemorl_vllm020_fp8_remainder_cuda.log",
    "head_size_smem__skyrl_vllm026_mla_prefill_dims.log",
    "device_placement__vllmmetal_distinf_keyerror_metal.log",
    "model_config_missing__nemorl_evalfix_hybrid_layers_block_type.log",
    # batch 44 (stop 45), seen misses: a reporter's retyped KV-fit message ('max sew len'), an lm-eval request over max_model_len read as a first-request failure, AWQ's GEMV layout
    # (a weight-shape error), Ray Serve's engine_kwargs 'task' refused, verl's disable_mm_preprocessor_cache refused;
    # and a recipe's cut FlashInfer TRT-LLM MoE traceback whose family only similarity gave (the cut traceback is
    # now one failure with its C++ check line, which no rule knows)
    "kv_cache_too_small__langchain_17906.log",
    "prompt_exceeds_max_model_len__lmeval_3134.log",
    "quant_kernel_scheme__autoawq_452.log",
    "serve_args__ray_64466.log",
    "wrapper_api_mismatch__verl_1469.log",
    "moe_kernel_selection__recipes_minimaxm2_b200_ngroup.log",
    # batches 53-54 (stop 51), seen misses: DeepGEMM's JIT handing CUDA an invalid image on SM121 (read as a PTX/driver
    # mismatch; the thread blames the MoE kernel choice), a download traceback cut before its PermissionError, a
    # multimodal budget warning followed by a device-side index assert (no rule ties the two), a GGUF start-up cut
    # before its error (exit 0, the cut-log class)
    "moe_kernel_selection__vllmgb10_27.log",
    "cache_dir_permission__infbenchmarker_30.log",
    "other__vllm_11958.log",
    "gguf_arch_unsupported__vllm_18382.log",
    # batches 57-58 (stop 53), seen misses: a CUDA "peer access is not supported" read generically (the thread's
    # init_device frame is cut), a KubeRay pod stuck in Init (a hang with no error line), a sleep-mode crash cut before
    # its error, and an xgrammar + draft-model IndexError that similarity files under device placement
    "other__dynamo_1229.log",
    "other__kuberay_3414.log",
    "other__vllm_28714.log",
    "spec_decode_config__vllm_11484.log",
})
# Healthy seen logs that explain reported as a failure (exit 1) when their batch was added; the exit-0 test below
# skips them so it stays a bar for the logs before them. Batch 10: a bare "No available shared memory broadcast
# block found in 60 seconds" wait notice (exit 1, KVD399); round 6 counts the notice only once it repeats (a hang) and
# drops it. Batch 11: a 400 Bad Request after a 200 at a running server (exit 1, first_request_failure); round 6
# dropped it (a 4xx at an endpoint that already served is the request's fault). Drop a name once explain exits 0 on it.
KNOWN_HEALTHY_MISSES: frozenset[str] = frozenset({
    # batch 72: SAGE's committed vllm.log, up and serving, then its shell reports the server `Killed`; the gatherer
    # labelled it healthy (an external kill after serving), the exit contract reads the SIGKILL as failure evidence
    # (KVD461: killed from outside after vLLM was up)
    "healthy_other__sage_vllm_log_dfa22ba.log",
    # batch 44: a DSPy client's 404 from a server started as the plain api_server (the label calls vLLM healthy; explain
    # reads the refused request as a first-request failure: no line shows the server up before it)
    "healthy_other__dspy_1242.log",
    # batch 42: a notebook's healthy V100 start-up (bf16 -> fp16, V1 -> V0) whose user then calls a method the LLM
    # class does not have: explain names the interface mismatch (wrapper_api_mismatch), the label calls the run healthy
    "healthy_other__huazetangicl_testvllm.log",
    # batch 21: a TP worker's log ending in torch's TCPStore 'Broken pipe' warnings (with C++ stacks) after its head
    # node was stopped on purpose; the same lines end other__gpustack_6019 (failing: the head died), and the worker's
    # log cannot tell a planned stop of its peer from a crash
    "healthy_other__dsparkgx10_prestop_worker.log",
    # batch 28: TRL's client giving up on a `trl vllm-serve` server that was never started ("can't be reached ...
    # after 120.0 seconds"); the gatherer labelled it healthy (vLLM did not fail), explain reads the client's error
    "healthy_other__unsloth_2173.log",
    # batch 29: DSPy's client log of a 400 (extra_forbidden `port`/`url` in the request body) from a vLLM 0.4.2 that
    # kept serving; the gatherer labelled it healthy (the client's fault), while batch 28's gatherer labelled the same
    # kind of 400 (extra_forbidden `functions`, other__runpodworkervllm_85) a failure: the labels disagree
    "healthy_other__dspy_974.log",
    # batch 30: a client script's KeyError after a 404 from a running OpenAI server (it POSTed to the legacy /generate);
    # the gatherer labelled it healthy, explain reads the client's traceback as a failure
    "healthy_other__vllm_5082.log",
    # batch 34: LlamaIndex's client log of a 400 (extra_forbidden tools.N.function.strict) from a vLLM 0.9.1 that kept
    # serving; labelled healthy after batch 29's DSPy 400, while batch 28 labelled the same kind of 400 a failure
    "healthy_other__llamaindex_19121.log",
    # batch 36: a benchmark client's ERROR record of a 400 (a plain string where the chat API takes an image_url) from
    # a vLLM-Ascend server that kept serving; labelled healthy like batch 34's, while the exit contract reads the
    # client's ERROR line as failure evidence
    "healthy_other__vllmascend_aisbench_image_path.log",
    # batch 38: a project's own test harness printing its failed chat test ("✗ 聊天对话 (/v1/chat/completions)") for a
    # base model with no chat template, against a server that served the rest; the exit contract reads the harness's
    # failure line as failure evidence
    "other__hanchigao_chattest.log",
    # batch 39: vLLM-Ascend v0.7.1rc1's release notes quote "No platform detected, vLLM is running on
    # UnspecifiedPlatform" as harmless in that release (the plugin registers its platform later); the same line is
    # the failure in other logs (no_gpu_visible), and the log alone cannot tell them apart
    "healthy_other__vllmascend_v071rc1_unspecified_platform.log",
    # batch 40: production-stack's router answering a request with '"error": "Model ... not found or vLLM engine is
    # sleeping."' while the engine sleeps on purpose (sleep mode, 200 on /sleep); a client-facing error line the exit
    # contract reads as failure evidence
    "healthy_other__prodstack_sleep_router_model_not_found.log",
    # batch 49: a CPU server logging "Chat template warmup failed" (a ChatTemplateResolutionError traceback, the head
    # of the log cut) and serving 200s after; and olmocr's pipeline failing on a missing img2pdf after vLLM came up:
    # the exit contract reads both tracebacks as failure evidence
    "healthy_other__vllm_pr31968.log",
    "healthy_other__olmocr_373.log",
    # batch 56: a client's malformed chat request refused (400) after serving; its traceback is failure evidence
    "healthy_other__mistralvibe_114.log",
    # batch 58: a multi-image request refused (400, the default image limit) at a server that serves 200s; the excerpt
    # ends before the client's error and the 400 is read as the first request failing
    "healthy_other__vllm_9739.log",
})


@functools.lru_cache(maxsize=1)
def _measure():
    spec = importlib.util.spec_from_file_location("measure_explain", ROOT / "tools" / "measure_explain.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _seen():
    from kvdoctor.base.yaml_safe import load_yaml

    index = LOGS / "index.yaml"
    if not index.is_file():
        return []
    return [e for e in load_yaml(index.read_text()) if not e.get("heldout") and (LOGS / e["file"]).is_file()]


_JUDGED: dict[str, tuple[bool, str]] = {}


def _judged(entry: dict) -> tuple[bool, str]:
    """measure_explain's verdict on a seen log, once per test session (two tests read the healthy ones)."""
    if entry["file"] not in _JUDGED:
        _JUDGED[entry["file"]] = _measure().judge(entry)
    return _JUDGED[entry["file"]]


@pytest.mark.skipif(not _seen(), reason="no real-log fixtures")
def test_seen_real_logs_are_explained():
    results = [(entry["file"], *_judged(entry)) for entry in _seen() if entry["file"] not in KNOWN_MISSES]
    missed = [f"{name}: {detail}" for name, ok, detail in results if not ok]
    share = 1 - len(missed) / len(results)
    assert share >= MIN_SHARE, "\n".join(missed)


@pytest.mark.skipif(not _seen(), reason="no real-log fixtures")
def test_every_healthy_seen_log_exits_zero():
    for entry in _seen():
        if entry.get("failure") is False and entry["file"] not in KNOWN_HEALTHY_MISSES:
            ok, detail = _judged(entry)
            assert ok, (entry["file"], detail)


def test_known_misses_are_seen_failing_logs():
    entries = {e["file"]: e for e in _seen()}
    stale = sorted(name for name in KNOWN_MISSES if name not in entries or entries[name].get("failure") is False)
    assert not stale, stale


def test_known_healthy_misses_are_seen_healthy_logs():
    entries = {e["file"]: e for e in _seen()}
    stale = sorted(
        name for name in KNOWN_HEALTHY_MISSES if name not in entries or entries[name].get("failure") is not False
    )
    assert not stale, stale
