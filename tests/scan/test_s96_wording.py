"""Stop 47 (issue 27): with the version unknown, an argument only old releases refuse is named with those releases,
in the finding's title and in the note that keeps the flags unjudged (not the candidate releases, which accept it)."""

from __future__ import annotations

from scan_support import scan

from kvdoctor.check.run import CheckSettings
from kvdoctor.scan.judge import ScanDefaults
from kvdoctor.scan.run import run_scan

VENV_SCRIPT = """\
#!/bin/bash
pip install vllm
vllm serve Qwen/Qwen2.5-3B-Instruct --enable-auto-tool-choice --tool-call-parser hermes
"""


def test_an_argument_only_old_releases_refuse_names_those_releases(tmp_path):
    (tmp_path / "run.sh").write_text(VENV_SCRIPT)
    (result,) = scan([str(tmp_path / "run.sh")], tmp_path, gpu="H100").workloads
    (kvd004,) = [p.finding for p in result.placed if p.finding.rule_id == "KVD004"]
    assert kvd004.status == "undecided"
    refused_by = result.report.facts["serve.args_rejected_by"]
    assert refused_by.startswith("0.4") and refused_by in kvd004.title, kvd004.title
    assert "version unknown" not in kvd004.title
    (note,) = [n for n in result.report.notes if "kept, not judged" in n]
    assert f"{refused_by} refuse them" in note and "accept them" in note, note


def test_a_refused_argument_of_a_named_release_names_that_release(tmp_path):
    (tmp_path / "run.sh").write_text(VENV_SCRIPT.replace("--enable-auto-tool-choice", "--max-modle-len 4"))
    defaults = ScanDefaults(gpu="H100", vllm_version="0.25.1", offline=True, cache_dir=tmp_path / "cache")
    (result,) = run_scan([str(tmp_path / "run.sh")], defaults, CheckSettings(compile=False)).workloads
    (kvd004,) = [p.finding for p in result.placed if p.finding.rule_id == "KVD004"]
    assert kvd004.status == "fired" and "vLLM 0.25.1 refuses" in kvd004.title, kvd004.title
