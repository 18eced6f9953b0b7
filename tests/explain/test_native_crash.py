"""A native crash (KVD463): the innermost frame of its stack dump, whatever the dump's shape, and the library that
frame belongs to; the crash is the primary cause only where no other rule's root matched (it often follows the
error that caused it)."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.log_lines import normalise
from kvdoctor.explain.native_crash import native_crash_facts
from kvdoctor.report.check.text import render

DUMPS = {
    "glog above the crash line": ("(RayWorkerWrapper pid=9)     @     0x7f3a2c1d0000 352  ncclCommInitRank\n"
                                  "Fatal Python error: Aborted\n", "ncclCommInitRank", "NCCL"),
    "absl PC line": ("*** SIGSEGV received at time=1731344824 on cpu 1 ***\n"
                     "PC: @     0x7708c769d908  (unknown)  socketProgressOpt()\n", "socketProgressOpt", None),
    "PyTorch frame #": ("Segmentation fault (core dumped)\n"
                        "frame #0: c10::Error::Error(c10::SourceLocation) + 0x96 (0x7f00 in /x/libc10.so)\n"
                        "frame #1: cudaMemcpyAsync + 0x1a (0x7f01 in /usr/local/cuda/lib64/libcudart.so.12)\n",
                        "cudaMemcpyAsync", "the CUDA runtime"),
    "gdb": ("Thread 1 received signal SIGSEGV, Segmentation fault.\n"
            "#0  0x00007ffff7a4 in __GI_raise () from /lib/libc.so.6\n"
            "#1  0x00007fff12 in flashinfer::BatchPrefillPlan () from /x/flashinfer/_kernels.so\n",
            "flashinfer::BatchPrefillPlan", "FlashInfer"),
    "faulthandler": ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x7f (most recent call first):\n"
                     '  File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", line 120 in '
                     "init_device\n", "init_device", "a native call from vllm's Python code"),
}


@pytest.mark.parametrize("name", DUMPS)
def test_the_innermost_frame_and_its_library(name):
    text, frame, owner = DUMPS[name]
    facts = native_crash_facts(text, normalise(text))
    assert facts.get("log.native_frame") == frame
    assert facts.get("log.native_library") == owner


def test_a_crash_alone_is_the_primary_and_names_its_frame():
    text, _, _ = DUMPS["glog above the crash line"]
    report = explain_text("INFO 05-02 10:22:18 [parallel_state.py:1] world_size=2 rank=0 backend=nccl\n" + text)
    assert report.extra["primary"]["rule_id"] == "KVD463"
    assert "`ncclCommInitRank`, in NCCL" in " ".join(render(report).split())
    assert report.exit_code("error") == 1


def test_a_known_error_before_the_crash_stays_the_primary():
    report = explain_text("ERROR 11-11 09:07:04 [pynccl_wrapper.py:1] RuntimeError: NCCL error: unhandled system "
                          "error\nnode1:908:1048 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
                          "fe80::1cec:56ff:fe9c:1%eth0<45397> failed : Network is unreachable\n"
                          "*** SIGSEGV received at time=1731344824 on cpu 1 ***\n"
                          "PC: @     0x7708c769d908  (unknown)  socketProgressOpt()\n")
    assert report.extra["primary"]["rule_id"] != "KVD463"


@pytest.mark.parametrize("log", [
    "INFO:     Application startup complete.\nINFO:     Shutting down\nFatal Python error: Aborted\n",
    "Fatal Python error: Segmentation fault\nINFO:     Application startup complete.\n",
])
def test_a_crash_in_a_requested_shutdown_or_one_the_server_came_up_after_is_not_the_failure(log):
    report = explain_text(log)
    assert "KVD463" not in {finding.rule_id for finding in report.findings}
    assert report.exit_code("error") == 0
