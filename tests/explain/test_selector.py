"""vLLM's attention-selection errors parsed into facts and explained reason by reason."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.families import load_families
from kvdoctor.explain.log_lines import normalise
from kvdoctor.explain.selector import explain_reasons, family_for, parse_selector_errors

NEW = ("(EngineCore_DP0 pid=1) ERROR 05-02 10:22:18 [core.py:396] ValueError: No valid attention backend found for cuda "
       "with AttentionSelectorConfig(head_size=576, dtype=torch.bfloat16, kv_cache_dtype=fp8_ds_mla, block_size=None, "
       "use_mla=True, has_sink=False, use_sparse=True, use_mm_prefix=False, attn_type=AttentionType.DECODER). Reasons: "
       "{FLASH_ATTN_MLA: [sparse not supported, compute capability not supported], FLASHMLA_SPARSE: [compute "
       "capability not supported]}.")
OLD = ("ValueError: No valid attention backend found for cuda with head_size: 64, dtype: torch.float16, "
       "kv_cache_dtype: fp8, block_size: 16, use_mla: False, has_sink: True, use_sparse: False. Reasons: "
       "{FLASH_ATTN: [attention sinks not supported], TRITON_ATTN: [kv_cache_dtype not supported]}.")
WRAPPED = """ValueError: No valid attention backend found for cuda with
AttentionSelectorConfig(head_size=64, dtype=torch.bfloat16,
kv_cache_dtype=fp8_ds_mla, use_mla=False, use_non_causal=True, ...).
Reasons: {FLASH_ATTN: [kv_cache_dtype not supported], FLASHINFER: [kv_cache_dtype
not supported], TRITON_ATTN: [kv_cache_dtype not supported]}"""
TRUNCATED = """ValueError: No valid attention backend found for cuda with
AttentionSelectorConfig(head_size=512, dtype=torch.bfloat16, use_mla=True, use_sparse=True).
Reasons: {
  FLASH_ATTN_MLA: [sparse not supported, compute capability not supported],"""
SELECTED = "ValueError: Selected backend AttentionBackendEnum.CUTLASS_MLA is not valid for this configuration. Reason: ['sparse not supported']"


def _parse(text):
    return parse_selector_errors(normalise(text))


def test_current_form():
    (error,) = _parse(NEW)
    assert error.kind == "none_valid" and error.device == "cuda"
    assert error.config["head_size"] == "576" and error.config["kv_cache_dtype"] == "fp8_ds_mla"
    assert error.config["dtype"] == "bfloat16" and error.config["attn_type"] == "DECODER"
    assert error.reasons == {"FLASH_ATTN_MLA": ("sparse not supported", "compute capability not supported"),
                             "FLASHMLA_SPARSE": ("compute capability not supported",)}


def test_older_form_with_colons():
    (error,) = _parse(OLD)
    assert error.config["head_size"] == "64" and error.config["has_sink"] == "True"
    assert set(error.reasons) == {"FLASH_ATTN", "TRITON_ATTN"}
    assert family_for(error, load_families().selector_families) == "attention_sinks"


def test_a_message_wrapped_over_lines():
    (error,) = _parse(WRAPPED)
    assert error.config["use_mla"] == "False" and error.config["kv_cache_dtype"] == "fp8_ds_mla"
    assert error.reasons["FLASHINFER"] == ("kv_cache_dtype not supported",)
    assert family_for(error, load_families().selector_families) == "spec_draft_kv"


def test_a_message_cut_off_keeps_what_it_has():
    (error,) = _parse(TRUNCATED)
    assert error.reasons["FLASH_ATTN_MLA"] == ("sparse not supported", "compute capability not supported")
    assert family_for(error, load_families().selector_families) == "mla_sparse"


def test_selected_backend():
    (error,) = _parse(SELECTED)
    assert error.kind == "selected_invalid" and error.reasons == {"CUTLASS_MLA": ("sparse not supported",)}
    assert family_for(error, load_families().selector_families) == "mla_sparse"


def test_each_reason_is_explained_with_the_configs_values():
    (error,) = _parse(OLD)
    sentences = explain_reasons(error, load_families().selector_reasons, 8.6)
    assert any("FLASH_ATTN do not implement attention sinks" in s for s in sentences)
    assert any("TRITON_ATTN cannot store a fp8 KV cache" in s for s in sentences)


def test_explain_writes_the_reasons_into_the_cause():
    report = explain_text(NEW)
    assert report.extra["primary"]["rule_id"] == "KVD305"
    assert report.extra["family"] == "mla_sparse"
    cause = report.findings[0].cause
    assert "use_sparse=True" in cause and "FLASHMLA_SPARSE" in cause
    assert "do not implement sparse MLA" in cause
    assert report.extra["selector"][0]["config"]["head_size"] == "576"


def test_a_log_line_that_mentions_backends_is_not_a_selector_error():
    assert _parse("INFO 05-02 10:22:18 [cuda.py:1] Using FLASH_ATTN backend; no valid reason to change.") == []


def test_a_value_the_log_does_not_give_is_said_so_never_filled_with_a_placeholder():
    """'Reason: [...]' without the selector's config line: no value to put into 'cannot store a {kv_cache_dtype} KV
    cache'; the sentence says which value the log lacks (issue 28: never 'a this KV cache')."""
    from kvdoctor.explain.selector import SelectorError

    error = SelectorError("selected_invalid", 1, None, {}, {"TRITON_ATTN": ("kv_cache_dtype not supported",
                                                                         "head_size not supported")})
    sentences = " ".join(explain_reasons(error, load_families().selector_reasons, None))
    assert "a this" not in sentences and " this KV cache" not in sentences and "{" not in sentences
    assert "the log does not name it" in sentences and "the log does not give it" in sentences
    error = SelectorError("selected_invalid", 1, None, {"kv_cache_dtype": "fp8", "head_size": "80"},
                          error.reasons)
    sentences = " ".join(explain_reasons(error, load_families().selector_reasons, None))
    assert "cannot store a fp8 KV cache" in sentences and "head size 80" in sentences

