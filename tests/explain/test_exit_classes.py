"""Round 2 of issue 28, item 3: failing logs that used to read as healthy (exit 0). Each case is a kind of log a
failure may come in: a shape of the whole log (indented, a container runtime's or kubectl's prefix, a log shipper's
unknown prefix before vLLM's record header), an exception form (Ray's RayTaskError(ValueError)), a traceback cut
before its exception line, another logging format's error record, or a process's last words. Healthy lines in the
same formats stay at exit 0."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.log_lines import dedent, normalise

HEAD = "INFO 05-02 10:22:10 [api_server.py:1] vLLM API server version 0.30.0\n"
TRACE = ('Traceback (most recent call last):\n  File "/usr/lib/python3/dist-packages/vllm/v1/engine/core.py", line 1, '
         'in run_engine_core\n    raise ValueError("x")\nValueError: The decoder prompt is longer than the model\n')


def _fails(log: str) -> bool:
    return explain_text(log).exit_code("error") == 1


def test_a_log_pasted_indented_as_a_whole_is_read_as_written():
    log = "".join(f"    {line}\n" for line in (HEAD + TRACE).splitlines())
    lines = normalise(log)
    assert lines[0].level == "INFO" and lines[1].text == "Traceback (most recent call last):"
    report = explain_text(log)
    assert report.exit_code("error") == 1
    assert any(e["kind"] == "exception" for e in report.extra["failure_evidence"])


def test_dedent_keeps_a_log_that_has_a_line_in_column_0():
    raw = ["INFO start", "  indented"]
    assert dedent(raw) is raw
    assert dedent(["  a", "    b", "", "  c"]) == ["a", "  b", "", "c"]


@pytest.mark.parametrize("prefix", [
    "2024-06-28T06:11:52.685123456Z stderr F ",       # CRI log file (/var/log/pods)
    "[pod/vllm-7d9f8c-abcde/vllm] ",                  # kubectl logs --prefix
])
def test_container_prefixes_are_stripped(prefix):
    log = "".join(f"{prefix}{line}\n" for line in (HEAD + TRACE).splitlines())
    lines = normalise(log)
    assert lines[0].level == "INFO" and lines[-1].text.startswith("ValueError: The decoder prompt")
    assert _fails(log)


def test_a_vllm_record_behind_an_unknown_prefix_keeps_its_level_and_process():
    log = ("decode-6c8f9c4df6-vh88z vllm (APIServer pid=1) ERROR 10-27 22:25:30 [async_llm.py:480] "
           "Traceback (most recent call last):\n"
           "decode-6c8f9c4df6-vh88z vllm (APIServer pid=1) ERROR 10-27 22:25:30 [async_llm.py:480] "
           "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n")
    line = normalise(log)[1]
    assert (line.stream, line.level, line.source) == ("APIServer pid=1", "ERROR", "async_llm.py:480")
    assert line.text.startswith("vllm.v1.engine.exceptions.EngineDeadError")
    assert _fails(log)
    healthy = "decode-6c8f vllm (APIServer pid=1) INFO 10-27 22:25:30 [api_server.py:1] Application startup complete.\n"
    assert normalise(healthy)[0].level == "INFO" and not _fails(healthy)


def test_ray_task_errors_name_the_class_in_brackets():
    log = HEAD + "ray.exceptions.RayTaskError(ValueError): ray::RayWorkerWrapper.execute_method() (pid=1) boom\n"
    report = explain_text(log)
    assert report.exit_code("error") == 1
    # round 8: Ray's task error header is a wrapper (the task's own error follows it), cited as one
    assert [e["kind"] for e in report.extra["failure_evidence"] if "RayTaskError" in e["text"]] == ["wrapper"]


def test_a_traceback_cut_before_its_exception_line_is_a_failure():
    log = HEAD + ('Traceback (most recent call last):\n'
                  '  File "/usr/lib/python3/dist-packages/vllm/v1/worker/gpu_worker.py", line 9, in load_model\n'
                  "    self.model_runner.load_model()\n")
    report = explain_text(log)
    assert report.exit_code("error") == 1
    assert "in load_model" in report.extra["failure_evidence"][0]["text"]


@pytest.mark.parametrize("line", [
    "2024-06-28 06:11:52,685 - vllm.engine - ERROR - Engine loop has died",        # Python logging
    "2024-06-28 06:11:52.685 | ERROR    | server:start:42 - engine exited",        # loguru
    "2024-06-28 06:11:52,685\tERROR worker.py:406 -- Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1')",
    "[ERROR] engine did not come up",
    'time="2024-06-28T06:11:52Z" level=error msg="backend exited"',
    '{"time": "2024-06-28T06:11:52Z", "level": "error", "msg": "backend exited"}',
    "E1204 10:22:18.123456  4711 process_group.cc:120] NCCL communicator was aborted",
    "[E1204 10:22:18.123456789 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout",
    "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout",
    "Fatal Python error: Aborted",
    "Aborted (core dumped)",
    "*** SIGSEGV received at time=1733307738 on cpu 3 ***",
    "!!!!!!! Segfault encountered !!!!!!!",
    '  Warning  Unhealthy  3m  kubelet  Readiness probe failed: Get "http://10.0.0.7:8000/health": refused',
    "  Warning  BackOff    1m  kubelet  Back-off restarting failed container vllm in pod vllm-0",
    "vllm-0   0/1   CrashLoopBackOff   5   10m",
    "subprocess.CalledProcessError died: Command 'nvcc' returned non-zero exit status 1.",
    'docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
    "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown",
    "Failed to initialize NVML: Driver/library version mismatch",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "run.sh: line 12:  4711 Killed                  vllm serve meta-llama/Llama-3.1-8B-Instruct",
    "(raylet) A worker died or was killed while executing a task by an unexpected system error.",
    "ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)",
    "curl: (7) Failed to connect to localhost port 8000 after 0 ms: Connection refused",
    '{"object": "error", "message": "EngineCore died", "type": "InternalServerError", "code": 500}',
    "[worker-3] ValueError: The decoder prompt is longer than the maximum model length",
    "gpu-node-1: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "      Exit Code:    137",
    "      Reason:       Error",
    "vllm.service: Main process exited, code=exited, status=1/FAILURE",
    "vllm.service: Failed with result 'exit-code'.",
    "Floating point exception (core dumped)",
])
def test_error_lines_of_other_formats_and_last_words_are_failures(line):
    assert _fails(HEAD + line + "\n"), line


@pytest.mark.parametrize("line", [
    "2024-06-28 06:11:52,685 - vllm.engine - INFO - Engine started",
    "2024-06-28 06:11:52.685 | INFO     | server:start:42 - ready",
    "2024-06-28 06:11:52,685\tINFO worker.py:1 -- Connecting to existing Ray cluster",
    'time="2024-06-28T06:11:52Z" level=info msg="backend ready"',
    '{"time": "2024-06-28T06:11:52Z", "level": "info", "msg": "no errors"}',
    "I1204 10:22:18.123456  4711 process_group.cc:120] NCCL communicator ready",
    "Setting the log level to ERROR",
    "Aborted request chatcmpl-123.",
    "Errors: 0, SIGTERM handler installed",
    "Killed 0 stale processes; level=info",
    "NVML initialised: 8 GPUs",
    '{"object": "chat.completion", "code": 200}',
    "Note that a ValueError is raised for prompts over the limit",
    "      Exit Code:    0",
    "E0000 00:00:1733307738.123456   4711 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to register "
    "factory for plugin cuDNN when one has already been registered",
    "E0000 00:00:1733307738.123456   4711 computation_placer.cc:177] computation placer already registered. Please "
    "check linkage and avoid linking the same target more than once.",
    "INFO 05-02 10:22:18 [multiproc.py:9] Worker proc VllmWorker-0 exited with code 0",
])
def test_the_same_formats_healthy_lines_stay_at_exit_0(line):
    report = explain_text(HEAD + line + "\n")
    assert report.exit_code("error") == 0 and report.extra["failure_evidence"] == [], line


def test_an_unnamed_ray_task_tag_is_a_process_tag():
    line = normalise("(pid=2816485) ValueError: Current node has no GPU available.\n")[0]
    assert (line.stream, line.text) == ("pid=2816485", "ValueError: Current node has no GPU available.")
    assert _fails("(pid=2816485) ValueError: Current node has no GPU available.\n")


def test_python_logging_records_keep_their_level():
    line = normalise("2024-06-28 06:11:52,685 - vllm.engine - ERROR - Engine loop has died\n")[0]
    assert (line.level, line.source, line.text) == ("ERROR", "vllm.engine", "Engine loop has died")
    assert not _fails(HEAD + "2024-06-28 06:11:52,685 - vllm.engine - INFO - Engine started\n")
