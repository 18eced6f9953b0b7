"""Round 9 of issue 28: the mechanisms behind batch 14's seen misses, each on synthetic lines of several shapes written
from the wordings the libraries raise (urllib3, torch, FlashInfer, HAMi-core, ptxas, Ray, vLLM), never one log's text."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.similar_reports import rules_family
from kvdoctor.report.check.text import render


def _text(report) -> str:
    return " ".join(render(report).split())


def _family(log: str) -> str | None:
    """The family the rules give (a similar report may name a likely one on top: similar_reports.py)."""
    return rules_family(explain_text(log))


# the Hub unreachable: urllib3's read / connect timeouts and name resolution, on huggingface.co, its CDN or a mirror
@pytest.mark.parametrize("line", [
    "urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='huggingface.co', port=443): Read timed out. "
    "(read timeout=10)",
    "requests.exceptions.ReadTimeout: (ReadTimeoutError(\"HTTPSConnectionPool(host='cdn-lfs.huggingface.co', "
    "port=443): Read timed out. (read timeout=10)\"), '(Request ID: 1f2e)')",
    "urllib3.exceptions.ConnectTimeoutError: (<urllib3.connection.HTTPSConnection object at 0x7f00>, "
    "'Connection to huggingface.co timed out. (connect timeout=10)')",
    "(Actor pid=7) requests.exceptions.ConnectionError: Failed to resolve 'hf-mirror.com' ([Errno -2] Name or "
    "service not known)",
])
def test_the_hub_unreachable_by_timeout_or_name_is_a_download_failure(line):
    assert _family(line) == "hf_download"


def test_a_timeout_to_another_host_is_not_the_hub():
    assert _family("urllib3.exceptions.ReadTimeoutError: HTTPSConnectionPool(host='pypi.org', port=443): Read "
                   "timed out. (read timeout=15)") != "hf_download"


# a JIT build without its build tool: torch's check, the subprocess that runs ninja, a wrapper's own wording
@pytest.mark.parametrize("line", [
    "RuntimeError: Ninja is required to load C++ extensions (pip install ninja to get it)",
    "FileNotFoundError: [Errno 2] No such file or directory: 'ninja'",
    "RuntimeError: Kernel JIT build failed: ninja (build tool) not found. Install it with pip.",
    "/bin/sh: 1: ninja: not found",
])
def test_a_jit_build_without_ninja_is_the_jit_toolkit_family(line):
    report = explain_text(line)
    assert report.extra["family"] == "flashinfer_jit_toolkit"
    assert "ninja" in _text(report)


# a GPU-sharing layer's own error record before the crash it causes
@pytest.mark.parametrize("log", [
    "[HAMI-core ERROR (pid:12 thread=140 multiprocess_memory_limit.c:900)]: Illegal device id: 4242\n"
    "!!!!!!! Segfault encountered !!!!!!!\n",
    "(Worker pid=3) [HAMI-core ERROR (pid:3 thread=99 libvgpu.c:120)]: cuMemCreate failed: out of device memory\n"
    "Fatal Python error: Segmentation fault\n",
    "[softmig ERROR (pid:8 thread=1 memory.c:77)]: Illegal device id: 9\n",
])
def test_a_gpu_sharing_layers_error_record_is_named_before_the_crash(log):
    report = explain_text(log)
    assert report.exit_code("error") == 1
    text = _text(report)
    assert "GPU-sharing layer" in text
    assert ("Illegal device id" in text) or ("cuMemCreate failed" in text)


# Ray's object store asking more of /dev/shm than the container has: a failure even as a warning record
@pytest.mark.parametrize("log", [
    "[2026-01-02 03:04:05,678 W 39 39] (raylet) store_runner.cc:83: System memory request exceeds memory available "
    "in /dev/shm. The request is for 10200547328 bytes, and the amount available is 9663676416 bytes.\n",
    "(raylet) System memory request exceeds memory available in /dev/shm. The request is for 2000 bytes, and the "
    "amount available is 1000 bytes. You may be able to free up space by deleting files in /dev/shm.\n",
    "W0102 03:04:05.678 39 store_runner.cc:83] System memory request exceeds memory available in /dev/shm.\n",
    # a terminal's hard wrap inside the path
    "(raylet) store_runner.cc:83: System memory request exceeds memory available in /dev/sh\nm. The request is for 2000 "
    "bytes, and the amount available is 1000 bytes.\n",
    # the same class from NCCL and torch: a shared-memory segment that cannot grow, a worker's bus error
    "node1:77:88 [0] misc/shmutils.cc:80 NCCL WARN Error: failed to extend /dev/shm/nccl-Ab12Cd to 9637892 bytes\n",
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n",
])
def test_rays_object_store_larger_than_dev_shm_fails_with_the_shm_fix(log):
    report = explain_text(log)
    assert report.exit_code("error") == 1
    assert report.extra["family"] == "shm_too_small"
    assert "--shm-size" in _text(report)


# a parser name the release does not register (tool-call and reasoning parsers, as KeyError or in an ERROR record)
@pytest.mark.parametrize("line, name", [
    ("KeyError: 'invalid tool call parser: frobnicate (chose from { hermes, mistral })'", "frobnicate"),
    ("ERROR 01-02 03:04:05 [api_server.py:1] invalid reasoning parser: think_v9 (chose from { deepseek_r1, qwen3 })",
     "think_v9"),
    ("TypeError: invalid tool call parser: my_parser (chose from { llama3_json })", "my_parser"),
])
def test_a_parser_name_the_release_lacks_is_a_serve_argument(line, name):
    report = explain_text(line)
    assert report.extra["family"] == "serve_args"
    assert name in _text(report)


# per-request logits processors a framework passes and the engine refuses (V1, V0's multi-step)
@pytest.mark.parametrize("line", [
    "ValueError: vLLM V1 does not support per request user provided logits processors.",
    "ValueError: vLLM V1 does not support per request user-provided logits processors.",
    "ValueError: Logits processors are not supported in multi-step decoding",
    "(EngineCore pid=3) ERROR 01-02 03:04:05 [core.py:1] ValueError: Guided decoding and logits processors are not "
    "supported in multi-step decoding",
])
def test_per_request_logits_processors_refused_is_a_wrapper_api_mismatch(line):
    report = explain_text(line)
    assert report.extra["family"] == "wrapper_api_mismatch"
    assert "logits processor" in _text(report).lower()


# speculative decoding with a draft model refusing a model feature (M-RoPE, multimodal) in any release's wording
@pytest.mark.parametrize("line", [
    "NotImplementedError: Speculative Decoding with draft models or parallel drafting does not support M-RoPE yet",
    "NotImplementedError: Speculative Decoding with draft models does not support multimodal models yet",
    "(Worker pid=5) ERROR 01-02 03:04:05 [multiproc_executor.py:1] NotImplementedError: Speculative Decoding with "
    "draft models does not support M-RoPE yet",
])
def test_a_draft_model_refusing_a_model_feature_is_the_spec_decode_config(line):
    assert _family(line) == "spec_decode_config"


# ptxas refusing a TMA gather / scatter form on a GPU that lacks it: the Triton MoE kernel's routed-row gather
@pytest.mark.parametrize("line", [
    "ptxas /tmp/tmpab.ptx, line 818; error   : Feature '.tile::gather4 with destination state space as "
    ".shared::cluster' not supported on .target 'sm_120a'",
    "ERROR 01-02 03:04:05 [core.py:1] ptxas /tmp/x.ptx, line 3; error : Feature '.tile::scatter4' not supported on "
    ".target 'sm_121a'",
    "triton.runtime.errors.PTXASError: PTXAS error: Internal Triton PTX codegen error\n"
    "ptxas /tmp/y.ptx, line 9; error   : Feature '.tile::gather4' not supported on .target 'sm_89'",
])
def test_a_tma_gather_the_gpu_lacks_is_the_moe_kernel_choice(line):
    report = explain_text(line)
    assert report.extra["family"] == "moe_kernel_selection"
    assert "sm_1" in _text(report) or "sm_89" in _text(report)


def test_another_ptx_feature_refusal_is_not_claimed_for_moe():
    assert _family("ptxas /tmp/z.ptx, line 5; error : Feature 'tcgen05.mma' not supported on .target "
                   "'sm_90a'") != "moe_kernel_selection"


# an unknown failure raised through a family's own module (TurboQuant's backend), Windows and POSIX paths alike
@pytest.mark.parametrize("path", [
    "/venv/lib/python3.12/site-packages/vllm/v1/attention/backends/turboquant_attn.py",
    "C:\\venv\\Lib\\site-packages\\vllm\\v1\\attention\\backends\\turboquant_attn.py",
    "/venv/lib/python3.12/site-packages/vllm/v1/attention/ops/triton_turboquant_decode.py",
])
def test_an_unknown_failure_through_a_familys_module_takes_that_family(path):
    log = ("Traceback (most recent call last):\n"
           f'  File "{path}", line 400, in forward\n'
           "    out = self._decode(q)\n"
           '  File "/venv/lib/python3.12/site-packages/vllm/v1/worker/frobs.py", line 10, in grow\n'
           "    raise AssertionError(msg)\n"
           "AssertionError: frob buffer cannot grow after it is sealed\n")
    report = explain_text(log)
    assert report.extra["family"] == "turboquant"
    assert "frob buffer cannot grow" in _text(report)


def test_an_unknown_failure_elsewhere_stays_other():
    log = ("Traceback (most recent call last):\n"
           '  File "/venv/lib/python3.12/site-packages/vllm/v1/attention/backends/flash_attn.py", line 400, in forward\n'
           "    out = self._decode(q)\n"
           "AssertionError: frob buffer cannot grow after it is sealed\n")
    assert _family(log) == "other"


# where a frame's package starts, whatever folders precede it: a venv in a folder named vllm, a source checkout
@pytest.mark.parametrize("root", [
    "/home/u/vllm/.venv/lib/python3.12/site-packages/",
    "/home/u/src/vllm/",
    "C:\\vllm\\env\\Lib\\site-packages\\",
])
def test_a_frame_under_a_folder_named_vllm_is_read_from_its_package(root):
    sep = "\\" if "\\" in root else "/"
    place = sep.join(["vllm", "v1", "core", "kv_cache_utils.py"])
    claimed = explain_text("Traceback (most recent call last):\n"
                           f'  File "{root}{place}", line 900, in unify_kv_cache_spec_page_size\n'
                           "    assert new_page_size % layer_page_size == 0\n"
                           "AssertionError\n")
    assert claimed.extra["family"] == "hybrid_block_size"
    place = sep.join(["vllm", "v1", "attention", "backends", "turboquant_attn.py"])
    unknown = explain_text("Traceback (most recent call last):\n"
                           f'  File "{root}{place}", line 400, in forward\n'
                           "    out = self._decode(q)\n"
                           "AssertionError: frob buffer cannot grow after it is sealed\n")
    assert unknown.extra["family"] == "turboquant"


# a request-serving place (request_places) on a Windows install
def test_a_request_serving_place_on_a_windows_path_is_a_request_time_failure():
    log = ('File "C:\\py\\site-packages\\vllm\\entrypoints\\openai\\chat_completion\\serving.py", line 90, '
           'in chat_completion_full_generator\n'
           '    final = choices[0]\n'
           'IndexError: list index out of range\n')
    assert _family(log) == "first_request_failure"


# a V0-engine request option the V1 engine refuses (the 0.8-era APIs class beside per-request logits processors)
@pytest.mark.parametrize("log", [
    "ValueError: V1 does not support prompt_adapter_request.\n",
    "(EngineCore pid=3) ERROR 01-02 03:04:05 [core.py:1] ValueError: vLLM V1 does not yet support best_of.\n",
    '  File "/venv/lib/python3.12/site-packages/vllm/v1/engine/processor.py", line 90, in process_inputs\n'
    "    raise ValueError(\"V1 does not support prompt_adapter_request.\")\n"
    "ValueError: V1 does not support prompt_adapter_request.\n",
])
def test_a_v0_request_option_the_v1_engine_refuses_is_a_wrapper_api_mismatch(log):
    report = explain_text(log)
    assert report.extra["family"] == "wrapper_api_mismatch"
    assert "V0" in _text(report)
