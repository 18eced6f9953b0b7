"""Round 3 of issue 28, item 3: more kinds of failing logs that read as healthy (exit 0) before. A log written as JSON
records (Docker's json-file driver, a structured logger, a traceback in a record's field), error records of
logfmt and JSON with any case of the level, Python logging's default 'CRITICAL:name:' format, Go's and Rust's
panics, an OpenAI-compatible error body a client printed, the kernel's OOM killer, NCCL's WARN-level failures and
a shell's 'exit status N'. Healthy lines of the same shapes stay at exit 0."""

from __future__ import annotations

import json

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.log_lines import json_record, normalise

HEAD = "INFO 05-02 10:22:10 [api_server.py:1] vLLM API server version 0.30.0\n"


def _fails(log: str) -> bool:
    return explain_text(log).exit_code("error") == 1


def _docker(text: str, stream: str = "stderr") -> str:
    return json.dumps({"log": text + "\n", "stream": stream, "time": "2026-05-02T10:22:18.123456789Z"})


def test_docker_json_file_records_are_read_as_the_lines_they_hold():
    log = "\n".join(_docker(line) for line in [
        "INFO 05-02 10:22:10 [api_server.py:1] vLLM API server version 0.30.0",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/vllm/config/cache.py", line 100, in _verify_cache_dtype',
        "ValueError: Unknown kv cache dtype: fp9",
    ]) + "\n"
    report = explain_text(log)
    assert report.exit_code("error") == 1
    assert report.facts.get("vllm.version") == "0.30.0"  # the start-up lines inside the records are read too
    assert "Unknown kv cache dtype: fp9" in report.findings[0].cause


def test_a_json_record_keeps_its_level_and_its_traceback_field():
    record = json.dumps({"levelname": "ERROR", "message": "Engine core failed",
                         "exc_info": "Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n"
                                     "RuntimeError: CUDA error: no kernel image is available"})
    lines = normalise(record + "\n")
    assert lines[0].level == "ERROR" and lines[0].text == "Engine core failed"
    assert lines[-1].text.startswith("RuntimeError: CUDA error") and {line.number for line in lines} == {1}
    assert _fails(HEAD + record + "\n")


@pytest.mark.parametrize("record, level", [
    ('{"level": "error", "msg": "engine died"}', "ERROR"),
    ('{"severity": "CRITICAL", "textPayload": "engine died"}', "CRITICAL"),
    ('{"lvl": "warn", "event": "slow"}', "WARNING"),
    ('{"log": "plain text\\n", "stream": "stdout"}', None),
    ('{"object": "error", "message": "boom", "code": 400}', "ERROR"),
])
def test_json_record_levels(record, level):
    assert json_record(record)[1] == level


def test_lines_that_only_look_like_json_stay_lines():
    assert json_record('{"no message": 1}') is None
    assert json_record("{not json}") is None
    assert json_record("[1, 2]") is None


@pytest.mark.parametrize("line", [
    'time=2026-05-02T10:22:18Z level=ERROR msg="engine core died"',
    'ts=1 lvl=error caller=server.go:42 msg="upstream vllm unhealthy"',
    "CRITICAL:vllm.engine:Engine loop has died",
    "panic: runtime error: invalid memory address or nil pointer dereference",
    "thread '<unnamed>' panicked at tokenizers/src/models/bpe/model.rs:402:17:",
    "{'object': 'error', 'message': \"This model's maximum context length is 4096 tokens\", 'code': 400}",
    "[81234.567890] Out of memory: Killed process 4711 (python3) total-vm:123456kB",
    "[81234.567890] Memory cgroup out of memory: Killed process 4711 (vllm)",
    "gpu-node-1:4711:4711 [0] NCCL WARN Cuda failure 'out of memory'",
    "gpu-node-1:4711:4800 [1] NCCL WARN NET/IB : Got completion with error 12, opcode 0",
    "Error: exit status 1",
    # a traceback a paste flattened onto one line, an exception whose case a paste lost, pydantic's lines
    'File "/opt/conda/lib/python3.10/site-packages/requests/adapters.py", line 519, in send raise ConnectionError(e) '
    "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded",
    "permissionError: [error 13] Permission denied: '/.cache'",
    "  Value error, The checkpoint you are trying to load has model type `glm4v_moe` but Transformers does not "
    "recognize this architecture. [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]",
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig",
    "OSError: [Errno 28] No space left on device",
    # a compiled extension built against another torch: logged as a warning, the ops never load
    "WARNING 06-13 11:42:20 _custom_ops.py:11] Failed to import from vllm._C with ImportError('/usr/lib/vllm/_C.abi3.so: "
    "undefined symbol: _ZN5torch7LibraryC1ENS0_4KindESsSt8optionalIN3c1011DispatchKeyEEPKcj')",
    "WARNING 06-13 11:42:20 [_custom_ops.py:11] Failed to import from vllm._C with ImportError('libcudart.so.12: cannot "
    "open shared object file: No such file or directory')",
    # a request the server refused, as uvicorn logs it; a pretty-printed error body a client printed
    'INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request',
    '  "error": "Error 400 Bad Request from vllm client: the decoder prompt is too long"',
    # a CUDA device-side assert, a shell's job report, Kubernetes' events
    "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], thread: [0,0,0] Assertion "
    "`-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.",
    "[1]+  Killed                  python -m vllm.entrypoints.openai.api_server --model x",
    "  Warning  FailedScheduling  2m  default-scheduler  0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
    "  Warning  Failed     1m   kubelet  Error: ImagePullBackOff",
    # another framework's record format with the level as a word, vLLM's report of a hang
    "2024-06-25 16:32:00,563 xinference.api.restful_api 3118895 ERROR    [address=127.0.0.1:37657] model failed",
    "INFO 05-02 10:22:18 [shm_broadcast.py:466] No available shared memory broadcast block found in 60 second. This "
    "typically happens when some processes are hanging.\n"
    "INFO 05-02 10:23:18 [shm_broadcast.py:466] No available shared memory broadcast block found in 60 second. This "
    "typically happens when some processes are hanging.",
])

def test_error_lines_of_more_formats_are_failures(line):
    assert _fails(HEAD + line + "\n"), line


@pytest.mark.parametrize("line", [
    'time=2026-05-02T10:22:18Z level=info msg="engine ready"',
    "INFO:vllm.engine:Engine started",
    '{"level": "info", "msg": "ready"}',
    _docker("INFO 05-02 10:22:18 [api_server.py:9] Starting vLLM API server on http://0.0.0.0:8000", "stdout"),
    "gpu-node-1:4711:4711 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
    "gpu-node-1:4711:4711 [0] NCCL WARN NET/Plugin: No plugin found (libnccl-net.so)",
    "exit status 0",
    "The panic button is documented in docs/ops.md",
    '  File "/usr/lib/python3/dist-packages/vllm/entrypoints/cli/main.py", line 12, in main',
    "WARNING 06-13 11:42:20 _custom_ops.py:11] Failed to import from vllm._C with ModuleNotFoundError(\"No module "
    "named 'vllm._C'\")",
    "INFO 05-02 10:22:18 [config.py:1] Value errors are reported per request",
    'INFO:     10.0.0.7:51234 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    # vLLM's wait notice printed once: a slow step (compilation, a long load), not yet a hang
    "WARNING 05-02 10:22:18 [shm_broadcast.py:466] No available shared memory broadcast block found in 60 seconds. "
    "This typically happens when some processes are hanging or doing some time-consuming work (e.g. compilation).",
    'INFO:     10.0.0.7:51234 - "GET /favicon.ico HTTP/1.1" 404 Not Found',
    '  "error": null,',
    "  Normal   Scheduled  2m  default-scheduler  Successfully assigned default/vllm-0 to gpu-node-1",
    "2024-06-25 16:32:00,563 xinference.api.restful_api 3118895 INFO     [address=127.0.0.1:37657] model ready",
    "The ERROR  log of the last run is empty",
])
def test_healthy_lines_of_the_same_formats_stay_at_exit_0(line):
    assert not _fails(HEAD + line + "\n"), line


def test_an_indented_message_vllm_raises_is_located_but_frames_are_not():
    from kvdoctor.explain.message_index import load_index
    from kvdoctor.explain.verdict import failure_evidence

    index = load_index()
    message = "    max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs (4096)."
    lines = normalise(HEAD + message + "\n")
    evidence = failure_evidence(lines, [], (), lambda text: index.locate(text))
    assert [e.kind for e in evidence] == ["raise site"]
    frame = '  File "/usr/lib/python3/dist-packages/vllm/config/scheduler.py", line 9, in max_num_batched_tokens_check'
    assert failure_evidence(normalise(HEAD + frame + "\n"), [], (), lambda text: index.locate(text)) == ()


def test_an_ipython_traceback_gives_its_frames():
    log = HEAD + (
        "File ~/envs/vllm/lib/python3.11/site-packages/vllm/worker/cache_engine.py:49, in CacheEngine.__init__(self, c)\n"
        "     48 # Initialize the cache.\n"
        "---> 49 self.gpu_cache = self._allocate_kv_cache(self.num_gpu_blocks, \"cuda\")\n"
        "\n"
        "File [~/envs/vllm/lib/python3.11/site-packages/vllm/worker/cache_engine.py:64](http://host:8888/lab/tree/x#line=63), "
        "in CacheEngine._allocate_kv\n"
        "     63 kv_cache.append(\n"
        "---> 64     torch.empty(kv_cache_shape,\n"
        "\n"
        "OutOfMemoryError: CUDA out of memory. Tried to allocate 642.00 MiB. GPU\n")
    report = explain_text(log)
    assert report.exit_code("error") == 1
    where = report.extra["primary"]["where"]
    assert where.endswith("vllm/worker/cache_engine.py:64 in _allocate_kv"), where


def test_a_log_pasted_as_a_quote_is_read_as_written():
    log = "".join("> " + line + "\n" for line in [
        "INFO 05-02 10:22:10 [api_server.py:1] vLLM API server version 0.30.0",
        "ERROR 05-02 10:22:18 [core.py:396] EngineCore failed to start.",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/vllm/config/cache.py", line 100, in _verify_cache_dtype',
        "ValueError: Unknown kv cache dtype: fp9",
    ])
    lines = normalise(log)
    assert lines[1].level == "ERROR" and lines[-1].text == "ValueError: Unknown kv cache dtype: fp9"
    report = explain_text(log)
    assert report.exit_code("error") == 1 and report.facts.get("vllm.version") == "0.30.0"
    # a log with a few '>' lines of its own (a shell prompt, a diff) is left as it is
    assert normalise("$ vllm serve x\n> continued\nINFO 05-02 10:22:10 [a.py:1] ok\n")[1].text == "> continued"
