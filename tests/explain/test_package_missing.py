"""A package the run needs is not installed (KVD462): the cause names the package and the setting of the run's
command that asks for it, whichever option spells it (the option's value or its name, a package's first word)."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.family_values import _setting_naming
from kvdoctor.report.check.text import render

ARGS = "INFO 03-18 11:13:17 [utils.py:253] non-default args: {{'model_tag': 'm', 'model': 'm', {args}}}\n"
FAILED = ("ERROR 03-18 11:27:27 [core.py:866] EngineCore failed to start.\n"
          "ERROR 03-18 11:27:27 [core.py:866] Traceback (most recent call last):\n"
          'ERROR 03-18 11:27:27 [core.py:866]   File "/usr/lib/python3.12/site-packages/vllm/model_executor/'
          'model_loader/weight_utils.py", line 10, in load\n'
          "ERROR 03-18 11:27:27 [core.py:866]     import {module}\n"
          "ERROR 03-18 11:27:27 [core.py:866] ModuleNotFoundError: No module named '{module}'\n")


@pytest.mark.parametrize("args, module, setting", [
    ("'load_format': 'fastsafetensors'", "fastsafetensors", "--load-format fastsafetensors"),
    ("'quantization': 'bitsandbytes'", "bitsandbytes", "--quantization bitsandbytes"),
    ("'tokenizer_mode': 'mistral'", "mistral_common", "--tokenizer-mode mistral"),
    ("'load_format': 'runai_streamer'", "runai_model_streamer", "--load-format runai_streamer"),
])
def test_the_cause_names_the_package_and_the_setting_that_asks_for_it(args, module, setting):
    report = explain_text(ARGS.format(args=args) + FAILED.format(module=module))
    assert report.extra["primary"]["rule_id"] == "KVD462"
    assert report.extra.get("family") == "package_missing"
    text = render(report)
    assert f"`{module}`" in text and setting in text
    assert report.exit_code("error") == 1


def test_without_a_setting_that_names_it_the_cause_says_so():
    report = explain_text(ARGS.format(args="'max_model_len': 4096") + FAILED.format(module="blobfile"))
    text = " ".join(render(report).split())
    assert "`blobfile`" in text and "Nothing in the log names the setting" in text


def test_vllms_own_modules_and_a_submodule_of_an_installed_package_are_not_a_missing_package():
    for module in ("vllm._C", "vllm.lora.request", "compressed_tensors.compressors.pack_quantized"):
        report = explain_text(FAILED.format(module=module))
        assert report.extra["primary"]["rule_id"] != "KVD462", module


def test_a_setting_is_named_by_its_value_or_its_name_never_by_a_short_word():
    assert _setting_naming("ray", "vllm serve m --distributed-executor-backend ray") == \
        "--distributed-executor-backend ray"
    assert _setting_naming("audio", "vllm serve m --max-model-len 4096") is None
    assert _setting_naming("tensorizer", "vllm serve m --load-format=tensorizer") == "--load-format tensorizer"


@pytest.mark.parametrize("log", [
    "INFO 05-02 10:22:18 [importing.py:1] Failed to import: ModuleNotFoundError: No module named 'amdsmi'\n",
    "Traceback (most recent call last):\n  File \"/x/site-packages/vllm/a.py\", line 1, in f\n"
    "    import triton_kernels\n"
    "ModuleNotFoundError: No module named 'triton_kernels'\n",
])
def test_an_optional_import_the_server_came_up_after_is_not_the_failure(log):
    report = explain_text(log + "INFO:     Application startup complete.\n")
    assert report.exit_code("error") == 0
