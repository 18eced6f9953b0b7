"""Issue 28, stop 53 (batches 57-58): a log pasted outside a code block loses its backticks; a traceback whose first
frame lost its prefix and indent to the paste is still a traceback; a message that blames the tensor parallel size,
or the Transformers fallback refusing a model class, names its family; FlashInfer's 128-token page limit."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.message_index import load_index


def _family(log: str) -> tuple[int, str | None, str | None]:
    report = explain_text(log)
    primary = report.extra.get("primary") or {}
    return report.exit_code("error"), report.extra.get("family"), primary.get("rule_id")


def test_a_message_without_its_backticks_is_still_located_and_matched():
    line = ("An error occurred: The checkpoint you are trying to load has model type qwen2_vl but Transformers does "
            "not recognize this architecture. This could be because of an issue with the checkpoint, or because your "
            "version of Transformers is out of date.\n")
    located = load_index().locate(line.strip())
    assert located is not None and located.values == ("qwen2_vl",)
    code, family, rule = _family(line)
    assert code == 1 and family == "transformers_unknown_arch" and rule == "KVD352"


def test_a_truncated_line_without_backticks_is_located_by_its_opening():
    cut = "ValueError: The checkpoint you are trying to load has model type foo but Transformers does not recognize"
    assert load_index().locate(cut) is not None


def test_a_traceback_whose_first_frame_lost_its_prefix_to_the_paste():
    prefix = "ERROR 07-24 13:45:59 [core.py:517] "
    log = ('File "/env/lib/python3.12/site-packages/vllm/lora/models.py", line 229, in check_unexpected_modules\n'
           f"{prefix}    module_name, _, _ = parse_fine_tuned_lora_name(\n"
           f'{prefix}  File "/env/lib/python3.12/site-packages/vllm/lora/utils.py", line 148, in parse_fine_tuned_lora_name\n'
           f'{prefix}    raise ValueError(f"{{name}} is unsupported LoRA weight")\n'
           "ERROR 07-24 13:45:59\n")
    code, family, rule = _family(log)
    assert (code, family, rule) == (1, "lora_unsupported", "KVD326")


def test_a_quantized_shard_blamed_on_the_tensor_parallel_size():
    log = ("ERROR 02-28 01:21:51 engine.py:400] ValueError: The input size is not aligned with the quantized weight "
           "shape. This can be caused by too large tensor parallel size.\n")
    assert _family(log)[:2] == (1, "parallel_divisibility")


def test_the_transformers_fallback_refusing_a_model_class():
    log = "ERROR 02-23 13:07:13 engine.py:400] The Transformers implementation of XLMRobertaModel is not compatible with vLLM.\n"
    assert _family(log)[:2] == (1, "transformers_unknown_arch")


def test_flashinfers_page_limit_of_128_tokens_is_a_block_size_failure():
    log = ("(EngineCore_DP0 pid=1) RuntimeError: Expect (32 <= headDim <= 2048) && (numTokensPerPage <= 128), got "
           "headDimPerCtaV=%d, headDimQk=%d, headDimV=%d, numTokensPerPage=%d256256256544\n")
    assert _family(log) == (1, "hybrid_block_size", "KVD376")
