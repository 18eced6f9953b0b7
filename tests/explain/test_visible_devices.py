"""An unexplained failure of a run whose own command asks for more GPUs than the CUDA_VISIBLE_DEVICES its log sets
lists is device_placement (KVD351), with both numbers (explain/diagnosis.py _by_visible_devices); TRL's launcher and
its underscored flags are read as the run's command (a real TRL vllm-serve log of batch 29 had only a cut traceback)."""

from __future__ import annotations

from kvdoctor.explain.command_line import command_facts
from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.log_lines import normalise
from kvdoctor.report.check.text import render

CUT = """{env} python -m trl.scripts.vllm_serve --model m --tensor_parallel_size {tp} --data_parallel_size {dp}

(EngineCore_1 pid=14) ERROR 04-25 12:17:54 [core.py:387] EngineCore hit an exception: Traceback (most recent call last):
(EngineCore_1 pid=14) ERROR 04-25 12:17:54 [core.py:387]   File "/x/vllm/v1/engine/core.py", line 556, in __init__
(EngineCore_1 pid=14) ERROR 04-25 12:17:54 [core.py:387]     os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(
"""


def test_trls_launcher_and_underscored_flags_are_the_runs_command():
    facts = command_facts(normalise("trl vllm-serve --model m --tensor_parallel_size 2 --data-parallel-size 4\n"))
    assert (facts["serve.tensor_parallel_size"], facts["logged.data_parallel_size"]) == (2, 4)


def test_more_ranks_than_visible_gpus_under_a_cut_traceback_is_device_placement():
    report = explain_text(CUT.format(env="CUDA_VISIBLE_DEVICES=0,1", tp=1, dp=8))
    primary = next(f for f in report.findings if f.status == "fired")
    assert primary.rule_id == "KVD351"
    text = render(report)
    assert "(needs 8, 2 visible)" in text and "CUDA_VISIBLE_DEVICES=0,1 lists 2" in text


def test_a_layout_that_fits_the_visible_gpus_or_no_visible_list_changes_nothing():
    for env, dp in (("CUDA_VISIBLE_DEVICES=0,1", 2), ("", 8)):
        report = explain_text(CUT.format(env=env, tp=1, dp=dp))
        assert not any(f.rule_id == "KVD351" for f in report.findings if f.status == "fired")
