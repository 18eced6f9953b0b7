"""Round 17 (batches 24 and 25's seen misses, by mechanism): an OOM whose own numbers leave most of the GPU to other
processes is another process holding it (value_families); a TypeError's message printed alone is failure evidence,
also cut by a hard wrap. Lines written from torch's and Python's own message formats."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total capacity of "
       "79.20 GiB of which {free} is free. Including non-PyTorch memory, this process has {mine} memory in use.\n")


def test_an_oom_on_a_gpu_other_processes_fill_is_the_occupied_gpu_family():
    report = explain_text(OOM.format(free="48.62 MiB", mine="2.46 GiB"))
    assert report.exit_code("error") == 1
    assert report.extra["family"] == "gpu_memory_occupied"
    assert "other processes held 76.69 GiB" in report.findings[0].cause


def test_an_oom_of_vllms_own_allocations_stays_the_profiling_family():
    report = explain_text(OOM.format(free="48.62 MiB", mine="78.50 GiB"))
    assert report.extra["family"] == "oom_profiling"
    assert "other processes held" in report.findings[0].cause  # 0.65 GiB: said, but not most of the GPU


@pytest.mark.parametrize("text", [
    "resolve_chat_template_content_format() got an unexpected keyword argument 'trust_remote_code'\n",
    # a hard wrap at 80 columns puts the argument's name on the next line
    "resolve_chat_template_content_format() got an unexpected keyword argument \n'trust_remote_code'\n",
    "LLM.generate() takes from 2 to 4 positional arguments but 5 were given\n",
    "init_app_state() missing 1 required positional argument: 'vllm_config'\n",
])
def test_a_typeerror_message_printed_alone_is_failure_evidence(text):
    assert explain_text(text).exit_code("error") == 1


@pytest.mark.parametrize("text", [
    "INFO 05-02 10:22:18 [api_server.py:1] generate() got 3 requests\n",
    "see resolve_chat_template_content_format() for the keyword arguments it takes\n",
])
def test_lines_that_only_name_a_call_are_not(text):
    assert explain_text(text).exit_code("error") == 0
