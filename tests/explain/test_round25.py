"""Round 25 of issue 28 (logs batches 53-54): vLLM 0.8-0.10's V1 oracle refusing a feature under VLLM_USE_V1=1 (the
feature decides the family); transformers' AutoConfig look-up failing as a bare KeyError (its frames are read as
transformers' own, not as an unknown path); ptxas's message quoted without its "ptxas fatal :" prefix."""

from __future__ import annotations

import pytest

from kvdoctor.explain.explain import explain_text


def _first(text: str):
    report = explain_text(text)
    assert report.exit_code("error") == 1
    return report.findings[0], report.extra.get("family")


@pytest.mark.parametrize("feature, family", [("--kv-cache-dtype", "kv_dtype_backend"),
                                             ("Speculative Decoding", "spec_decode_config"),
                                             ("Pipeline Parallelism without Ray distributed executor or multiprocessing "
                                              "executor or external launcher", "pp_unsupported"),
                                             ("Compute Capability < 8.0", "other"),
                                             ("--num-scheduler-steps", "serve_args")])
def test_the_v1_oracles_refusal_names_the_feature_and_the_fallback_and_the_feature_decides_the_family(feature, family):
    first, found = _first(f"NotImplementedError: VLLM_USE_V1=1 is not supported with {feature}.\n")
    assert (first.rule_id, found) == ("KVD452", family)
    assert feature in first.title
    assert any("VLLM_USE_V1=0" in fix.title for fix in first.fixes)


AUTOCONFIG_KEYERROR = """\
Traceback (most recent call last):
  File "/home/ray/anaconda3/lib/python3.12/site-packages/transformers/models/auto/configuration_auto.py", line 1360, in from_pretrained
    config_class = CONFIG_MAPPING[config_dict["model_type"]]
                   ~~~~~~~~~~~~~~^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/ray/anaconda3/lib/python3.12/site-packages/transformers/models/auto/configuration_auto.py", line 1048, in __getitem__
    raise KeyError(key)
KeyError: 'deepseek_v32'
"""


def test_autoconfigs_keyerror_is_an_unknown_model_type_named_by_the_key():
    first, family = _first(AUTOCONFIG_KEYERROR)
    assert (first.rule_id, family) == ("KVD352", "transformers_unknown_arch")
    assert "deepseek_v32" in first.title


def test_a_frame_in_an_installed_transformers_is_read_from_its_package_path():
    from kvdoctor.explain.diagnosis import _package_path

    assert _package_path("/home/u/env/lib/python3.12/site-packages/transformers/models/auto/configuration_auto.py") \
        == "transformers/models/auto/configuration_auto.py"
    assert _package_path("/opt/venv/lib/python3.11/site-packages/huggingface_hub/file_download.py") \
        == "huggingface_hub/file_download.py"


def test_ptxas_message_quoted_alone_is_the_ptxas_too_old_failure():
    first, family = _first("Value 'sm_121a' is not defined for option 'gpu-name'\n")
    assert family == "triton_ptxas_too_old" and "sm_121a" in first.title
