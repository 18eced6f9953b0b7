"""Round 4 of issue 28 (E3): shapes of a failed start-up that carried none of the evidence kinds verdict.py knew and
so exited 0: zsh's and a job table's signal reports, macOS' 'Killed: 9', the shells' signal reports in other
languages, glibc's heap aborts, a client's HTTP status line, the GPU lost (Xid), ROCm / HIP failures, start-ups
that never complete (Ray cannot place the GPUs, vLLM waits for its placement group, a health check fails, 'Timed out
waiting'), torch elastic's failure summary, Python's 'Exception in thread' / 'Process X-1:' headers, faulthandler
and py-spy dumps, kubectl's Warning events, exceptions not named ...Error, traceback frames with neither header nor
exception line (a Windows path too), and a reporter's line saying the process hangs there. Each has a healthy
counterpart that stays at exit 0."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.log_lines import normalise
from kvdoctor.explain.verdict import failure_evidence

HEAD = "INFO 05-02 10:22:10 [api_server.py:1] vLLM API server version 0.30.0\n"


def _fails(text: str) -> bool:
    return explain_text(HEAD + text + "\n").exit_code("error") == 1


FAILING = [
    # shells: zsh's report, a job table's, macOS', and the same words in other locales (glibc's strsignal)
    "zsh: killed     vllm serve Qwen/Qwen3-8B",
    "zsh: segmentation fault (core dumped)  python serve.py",
    "[1]    12345 killed     vllm serve Qwen/Qwen3-8B",
    "Killed: 9",
    "段错误 (核心已转储)",
    "已杀死",
    "Speicherzugriffsfehler (Speicherabzug geschrieben)",
    "Ошибка сегментирования (стек памяти сброшен на диск)",
    "Trace/breakpoint trap",
    '*** Aborted at 1718000000 (unix time) try "date -d @1718000000" if you are using GNU date ***',
    "terminate called without an active exception",
    # glibc's heap checks
    "free(): invalid pointer",
    "double free or corruption (out)",
    "malloc(): corrupted top size",
    # a client's view of the server
    "HTTP/1.1 500 Internal Server Error",
    "< HTTP/1.1 400 Bad Request",
    "Internal Server Error",
    "Connection refused",
    # the GPU and its runtime
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.",
    "Memory access fault by GPU node-2 (Agent handle: 0x55) on address 0x7f. Reason: Page not present.",
    "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!",
    "No devices were found",
    # start-ups that never complete
    "(autoscaler +1m) Warning: The following resource request cannot be scheduled right now: {'GPU': 1.0}.",
    "INFO 05-02 10:22:18 [ray_utils.py:1] Waiting for creating a placement group of specs for 10 seconds. "
    "specs=[{'GPU': 1.0}]. Check `ray status` to see if you have enough resources.",
    "Health check failed",
    "dependency failed to start: container vllm is unhealthy",
    "Timed out waiting for engine core processes to start",
    # torch elastic, Python's own headers, process dumps
    "exitcode  : -9 (pid: 1234)",
    "Signal 9 (SIGKILL) received by PID 1234",
    "Exception in thread Thread-1:",
    "Process SpawnProcess-1:",
    "Thread 0x00007f1234 (most recent call first):",
    "Timeout (0:05:00)!",
    'Thread 4711 (idle): "MainThread"',
    "SystemExit: 1",
    # kubectl describe's Warning events, a report's words for the OOM killer
    "  Warning  Failed  1m  kubelet  Error: failed to create containerd task: OCI runtime create failed",
    "The process was killed by the OOM killer",
    # vLLM's INFO lines of a KV cache that cannot exist (a log cut before the raise), Ray's worker exit report
    "INFO 05-02 10:22:18 [gpu_worker.py:1] Available KV cache memory: -1.52 GiB",
    "INFO 05-02 10:22:18 [executor_base.py:1] # GPU blocks: 0, # CPU blocks: 2048",
    "WARNING 05-02 10:22:18 scheduler.py:1] Input prompt (9000 tokens) is too long and exceeds limit of 8192",
    "WARNING 05-02 10:22:18 scheduler.py:1] Input prompt (9000 tokens) + lookahead slots (4) is too long and exceeds "
    "the capacity of block_manager",
    "(raylet) Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2.",
    # exceptions whose class is not named ...Error
    "zmq.error.Again: Resource temporarily unavailable",
    "httpx.ReadTimeout: timed out",
    "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
    # frames alone (a paste cut at both ends), a Windows path, and the reporter's own words
    '  File "/usr/lib/python3/dist-packages/vllm/engine/llm_engine.py", line 120, in __init__\n'
    "    self.model_executor = executor_class(\n"
    '  File "/usr/lib/python3/dist-packages/vllm/executor/gpu_executor.py", line 40, in _init_executor',
    'File "C:\\Users\\me\\vllm\\engine\\llm_engine.py", line 120, in __init__\n'
    '  File "C:\\Users\\me\\vllm\\worker.py", line 40, in load_model',
    '    raise ValueError(f"bad {x}")',
    # a build or a test run that failed, nginx's and other servers' lower-case records, a bare Exception
    "make: *** [Makefile:12: all] Error 1",
    "CMake Error at CMakeLists.txt:10 (message):",
    "  × Failed to build `vllm==0.30.0`",
    "The command '/bin/sh -c pip install vllm' returned a non-zero code: 1",
    "vllm serve exited with status 1",
    "FAILED tests/test_x.py::test_serve - AssertionError: assert 1 == 0",
    "2024/06/25 16:32:00 [error] 29#29: *1 connect() failed (111: Connection refused) while connecting to upstream",
    "Exception: model failed to load",
    "[2024-06-25 16:32:00,123 E 4711 4711] core_worker.cc:123: Failed to register worker to Raylet",
    "[2024-06-25 16:32:00,123 C 4711 4711] gcs_rpc_client.h:1: Check failed: status.ok()",
    "{'error': {'message': 'The model `llama` does not exist.', 'type': 'NotFoundError', 'code': 404}}",
    "cuInit failed",
    "运行报错，服务起不来",
    "エラーが発生しました",
    "The server hangs here and never becomes ready",
    "[stuck here, no more output]",
]


@pytest.mark.parametrize("line", FAILING)
def test_failure_shapes_without_an_error_line_exit_1(line):
    assert _fails(line), line


HEALTHY = [
    'INFO:     10.0.0.7:51234 - "GET /health HTTP/1.1" 200 OK',
    "HTTP/1.1 200 OK",
    "Health check passed",
    "INFO 05-02 10:22:18 [ray_utils.py:1] Creating a placement group of specs",
    "exitcode: 0",
    "Process Process-1 started",
    "Terminated",
    "INFO 05-02 10:22:18 [core.py:1] Waiting for 1 local, 0 remote core engine proc(s) to start.",
    "WARNING 05-02 10:22:18 [utils.py:1] Signal handlers are installed; the process can be killed by signal SIGTERM",
    '  Normal   Pulled     2m  kubelet  Successfully pulled image "vllm/vllm-openai:v0.30.0"',
    "INFO 05-02 10:22:18 [loader.py:1] Loading weights took 12.3 seconds; this should not hang",
    "The stuck-request detector is enabled",
    "INFO 05-02 10:22:18 [x.py:1] Freezing the graph for cuda graphs",
    '  File "/usr/lib/python3/dist-packages/vllm/entrypoints/cli/main.py", line 12, in main',
    "Stack (most recent call last):\n"
    '  File "/usr/lib/python3/threading.py", line 9, in _bootstrap\n'
    '  File "/usr/lib/python3/dist-packages/vllm/x.py", line 5, in f',
    "INFO 05-02 10:22:18 [x.py:1] Using exceptions module vllm.exceptions",
    "INFO 05-02 10:22:18 [x.py:1] Received SIGTERM, shutting down gracefully",
    "INFO 05-02 10:22:18 [gpu_worker.py:1] Available KV cache memory: 21.52 GiB",
    "INFO 05-02 10:22:18 [executor_base.py:1] # GPU blocks: 0512, # CPU blocks: 2048",
    "INFO 05-02 10:22:18 [executor_base.py:1] # GPU blocks: 4096, # CPU blocks: 0",
    "(raylet) Worker exit type: INTENDED_USER_EXIT",
    "make: Nothing to be done for 'all'.",
    "CMake Warning at CMakeLists.txt:10 (message):",
    "PASSED tests/test_x.py::test_serve",
    "vllm serve exited with status 0",
    "2024/06/25 16:32:00 [notice] 1#1: start worker processes",
    "服务启动成功",
    "[2024-06-25 16:32:00,123 I 4711 4711] core_worker.cc:123: Registered worker",
    "[2024-06-25 16:32:00,123 W 4711 4711] core_worker.cc:123: Slow heartbeat",
    "{'error': None, 'id': 'cmpl-1', 'choices': [{'text': 'ok'}]}",
    "{'id': 'cmpl-1', 'error': ''}",
    "cuInit succeeded",

]


@pytest.mark.parametrize("line", HEALTHY)
def test_healthy_lines_of_the_same_shapes_stay_at_exit_0(line):
    assert not _fails(line), line


def test_frames_alone_cite_the_innermost_frame():
    log = HEAD + ('  File "/x/vllm/engine/llm_engine.py", line 120, in __init__\n'
                  '  File "/x/vllm/worker/worker.py", line 40, in load_model\n')
    evidence = failure_evidence(normalise(log), [])
    assert len(evidence) == 1 and evidence[0].kind == "error text"
    assert evidence[0].text.endswith('File "/x/vllm/worker/worker.py", line 40, in load_model')


def test_prose_counts_only_when_the_log_shows_nothing_else():
    log = HEAD + "ValueError: Unknown kv cache dtype: fp9\nit hangs here forever\n"
    cited = [e["text"] for e in explain_text(log).extra["failure_evidence"]]
    assert cited == ["ValueError: Unknown kv cache dtype: fp9"]
    assert [e["text"] for e in explain_text(HEAD + "it hangs here forever\n").extra["failure_evidence"]] == [
        "it hangs here forever"]


def test_a_warning_record_holding_a_message_vllm_only_raises_is_a_failure():
    raised = "WARNING 05-02 10:22:18 [engine.py:1] max_num_batched_tokens (2048) must be greater than or equal to " \
             "max_num_seqs (4096)."
    report = explain_text(HEAD + raised + "\n")
    assert report.exit_code("error") == 1
    assert [e["kind"] for e in report.extra["failure_evidence"]] == ["raise site"]
    # vLLM logs this one as a warning too (and raises it elsewhere): not a failure by itself
    both = ("WARNING 05-02 10:22:18 [compilation.py:1] CUDAGraphMode.FULL_AND_PIECEWISE is not supported with "
            "TritonMLABackend backend (support: AttentionCGSupport.NEVER); setting cudagraph_mode=PIECEWISE")
    assert not _fails(both)
    assert not _fails("WARNING 05-02 10:22:18 [fused_moe.py:1] Using default MoE config. Performance might be "
                      "sub-optimal! Config file not found at /x/configs/E=8,N=14336.json")


def test_header_less_healthy_lines_are_not_raise_sites():
    """A healthy start-up pasted without its record headers: a line is not a raise site because a later line
    joined onto it matches one, nor because its message is one vLLM raises in one place and logs as a warning in
    another."""
    log = ("GPU KV cache size: 75,840 tokens\n"
           "Maximum concurrency for 120,000 tokens per request: 2.48x\n"
           "CUDAGraphMode.FULL_AND_PIECEWISE is not supported with TritonMLABackend backend (support: "
           "AttentionCGSupport.NEVER); setting cudagraph_mode=PIECEWISE because attention is compiled piecewise\n")
    report = explain_text(log)
    assert report.exit_code("error") == 0, report.extra.get("failure_evidence")
