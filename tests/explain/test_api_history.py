"""explain's wrapper_api_mismatch causes name the vLLM releases that have what the program asked for, read from
data/api_history.json.gz (built from the wheels by kvdoctor/builders/api_history): synthetic lines of each shape
with real vLLM names, the range wording and pip spec on a small history made here, and the lazy load."""

from __future__ import annotations

import pytest

from kvdoctor.builders.api_history import packing
from kvdoctor.explain import api_history
from kvdoctor.explain.explain import explain_text

VERSION_LINE = "INFO 05-02 10:22:18 [api_server.py:1] vLLM API server version {}\n"

# (log line, the rule, what the cause and fix must say): real names, ranges as the wheels give them
CASES = [
    ("ImportError: cannot import name 'FlexibleArgumentParser' from 'vllm.utils'", "KVD403",
     ["`FlexibleArgumentParser` in `vllm.utils` in 0.5.1-0.11.0 (removed in 0.11.1)",
      "`vllm.utils.argparse_utils` has it from 0.11.1 on", "Import FlexibleArgumentParser from vllm.utils.argparse_utils"]),
    ("ImportError: cannot import name 'GuidedDecodingParams' from 'vllm.sampling_params'", "KVD403",
     ["in 0.6.3-0.11.2 (removed in 0.12.0)", "pip install 'vllm>=0.6.3,<0.12.0'"]),
    ("AttributeError: 'LLMEngine' object has no attribute 'model_executor'", "KVD403",
     ["`vllm.engine.llm_engine.LLMEngine` has `model_executor` in 0.4.3-0.10.2 (removed in 0.11.0)"]),
    ("TypeError: EngineArgs.__init__() got an unexpected keyword argument 'worker_extension_cls'", "KVD379",
     ["`vllm.engine.arg_utils.EngineArgs` takes `worker_extension_cls` from 0.8.0 on", "pip install 'vllm>=0.8.0'"]),
    # a subclass takes its base's fields: AsyncEngineArgs(EngineArgs)
    ("TypeError: AsyncEngineArgs.__init__() got an unexpected keyword argument 'worker_extension_cls'", "KVD379",
     ["`vllm.engine.arg_utils.AsyncEngineArgs` takes `worker_extension_cls` from 0.8.0 on"]),
    # an argument the installed release requires: the fix names the releases that do not
    ("TypeError: init_app_state() missing 1 required positional argument: 'vllm_config'", "KVD406",
     ["`vllm.entrypoints.openai.api_server.init_app_state` takes `vllm_config` in 0.8.5-0.11.0 (removed in 0.11.1)",
      "or a vLLM whose init_app_state does not need it: 0.6.2-0.8.4, 0.11.1-0.34.0"]),
    ("ModuleNotFoundError: No module named 'vllm.transformers_utils.tokenizer'", "KVD405",
     ["the module `vllm.transformers_utils.tokenizer` in 0.4.3-0.21.0 (removed in 0.22.0)",
      "pip install 'vllm>=0.4.3,<0.22.0'"]),
    ("ImportError: cannot import name 'FrobnicateEngine' from 'vllm.engine'", "KVD403",
     ["No vLLM release read (0.4.3-0.34.0, 76 releases) has `FrobnicateEngine`", "its spelling"]),
    # vllm/distributed/__init__.py re-exports parallel_state by `from .parallel_state import *`
    ("module 'vllm.distributed' has no attribute 'get_tp_group'", "KVD403", ["`get_tp_group` in `vllm.distributed` from"]),
]


@pytest.mark.parametrize("line, rule_id, shows", CASES, ids=[c[0][:60] for c in CASES])
def test_cause_and_fix_name_the_releases(line, rule_id, shows):
    report = explain_text(line + "\n")
    finding = report.findings[0]
    assert finding.rule_id == rule_id
    text = finding.cause + " " + " ".join(f.title for f in finding.fixes)
    for expected in shows:
        assert expected in text
    assert "{" not in text and "unknown" not in text and "(not in the log)" not in text


def test_the_logs_own_release_says_which_side_the_install_is_on():
    newer = explain_text(VERSION_LINE.format("0.13.0") + "ImportError: cannot import name 'GuidedDecodingParams' "
                         "from 'vllm.sampling_params'\n").findings[0]
    assert "The log's vLLM 0.13.0 is newer" in newer.cause
    older = explain_text(VERSION_LINE.format("0.7.3") + "TypeError: EngineArgs.__init__() got an unexpected keyword "
                         "argument 'worker_extension_cls'\n").findings[0]
    assert "The log's vLLM 0.7.3 is older" in older.cause


@pytest.fixture
def small_history(tmp_path, monkeypatch):
    releases = ["0.1.0", "0.2.0", "0.3.0", "0.4.0"]
    masks = {("module", "vllm.a", ""): 0b1111, ("name", "vllm.a", "Kept"): 0b1111, ("name", "vllm.a", "Gone"): 0b0011,
             ("name", "vllm.a", "New"): 0b1100, ("module", "vllm.b", ""): 0b1100, ("name", "vllm.b", "Gone"): 0b1100}
    path = tmp_path / "history.json.gz"
    packing.write(packing.pack(masks, releases, releases, complete=True), path)
    monkeypatch.setattr(api_history, "HISTORY_FILE", path)
    api_history.load_history.cache_clear()
    yield
    api_history.load_history.cache_clear()


def test_range_wording_and_pip_spec(small_history):
    assert api_history.describe(api_history.name_ranges("vllm.a", "Gone")) == "in 0.1.0-0.2.0 (removed in 0.3.0)"
    assert api_history.describe(api_history.name_ranges("vllm.a", "New")) == "from 0.3.0 on"
    assert api_history.describe(api_history.name_ranges("vllm.a", "Kept")) == "in every release read (0.1.0-0.4.0)"
    assert api_history.install_spec(api_history.name_ranges("vllm.a", "Gone")) == "vllm>=0.1.0,<0.3.0"
    assert api_history.install_spec(api_history.name_ranges("vllm.a", "New")) == "vllm>=0.3.0"
    moved = api_history.api_values({"module": "vllm.a", "name": "Gone"}, {"vllm.version": "0.4.0"})
    assert "It moved: `vllm.b` has it from 0.3.0 on" in moved["api_text"] and "newer" in moved["api_text"]
    assert api_history.api_values({"module": "vllm.b", "name": "Kept"}, {})["api_fix"].startswith("Import Kept from vllm.a")


def test_incomplete_history_says_between(small_history, tmp_path, monkeypatch):
    path = tmp_path / "partial.json.gz"
    packing.write(packing.pack({("module", "vllm.a", ""): 0b011}, ["0.1.0", "0.2.0", "0.5.0"], ["0.1.0", "0.2.0", "0.5.0"],
                               complete=False), path)
    monkeypatch.setattr(api_history, "HISTORY_FILE", path)
    api_history.load_history.cache_clear()
    ranges = api_history.module_ranges("vllm.a")
    assert "gone by 0.5.0, removed in a release between" in api_history.describe(ranges)
    assert api_history.install_spec(ranges) == "vllm>=0.1.0,<=0.2.0"


def test_history_loads_only_for_such_a_line():
    api_history.load_history.cache_clear()
    explain_text("ERROR 05-02 10:22:18 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    assert api_history.load_history.cache_info().currsize == 0
    explain_text("ImportError: cannot import name 'LLM' from 'vllm.entrypoints.llm'\n")
    assert api_history.load_history.cache_info().currsize == 1


def test_a_missing_module_vllm_itself_imports_is_no_release_mismatch():
    """The failed import is vLLM's own (its innermost frame in vllm/): a broken or shadowed install, not a program
    written for another release; the family does not claim it."""
    log = ("Traceback (most recent call last):\n"
           '  File "/venv/lib/python3.11/site-packages/vllm/attention/backends/flash_attn.py", line 20, in <module>\n'
           "    from vllm.vllm_flash_attn import flash_attn_varlen_func\n"
           "ModuleNotFoundError: No module named 'vllm.vllm_flash_attn'\n")
    assert "KVD405" not in {f.rule_id for f in explain_text(log).findings}
    framework = log.replace("/site-packages/vllm/attention/backends/flash_attn.py", "/site-packages/verl/rollout.py")
    assert explain_text(framework).findings[0].rule_id == "KVD405"


def test_a_name_the_logs_release_has_is_no_release_mismatch():
    line = "ImportError: cannot import name 'GuidedDecodingParams' from 'vllm.sampling_params'\n"
    assert explain_text(VERSION_LINE.format("0.13.0") + line).findings[0].rule_id == "KVD403"
    assert "KVD403" not in {f.rule_id for f in explain_text(VERSION_LINE.format("0.10.2") + line).findings}


def test_an_unrecognized_serve_flag_names_the_releases_whose_serve_arguments_have_it():
    finding = explain_text("api_server.py: error: unrecognized arguments: --worker-extension-cls foo --no-such-flag\n").findings[0]
    assert finding.rule_id == "KVD369"
    assert "`--worker-extension-cls` (the serve arguments' field worker_extension_cls) exists from 0.8.0 on" in finding.cause
    assert "no release read has a serve-argument field no_such_flag" in finding.cause


def test_a_module_every_release_has_missing_from_a_programs_import_means_an_older_or_shadowed_vllm():
    """`No module named 'vllm.lora'` from a framework's frame: every release read has vllm.lora, so the vLLM the
    program imports predates them (or is not the installed package); a name every release has stays a circular
    import, not claimed."""
    log = ("Traceback (most recent call last):\n"
           '  File "/src/llamafactory/chat/vllm_engine.py", line 29, in <module>\n'
           "    from vllm.lora.request import LoRARequest\n"
           "ModuleNotFoundError: No module named 'vllm.lora'\n")
    finding = explain_text(log).findings[0]
    assert finding.rule_id == "KVD405"
    assert "older than 0.4" in finding.cause and "shadows" in finding.cause
    assert "pip install -U vllm" in finding.fixes[0].title
    own = log.replace("/src/llamafactory/chat/vllm_engine.py", "/venv/lib/python3.11/site-packages/vllm/worker/x.py")
    assert "KVD405" not in {f.rule_id for f in explain_text(own).findings}
