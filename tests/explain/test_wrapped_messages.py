"""Round 2 of issue 28: messages split over several log lines are matched joined (signatures and the message index),
a traceback excerpt without its 'Traceback' line or line numbers still gives the frames, and a bare KeyError or
assert is placed by the innermost vLLM frame. The logs are synthetic, written from the raise sites' templates in the
vLLM wheels (file:function beside each)."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.log_lines import normalise
from kvdoctor.explain.similar_reports import rules_family
from kvdoctor.explain.tracebacks import continued, parse_chains
from kvdoctor.report.check.text import render


def _text(report) -> str:
    return " ".join(render(report).split())


def test_an_exception_message_wrapped_over_two_lines_is_located_joined():
    # v1/executor/ray_utils.py:initialize_ray_cluster: "Placement group bundle cannot have more than 1 {}."
    # Neither line alone is the template (the first lacks the device, the second is one word).
    log = "ValueError: Placement group bundle cannot have more than 1\nGPU.\n"
    report = explain_text(log)
    assert report.exit_code("error") == 1
    assert report.extra["family"] == "device_placement"
    # the first line alone ends inside the template's opening literal: located as a line cut short (round 5)
    assert explain_text("ValueError: Placement group bundle cannot have more than 1\n").extra["family"] == \
        "device_placement"
    single = explain_text("ValueError: Placement group bundle\n")  # too little of the literal to place it
    assert rules_family(single) == "other"  # the mechanism, not the rule, makes the difference


def test_a_signature_that_stays_on_one_line_sees_the_wrapped_message_joined():
    # v1/attention/backends/utils.py:get_kv_cache_dtype_from_layers; KVD381's groups are [^\n]+
    log = ("ValueError: All layers in one attention group must share the same KV cache dtype; got {'fp8', 'auto'}\n"
           "for ['model.layers.0.attn', 'draft.layers.0.attn'].\n")
    report = explain_text(log)
    assert report.extra["family"] == "spec_draft_kv"
    assert "draft.layers.0.attn" in _text(report)


def test_a_logged_error_record_whose_message_holds_newlines_is_matched_joined():
    # vLLM prints each line of a multi-line message under the same record header
    header = "ERROR 05-02 10:22:18 [utils.py:88] "
    log = (f"{header}All layers in one attention group must share the same KV cache dtype; got {{'fp8', 'auto'}}\n"
           f"{header}for ['model.layers.0.attn', 'draft.layers.0.attn'].\n")
    report = explain_text(log)
    assert report.extra["family"] == "spec_draft_kv"
    assert "draft.layers.0.attn" in _text(report)


def test_continuation_stops_at_a_frame_a_new_exception_a_new_record_or_another_process():
    lines = normalise("ERROR 05-02 10:22:18 [a.py:1] first part\n"
                      "second part\n"
                      "Traceback (most recent call last):\n")
    assert continued(lines, 0) == "first part second part"
    for follower in ('  File "vllm/x.py", line 3, in f', "ValueError: next", "INFO 05-02 10:22:18 [b.py:2] up",
                     "(EngineCore pid=7) other process", "", "Traceback (most recent call last):"):
        assert continued(normalise(f"ValueError: head\n{follower}\n"), 0) is None, follower


def test_a_traceback_excerpt_without_its_header_or_line_numbers_gives_the_frames():
    # model_executor/layers/attention/mla_attention.py:bind_kv_cache (0.34.0)
    log = ('File "vllm/model_executor/layers/attention/mla_attention.py", in bind_kv_cache\n'
           "    assert self.kv_cache.stride(0) % row_width == 0\n"
           "AssertionError\n")
    chains = parse_chains(normalise(log))
    frames = chains[0].innermost.frames
    assert [(f.function, f.line) for f in frames] == [("bind_kv_cache", 0)]
    assert frames[0].code == "assert self.kv_cache.stride(0) % row_width == 0"
    report = explain_text(log)
    assert report.extra["family"] == "mla_sparse"
    assert "bind_kv_cache" in _text(report)


def test_lines_above_a_bare_exception_that_are_not_frames_are_not_taken_as_frames():
    log = "Loading weights\n    some indented note\nKeyError: 'x'\n"
    assert parse_chains(normalise(log))[0].innermost.frames == ()


def test_a_bare_keyerror_is_placed_by_its_innermost_vllm_frame_under_helper_frames():
    # model_executor/models/llama_eagle3.py:load_weights looks weights up by name; the KeyError surfaces in helpers
    log = ("Traceback (most recent call last):\n"
           '  File "/usr/lib/python3/dist-packages/vllm/model_executor/models/llama_eagle3.py", line 300, '
           "in load_weights\n"
           "    param = params_dict[name]\n"
           '  File "/usr/lib/python3.12/collections/__init__.py", line 1121, in __getitem__\n'
           "    raise KeyError(key)\n"
           '  File "/usr/lib/python3.12/collections/__init__.py", line 1115, in __missing__\n'
           "    raise KeyError(key)\n"
           "KeyError: 'model.rotary_inv_freq'\n")
    report = explain_text(log)
    assert report.extra["family"] == "spec_draft_kv"
    assert any("matched by where vLLM raises it" in e for e in report.findings[0].evidence)


def test_a_drafter_weight_keyerror_needs_speculative_decoding_in_the_log():
    # KVD394's context: without a speculative config the same KeyError is not the drafter's
    assert rules_family(explain_text("KeyError: 'embed_tokens.weight'\n")) == "other"
    report = explain_text("--speculative-config '{\"method\": \"eagle3\", \"num_speculative_tokens\": 3}'\n"
                          "KeyError: 'embed_tokens.weight'\n")
    assert report.extra["family"] == "spec_draft_kv"
    assert "embed_tokens.weight" in _text(report)


def test_ray_node_without_gpus_names_the_resources_ray_sees():
    # v1/executor/ray_utils.py:initialize_ray_cluster (0.20-0.32)
    log = ("(run_one pid=12) ValueError: Current node has no GPU available. current_node_resource={'CPU': 96.0, "
           "'memory': 1.8e12}. vLLM engine cannot start without GPU. Make sure you have at least 1 GPU available in "
           "a node\n")
    report = explain_text(log)
    assert report.extra["family"] == "device_placement"
    assert "'CPU': 96.0" in _text(report)


def test_a_healthy_multi_line_info_record_stays_healthy():
    header = "INFO 05-02 10:22:18 [api_server.py:1] "
    log = (f"{header}Supported routes:\n{header}Route: /v1/chat/completions, Methods: POST\n"
           f"{header}Application startup complete.\n")
    assert explain_text(log).exit_code("error") == 0


def test_a_matched_exception_is_quoted_with_its_continuation_lines():
    """The primary cause's evidence quotes the whole message of a wrapped exception (its second line holds values
    the reader needs), not only the line the exception type is on."""
    log = ("ValueError: fp8_e5m2 kv-cache is not supported with checkpoint KV scales\n"
           "outside the SM70 Flash-V100 unit-scale override path.\n")
    report = explain_text(log)
    assert report.exit_code("error") == 1
    text = " ".join(render(report).split())
    assert ("ValueError: fp8_e5m2 kv-cache is not supported with checkpoint KV scales outside the SM70 Flash-V100 "
            "unit-scale override path.") in text


def test_an_unknown_exception_is_quoted_with_its_continuation_lines():
    report = explain_text("ValueError: the frobnicator refused the widget\nbecause its size Q7X is odd.\n")
    assert report.exit_code("error") == 1
    assert "innermost exception: ValueError: the frobnicator refused the widget because its size Q7X is odd." in \
        report.findings[0].evidence
