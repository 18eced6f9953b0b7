"""The shipped message index: every release's templates, located from log lines, rebuilt byte-identically."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kvdoctor.builders.message_index import packing, templates
from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.families import load_families
from kvdoctor.explain.message_index import MessageIndex, load_index

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "kvdoctor" / "data" / "message_index" / "index.json.gz"


def _line(template) -> str:
    """A log line the template would print, with made-up values in its placeholders."""
    return "ValueError: " + "".join(p if p is not None else f"Q{i}Z" for i, p in enumerate(template.parts))


@pytest.fixture(scope="module")
def index() -> MessageIndex:
    loaded = load_index()
    assert loaded is not None
    return loaded


def test_index_covers_every_release_and_the_dependencies(index):
    releases = index.packages["vllm"]
    assert releases[0] == "0.7.3" and releases[-1] == "0.34.0" and len(releases) >= 33
    assert {"triton", "torch", "flashinfer", "transformers", "huggingface_hub"} <= set(index.packages)
    assert len(index) > 5000
    assert SHIPPED.stat().st_size < 1.5 * 1024 * 1024


def test_the_selector_error_is_located_in_cuda_platform(index):
    line = ("ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size=576, "
            "dtype=torch.bfloat16, kv_cache_dtype=fp8_ds_mla). Reasons: {FLASH_ATTN: [kv_cache_dtype not supported]}.")
    located = index.locate(line, "0.30.0")
    assert located is not None
    assert any(l.file == "vllm/platforms/cuda.py" and l.function == "get_attn_backend_cls" for l in located.locations)
    assert "raised by vllm/platforms/cuda.py in CudaPlatformBase.get_attn_backend_cls (vllm 0.11.2-0.34.0)" in \
        located.describe()


def test_the_logs_release_picks_the_locations_that_have_it(index):
    located = index.locate("ValueError: Unknown TurboQuant cache dtype: 'auto'. Valid presets: a, b", "0.25.1")
    assert located is not None
    assert all(l.has_release("0.25.1") for l in located.locations)


def test_a_line_cut_short_is_located_by_its_opening(index):
    cut = "ValueError: To serve at least one request with the model's max seq len (100000), (4.26 GiB KV cach"
    located = index.locate(cut)
    assert located is not None and located.values == ()  # matched by its opening: no placeholder is in the line
    assert any("check_enough_kv_cache_memory" in l.function for l in located.locations)


def test_the_first_sentence_of_a_longer_message_is_located(index):
    """A reporter (or a log) that kept only the message's first sentence: `Model architectures ['X'] are not
    supported for now.` of vLLM's `... for now. Supported architectures: [...]` (a real GLM-4 thread, batch 29); a
    line holding only the short opening literal is not."""
    located = index.locate("Model architectures ['GlmForCausalLM'] are not supported for now.")
    assert located is not None and located.locations[0].function == "_raise_for_unsupported"
    assert index.locate("Model architectures ['GlmForCausalLM'] are listed here") is None


def test_an_unrelated_line_is_not_located(index):
    assert index.locate("INFO 05-02 10:22:18 [loggers.py:1] Avg prompt throughput: 0.0 tokens/s") is None


def test_a_synthetic_line_per_template_is_located(index):
    """Every 7th template of the whole index (about 1,800): its own line finds it (or a template of equal text)."""
    templates = list(index.templates())
    sample = templates[::7]
    missed = []
    for template in sample:
        located = index.locate(_line(template))
        if located is None or located.template.literal_size < template.literal_size:
            missed.append(template.text)
    assert len(missed) <= len(sample) // 100, missed[:10]


def test_messages_raised_where_a_family_says_are_explained_by_it(index):
    """Tests generated per family: a line from each template vLLM raises in a family's `raised_in` places."""
    families = load_families()
    checked = 0
    for pattern, rule_id in families.raised_in:
        templates = [t for t in index.templates()
                     if any(l.package in ("vllm", "flashinfer") and pattern.search(f"{l.file}:{l.function}")
                            for l in t.locations) and t.parts[0] is not None and len(t.parts[0]) > 20]
        for template in templates[:3]:
            report = explain_text(_line(template))
            expected = {rule_id, families.refines.get(rule_id, rule_id)}
            rules = {f.rule_id for f in report.findings}
            assert report.exit_code("error") == 1, template.text
            assert rules & (expected | set(load_families().family_of)), (template.text, rules)
            assert report.extra["family"] == families.family_of[rule_id] or report.extra["primary"]["rule_id"] in expected, (
                template.text, report.extra["primary"], report.extra["family"])
            checked += 1
    assert checked >= 5


def test_repacking_the_shipped_index_is_byte_identical(tmp_path):
    shipped = SHIPPED.read_bytes()
    data = packing.read(SHIPPED)
    out = tmp_path / "index.json.gz"
    packing.write(packing.pack(packing.unpack(data), data["packages"]), out)
    assert out.read_bytes() == shipped


def test_templates_from_source(tmp_path):
    source = b'''
import logging
logger = logging.getLogger(__name__)
def check(x, n):
    if x:
        raise ValueError(f"Total number of attention heads ({x}) must be divisible by tensor parallel size ({n}).")
    msg = "Bfloat16 is only supported on GPUs with compute capability of at least %s" % n
    if n:
        raise RuntimeError(msg)
    logger.error("Failed to load the worker %s after %d tries", x, n)
    logger.info("ignored info message that is long enough")
    raise TypeError("{} bad".format(x))
'''
    found = templates.templates_in_source(source, "vllm/config/model.py")
    parts = {entry[2] for entry in found}
    assert ("Total number of attention heads (", None, ") must be divisible by tensor parallel size (", None, ").") in parts
    assert ("Bfloat16 is only supported on GPUs with compute capability of at least ", None) in parts
    assert ("Failed to load the worker", None, "after", None, "tries") in parts or \
        ("Failed to load the worker ", None, " after ", None, " tries") in parts
    assert not any("ignored info" in (p or "") for entry in parts for p in entry)
    assert all(entry[3] == "vllm/config/model.py" and entry[4] == "check" for entry in found)
    conditions = {entry[1]: entry[5] for entry in found if entry[0] == "raise"}
    assert conditions == {"ValueError": "x", "RuntimeError": "n"}  # the `if` around each raise
    assert packing.release_ranges({"0.20.0", "0.21.0", "0.23.0"}, ["0.20.0", "0.21.0", "0.22.0", "0.23.0"]) == \
        "0.20.0-0.21.0,0.23.0"


def test_a_raise_under_else_or_elif_keeps_its_own_guard():
    source = b'''
def pick(kv, capability):
    if kv == "fp8":
        if capability < (8, 9):
            raise ValueError(f"fp8 KV cache needs SM 8.9 or newer, this GPU is SM {capability}")
    elif kv.startswith("turboquant"):
        raise NotImplementedError(f"TurboQuant is not supported by this backend ({kv})")
    else:
        raise ValueError(f"Unknown KV cache dtype for this backend: {kv}")
'''
    found = {entry[1] + entry[2][0][:8]: entry[5] for entry in templates.templates_in_source(source, "vllm/x.py")}
    assert found == {"ValueErrorfp8 KV c": "capability < (8, 9)",
                     "NotImplementedErrorTurboQua": "kv.startswith('turboquant')",
                     "ValueErrorUnknown ": "not (kv.startswith('turboquant'))"}


def test_the_guard_travels_through_the_index_into_the_unknown_failure(monkeypatch):
    """A rebuilt index keeps each raise's condition; KVD399 then says when vLLM raises the message."""
    import kvdoctor.explain.message_index as message_index
    from kvdoctor.explain.explain import explain_text

    entry = {"package": "vllm", "kind": "raise", "type": "ValueError", "file": "vllm/v1/spec_decode/eagle.py",
             "function": "load_model", "releases": "0.30.0", "condition": "draft_model_config.max_model_len < n",
             "parts": ["The draft model of the speculative decoder cannot hold ", None, " tokens of the target"]}
    packed = packing.pack([entry], {"vllm": ["0.30.0"]})
    assert packing.unpack(packed)[0]["condition"] == entry["condition"]
    index = message_index.MessageIndex(json.loads(json.dumps(packed)))
    monkeypatch.setattr(message_index, "load_index", lambda: index)
    report = explain_text("INFO 05-02 10:22:10 [api_server.py:1] vLLM API server version 0.30.0\n"
                          "ValueError: The draft model of the speculative decoder cannot hold 4096 tokens of the target\n")
    cause = report.findings[0].cause
    assert "vLLM 0.30.0 raises ValueError in vllm/v1/spec_decode/eagle.py:load_model when " \
           "`draft_model_config.max_model_len < n`" in cause
