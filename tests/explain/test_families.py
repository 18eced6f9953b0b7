"""Every failure family in kvdoctor/explain/families.yaml: a log that fires it (with the log's values in the
cause) and a near miss that must not."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.families import flexible_spaces, load_families

E = "ERROR 05-02 10:22:18 [core.py:396] "

# rule -> (log, family, texts the report's primary cause/title/evidence must contain)
FIRES = {
    "KVD312": ("ValueError: Selected backend AttentionBackendEnum.FLASHINFER is not valid for this configuration. "
               "Reason: ['head_size not supported']", "head_size_smem", ["FLASHINFER", "head size"]),
    "KVD313": ("ValueError: FP8 KV cache is not supported by the Triton attention backend on\nQuadro RTX 8000 "
               "(compute capability 7.5); native FP8 (fp8e4nv) requires SM89+.", "kv_dtype_backend",
               ["SM89", "7.5", "Quadro RTX 8000"]),
    "KVD314": ("ValueError: --kv-cache-dtype nvfp4 requires sm100f", "nvfp4_kv", ["nvfp4", "sm100f"]),
    "KVD320": ("AssertionError: Sinks are only supported in FlashAttention 3", "attention_sinks", ["FlashAttention 3"]),
    "KVD321": (E + "RuntimeError: This flash attention build does not support headdim not being a multiple of 32.",
               "head_size_smem", ["multiple of 32"]),
    "KVD330": ("ValueError: Failed to find a kernel that can implement the WNA16 linear layer. Reasons:\n"
               " MarlinLinearKernel cannot implement due to: Marlin only supported on CUDA",
               "quant_kernel_scheme", ["WNA16"]),
    "KVD331": ("Value error, The quantization method mxfp4 is not supported for the current GPU. Minimum "
               "capability: 100. Current capability: 86.", "quant_min_capability",
               ["the mxfp4 method needs SM 10.0; this GPU is SM 8.6"]),
    "KVD332": ("ValueError: torch.bfloat16 is not supported for quantization method gptq. Supported dtypes: "
               "[torch.float16]", "quant_kernel_scheme", ["gptq", "torch.bfloat16", "[torch.float16]"]),
    "KVD333": ("ValueError: Quantization scheme is not supported for the current GPU. Min capability: 80. Current "
               "capability: 75.", "quant_min_capability", ["needs SM 8.0; this GPU is SM 7.5"]),
    "KVD340": ("triton.runtime.errors.PTXASError: PTXAS error: Internal Triton PTX codegen error\n"
               "ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'", "triton_ptxas_too_old",
               ["sm_121a"]),
    "KVD341": ("/usr/bin/ld: cannot find -l:libcuda.so.1\ncollect2: error: ld returned 1 exit status",
               "libcuda_missing", ["libcuda.so.1"]),
    "KVD342": ("torch.AcceleratorError: CUDA error: the provided PTX was compiled with an unsupported toolchain.",
               "ptx_newer_than_driver", ["unsupported toolchain"]),
    "KVD343": ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
               "calling NumCudaDevices() that might have already set an error? Error 803: system has unsupported "
               "display driver / cuda driver combination", "cuda_compat_803", ["803"]),
    "KVD344": ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update your "
               "driver to a newer version", "driver_too_old", ["12.4"]),
    "KVD345": (E + "RuntimeError: No supported CUDA architectures found for major versions [10].",
               "flashinfer_jit_toolkit", ["[10]"]),
    "KVD346": ("RuntimeError: cudaErrorNoKernelImageForDevice", "no_kernel_image", ["no SASS or PTX"]),
    "KVD350": ("RuntimeError: Failed to infer device type", "no_gpu_visible", ["Failed to infer device type"]),
    "KVD360": ("ValueError: Free memory on device (31.44/47.38 GiB) on startup is less than desired GPU memory "
               "utilization (0.95, 45.01 GiB). Decrease GPU memory utilization", "gpu_memory_occupied",
               ["31.44", "47.38", "0.95", "45.01"]),
    "KVD361": ("ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV "
               "cache is needed, which is larger than the available KV cache memory (0.71 GiB). Based on the "
               "available memory, the estimated maximum model length is 5632.", "kv_cache_too_small",
               ["131072", "16.00", "0.71", "--max-model-len 5632"]),
    "KVD362": ("ValueError: The model's max seq len (29000) is larger than the maximum number of tokens that can "
               "be stored in KV cache (23648).", "kv_cache_too_small", ["29000", "23648"]),
    "KVD363": ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.74 GiB. GPU 1 has a total capacity "
               "of 23.57 GiB of which 605.88 MiB is free. Process 133288 has 22.97 GiB memory in use.",
               "oom_profiling", ["1.74 GiB", "23.57 GiB", "22.97 GiB"]),
    "KVD364": ("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, "
               "cuda:1 and cuda:0! (when checking argument)", "weights_wrong_device", ["cuda:1", "cuda:0"]),
    "KVD365": ("NotImplementedError: Cannot copy out of meta tensor; no data!", "weights_wrong_device",
               ["meta tensor"]),
    "KVD370": ("ValueError: Total number of attention heads (52) must be divisible by tensor parallel size (8).",
               "parallel_divisibility", ["52", "8", "tensor parallel size"]),
    "KVD371": ("RuntimeError: Worker failed with error 'Check failed: args->intermediate_size % 128 == 0 (64 vs. 0) "
               ": the second dimension of weights must be a multiple of 128.', please check the stack trace above "
               "for the root cause", "parallel_divisibility", ["intermediate_size % 128", "64"]),
    "KVD380": ("RuntimeError: query and key must have the same dtype", "spec_draft_kv", ["same dtype"]),
    "KVD385": ("RuntimeError: shape '[512, 64, 576]' is invalid for input of size 21495808", "mla_sparse",
               ["576", "21495808"]),
    "KVD386": (E + "AssertionError('Only FlashAttention backend is supported for now.')", "first_request_failure",
               ["FlashAttention"]),
    "KVD390": ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
               "calling NumCudaDevices() that might have already set an error? Error 802: system not yet "
               "initialized", "other", ["802", "Fabric Manager"]),
    "KVD391": ("terminate called after throwing an instance of 'c10::AcceleratorError'\n  what():  CUDA error: an "
               "illegal memory access was encountered", "other", ["illegal memory access"]),
}

# rule -> a line that looks alike but is not that failure
NEAR_MISSES = {
    "KVD312": "INFO 05-02 10:22:18 [cuda.py:1] Selected backend FLASHINFER for this configuration.",
    "KVD313": "WARNING 05-02 10:22:18 [cuda.py:1] FP8 KV cache on Ampere uses the software conversion path.",
    "KVD314": "INFO 05-02 10:22:18 [arg_utils.py:1] Using --kv-cache-dtype nvfp4 on sm100f.",
    "KVD320": "INFO 05-02 10:22:18 [gpt_oss.py:1] Attention sinks are supported by TRITON_ATTN.",
    "KVD321": "INFO 05-02 10:22:18 [cuda.py:1] head size 128 is supported by FLASH_ATTN.",
    "KVD330": "INFO 05-02 10:22:18 [gptq_marlin.py:1] Using MarlinLinearKernel for GPTQMarlinLinearMethod",
    "KVD331": "INFO 05-02 10:22:18 [config.py:1] The quantization method fp8 is supported for the current GPU.",
    "KVD332": "INFO 05-02 10:22:18 [config.py:1] torch.float16 is supported for quantization method gptq.",
    "KVD333": "INFO 05-02 10:22:18 [compressed_tensors.py:1] Quantization scheme W4A16 is supported for the current GPU.",
    "KVD340": "INFO 05-02 10:22:18 [triton.py:1] ptxas version 12.8 found for sm_120a",
    "KVD341": "INFO 05-02 10:22:18 [triton.py:1] found libcuda.so.1 in /usr/lib64",
    "KVD342": "INFO 05-02 10:22:18 [cuda.py:1] PTX was compiled with CUDA 12.8",
    "KVD343": "INFO 05-02 10:22:18 [cuda.py:1] CUDA forward compatibility libraries not used",
    "KVD344": "INFO 05-02 10:22:18 [env.py:1] requirement satisfied: cuda>=12.4",
    "KVD345": "INFO 05-02 10:22:18 [flashinfer.py:1] Found nvcc at /usr/local/cuda/bin/nvcc",
    "KVD346": "INFO 05-02 10:22:18 [cuda.py:1] kernel image for sm_90 loaded",
    "KVD350": "INFO 05-02 10:22:18 [__init__.py:1] Automatically detected platform cuda.",
    "KVD360": "INFO 05-02 10:22:18 [worker.py:1] Free memory on device (45.01/47.38 GiB) on startup.",
    "KVD361": "INFO 05-02 10:22:18 [kv_cache_utils.py:1] GPU KV cache size: 131072 tokens",
    "KVD362": "INFO 05-02 10:22:18 [kv_cache_utils.py:1] Maximum concurrency for 29000 tokens per request: 2.5x",
    "KVD363": "INFO 05-02 10:22:18 [worker.py:1] Memory profiling takes 3.1 seconds; 1.74 GiB allocated",
    "KVD364": "INFO 05-02 10:22:18 [worker.py:1] all tensors are on cuda:0",
    "KVD365": "INFO 05-02 10:22:18 [loader.py:1] Initialising the model on the meta device first",
    "KVD370": "INFO 05-02 10:22:18 [config.py:1] 64 attention heads over tensor parallel size 8",
    "KVD371": "INFO 05-02 10:22:18 [moe.py:1] intermediate_size 2048 is a multiple of 128",
    "KVD380": "INFO 05-02 10:22:18 [eagle.py:1] query and key dtypes: bfloat16",
    "KVD385": "INFO 05-02 10:22:18 [mla.py:1] KV cache shape [512, 64, 576]",
    "KVD386": "INFO 05-02 10:22:18 [cuda.py:1] Using FlashAttention backend.",
    "KVD390": "INFO 05-02 10:22:18 [cuda.py:1] cudaGetDeviceCount() returned 8",
    "KVD391": "INFO 05-02 10:22:18 [cuda.py:1] CUDA graphs captured; no CUDA errors",
}


def _text(report) -> str:
    parts = list(report.notes)
    for finding in report.findings:
        parts += [finding.title, finding.cause, *finding.evidence]
        parts += [f"{fix.title} {fix.flag or ''} {fix.env or ''}" for fix in finding.fixes]
    return " ".join(" ".join(parts).split())


def test_every_family_rule_has_a_firing_case_and_a_near_miss():
    ids = {rule.id for rule in load_families().rules if rule.severity == "error"}
    assert ids <= set(FIRES), sorted(ids - set(FIRES))
    assert ids <= set(NEAR_MISSES), sorted(ids - set(NEAR_MISSES))


@pytest.mark.parametrize("rule_id", sorted(FIRES))
def test_family_fires_with_the_logs_values(rule_id):
    log, family, values = FIRES[rule_id]
    report = explain_text(log)
    assert report.exit_code("error") == 1
    # a refining rule keeps the rules.yaml rule's id and gives it the log's values
    expected = load_families().refines.get(rule_id, rule_id)
    assert report.extra["primary"]["rule_id"] == expected, report.extra["primary"]
    assert report.extra["family"] == family
    text = _text(report)
    for value in values:
        assert value in text, (value, text[:2000])


@pytest.mark.parametrize("rule_id", sorted(NEAR_MISSES))
def test_near_miss_does_not_fire(rule_id):
    report = explain_text(NEAR_MISSES[rule_id])
    assert rule_id not in {f.rule_id for f in report.findings}
    assert report.exit_code("error") == 0


def test_a_space_in_a_family_pattern_matches_a_wrapped_line():
    import re

    assert re.search(flexible_spaces("KV cache is needed"), "KV cache\nis  needed")
    assert flexible_spaces("[ab ]c d") == r"[ab ]c\s+d"


def test_a_consequence_gives_way_to_its_cause():
    log = ("/usr/lib/python3/site-packages/torch/cuda/__init__.py:128: UserWarning: CUDA initialization: The NVIDIA "
           "driver on your system is too old (found version 11040).\n"
           "RuntimeError: No CUDA GPUs are available\n")
    report = explain_text(log)
    assert report.extra["primary"]["rule_id"] == "KVD303"
