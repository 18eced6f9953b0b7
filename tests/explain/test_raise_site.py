"""A message no family knows, explained from its raise site (explain/raise_site.py): the release, file and
Class.function, the condition with the log's values put in for the names the message interpolates, and the check
flag and rules that read those names; KVD399 says what it searched when the index holds nothing."""

from __future__ import annotations

import json

import pytest

import kvdoctor.explain.message_index as message_index
from kvdoctor.builders.message_index import packing
from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.families import load_families
from kvdoctor.explain.message_index import Located, Location, Template
from kvdoctor.explain.raise_site import check_sentence, facts_for, names_read, rules_reading, substituted

HEAD = "INFO 05-02 10:22:10 [api_server.py:1] vLLM API server version 0.30.0\n"


def _index(entries: list[dict], releases: list[str]) -> message_index.MessageIndex:
    return message_index.MessageIndex(json.loads(json.dumps(packing.pack(entries, {"vllm": releases}))))


def _entry(**fields) -> dict:
    entry = {"package": "vllm", "kind": "raise", "type": "ValueError", "file": "vllm/v1/attention/backends/x.py",
             "function": "__init__", "releases": "0.30.0", "condition": None, "class": None, "names": []}
    entry.update(fields)
    return entry


def test_values_are_put_in_for_whole_names_only():
    condition = "head_size not in self.supported_head_sizes and head_size_v != 0"
    assert substituted(condition, {"head_size": "576"}) == "576 not in self.supported_head_sizes and head_size_v != 0"
    assert substituted("self.block_size % 16 != 0", {"self.block_size": "24"}) == "24 % 16 != 0"
    # a name that is an attribute of something else, or a call, is not the interpolated value
    assert substituted("cfg.head_size > 256 or head_size(x)", {"head_size": "576"}) == "cfg.head_size > 256 or head_size(x)"


def test_the_names_a_condition_reads_name_kvdoctor_facts():
    location = Location("vllm", "raise", "ValueError", "vllm/x.py", "f", "0.30.0",
                        "self.cache_config.cache_dtype == 'fp8' and capability < 89", "Worker", ("block_size",))
    words = names_read(location)
    assert {"cache_dtype", "capability", "block_size", "self"} <= words
    facts = facts_for(words, load_families().raise_site_names)
    assert facts == ["gpu.capability", "serve.block_size", "serve.kv_cache_dtype"]
    sentence = check_sentence(facts)
    assert "serve.kv_cache_dtype (--kv-cache-dtype)" in sentence and "gpu.capability (--gpu)" in sentence
    assert all(rule in sentence for rule in rules_reading("serve.kv_cache_dtype")[:4])


def test_every_raise_site_name_is_a_fact_a_check_rule_or_a_flag_reads():
    from kvdoctor.explain.raise_site import flag_for

    for name, fact in load_families().raise_site_names.items():
        assert flag_for(fact) or rules_reading(fact), (name, fact)


def test_named_values_need_one_name_per_placeholder():
    location = Location("vllm", "raise", "ValueError", "f.py", "g", "0.30.0", "x > n", None, ("x", "n"))
    template = Template(("a ", None, " b ", None), (location,))
    assert Located(template, ("5", "3")).named_values(location) == {"x": "5", "n": "3"}
    assert Located(template, ()).named_values(location) == {}  # a line cut short has no values


def test_an_unknown_message_is_explained_from_its_raise_site(monkeypatch):
    entry = _entry(parts=["Cache pages of ", None, " tokens do not tile the frobnicator kernel's page width"],
                   condition="block_size % self.page_width != 0", **{"class": "FrobImpl"}, names=["block_size"])
    monkeypatch.setattr(message_index, "load_index", lambda: _index([entry], ["0.30.0"]))
    report = explain_text(HEAD + "ValueError: Cache pages of 24 tokens do not tile the frobnicator kernel's page width\n")
    assert report.exit_code("error") == 1 and report.findings[0].rule_id == "KVD399"
    cause = report.findings[0].cause
    assert ("vLLM 0.30.0 raises ValueError in vllm/v1/attention/backends/x.py:FrobImpl.__init__ when "
            "`block_size % self.page_width != 0` (in this log: `24 % self.page_width != 0`)" in cause)
    assert "serve.block_size (--block-size)" in cause  # the check that reads the block size
    located = report.extra["located"][0]
    assert located["class"] == "FrobImpl" and located["values"] == {"block_size": "24"}


def test_a_value_the_condition_does_not_name_is_still_shown(monkeypatch):
    entry = _entry(parts=["The draft model cannot hold ", None, " tokens"], condition="not ok", names=["n"])
    monkeypatch.setattr(message_index, "load_index", lambda: _index([entry], ["0.30.0"]))
    cause = explain_text(HEAD + "ValueError: The draft model cannot hold 4096 tokens\n").findings[0].cause
    assert "when `not ok` with n = 4096" in cause


def test_nothing_in_the_index_says_what_was_searched(monkeypatch):
    entry = _entry(parts=["An entirely different message about something else"])
    monkeypatch.setattr(message_index, "load_index", lambda: _index([entry], ["0.20.0", "0.30.0"]))
    report = explain_text(HEAD + "ValueError: Frobnication of the widget failed badly\n")
    cause = report.findings[0].cause
    assert report.findings[0].rule_id == "KVD399"
    assert "The message index (vllm 0.20.0-0.30.0) does not hold this message" in cause
    assert "no raise, assert or error-level logger call" in cause


@pytest.mark.parametrize("condition, values, shown", [
    ("x > n", {"x": "5"}, "`5 > n`"),
    ("except ImportError", {"e": "No module named 'flash_attn'"}, "with e = No module named 'flash_attn'"),
])
def test_place_sentence_forms(condition, values, shown):
    from kvdoctor.explain.raise_site import place_sentence

    names = tuple(values)
    location = Location("vllm", "raise", "RuntimeError", "vllm/x.py", "load", "0.30.0", condition, None, names)
    template = Template(("failed: ", None), (location,))
    text = place_sentence(Located(template, tuple(values.values())), location, "0.30.0")
    assert text.startswith("vLLM 0.30.0 raises RuntimeError in vllm/x.py:load when") and shown in text


@pytest.mark.parametrize("place, family", [
    ("huggingface_hub/", "hf_download"),
    ("vllm/v1/structured_output/", "structured_output_schema"),
    ("vllm/lora/", "lora_unsupported"),
])
def test_a_message_raised_where_a_round3_family_lives_gets_that_family(place, family):
    """raised_in: a message no signature knows, raised in the Hub client, the structured-output backends or vLLM's LoRA
    code, belongs to that family whatever its wording (the first such message of the index that no rule matches)."""
    from kvdoctor.explain.message_index import load_index

    tried = 0
    for template in load_index().templates():
        places = [loc for loc in template.locations if loc.kind == "raise" and loc.file.startswith(place)]
        if not places or len(template.locations) != len(places) or template.parts[0] is None:
            continue
        if sum(len(p) for p in template.parts if p) < 30 or tried >= 60:
            continue
        tried += 1
        report = explain_text(HEAD + f"{places[0].type or 'ValueError'}: "
                              + "".join(p if p is not None else "Q1Z" for p in template.parts) + "\n")
        evidence = " ".join(e for f in report.findings for e in f.evidence)
        if "matched by where vLLM raises it" in evidence and report.extra["family"] == family:
            return
    raise AssertionError(f"no message raised under {place} was given the family {family} by where it is raised")


def test_a_message_in_an_error_record_without_an_exception_is_placed_by_where_vllm_raises_it():
    """The same raised_in claim holds for a failure line that no exception carries: an ERROR record holding only
    the message (a wrapper logged it with logger.error(str(e))) gets the family of the place the index gives it."""
    from kvdoctor.explain.message_index import load_index

    tried = 0
    for template in load_index().templates():
        places = [loc for loc in template.locations if loc.kind == "raise" and loc.file.startswith("vllm/lora/")]
        if not places or len(template.locations) != len(places) or template.parts[0] is None:
            continue
        if sum(len(p) for p in template.parts if p) < 30 or tried >= 60:
            continue
        tried += 1
        message = "".join(p if p is not None else "Q1Z" for p in template.parts)
        report = explain_text(HEAD + f"ERROR 05-02 10:22:18 [serving.py:1] {message}\n")
        evidence = " ".join(e for f in report.findings for e in f.evidence)
        if "matched by where vLLM raises it" in evidence and report.extra["family"] == "lora_unsupported":
            assert report.exit_code("error") == 1
            return
    raise AssertionError("no ERROR record holding a message raised under vllm/lora/ got the family lora_unsupported")


@pytest.mark.parametrize("where, family", [
    (r":raise_if_cache_size_invalid$", "kv_cache_too_small"),
    (r":_check_scheme_supported$", "quant_min_capability"),
    (r":choose_mp_linear_kernel$", "quant_kernel_scheme"),
    (r":_get_and_verify_max_len$", "max_model_len_derived"),
    (r":_validate_prompt_len$|serving(?:_engine)?\.py:_validate_input$", "prompt_exceeds_max_model_len"),
])
def test_round4_raise_sites_claim_any_wording_raised_there(where, family):
    """raised_in of round 4 (E3): the functions whose every raise is their family's failure; a message raised
    there that no signature of the family knows (another release's wording) still gets the family."""
    import re

    from kvdoctor.explain.message_index import load_index

    place = re.compile(where)
    tried = 0
    for template in load_index().templates():
        places = [loc for loc in template.locations if loc.kind == "raise" and place.search(f"{loc.file}:{loc.function}")]
        if not places or len(template.locations) != len(places) or template.parts[0] is None or tried >= 60:
            continue
        tried += 1
        report = explain_text(HEAD + f"{places[0].type or 'ValueError'}: "
                              + "".join(p if p is not None else "Q1Z" for p in template.parts) + "\n")
        evidence = " ".join(e for f in report.findings for e in f.evidence)
        if "matched by where vLLM raises it" in evidence and report.extra["family"] == family:
            return
    raise AssertionError(f"no message raised at {where} was given the family {family} by where it is raised")
