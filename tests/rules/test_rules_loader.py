"""The one rules loader: every bundled file of kvdoctor/data/rules, ids unique across all of them and the user's."""

from __future__ import annotations

import pytest

from kvdoctor.base.errors import RulesFileError
from kvdoctor.rules import load_all_rules
from kvdoctor.rules import loader

RULE = """
  - id: {id}
    title: "t"
    severity: warning
    when: {{fact: serve.kv_cache_dtype, eq: fp8}}
    cause: "c"
    references: [https://example.org/runbook]
"""


def _file(path, *ids, stage=None):
    head = f"stage: {stage}\n" if stage else ""
    path.write_text(head + "rules:\n" + "".join(RULE.format(id=i).lstrip("\n") for i in ids))
    return path


def test_every_bundled_file_is_read_and_names_its_stage():
    stages = {f.path.name: f.stage for f in loader.bundled_files()}
    assert {"check.yaml", "check-fit.yaml", "explain.yaml", "scan.yaml"} <= set(stages)
    assert all(stage == name.split(".")[0].split("-")[0] for name, stage in stages.items())  # check-fit.yaml: check


@pytest.mark.parametrize("stage", ["scan", "explain"])
def test_a_user_rule_reusing_an_id_of_any_bundled_file_is_refused_naming_both(tmp_path, stage):
    (bundled,) = [f for f in loader.bundled_files() if f.stage == stage]
    taken = bundled.raw_rules()[0]["id"]
    with pytest.raises(RulesFileError) as raised:
        load_all_rules([_file(tmp_path / "org.yaml", taken)])
    message = raised.value.one_line()
    assert taken in message and "org.yaml" in message and str(bundled.path) in message


def test_two_bundled_files_sharing_an_id_are_refused_naming_both(tmp_path, monkeypatch):
    _file(tmp_path / "a.yaml", "ORG001", stage="check")
    _file(tmp_path / "b.yaml", "ORG002", "ORG001", stage="scan")
    monkeypatch.setattr(loader, "RULES_DIR", tmp_path)
    with pytest.raises(RulesFileError) as raised:
        loader.bundled_files()
    message = raised.value.one_line()
    assert "ORG001" in message and "a.yaml" in message and "b.yaml" in message


def test_a_bundled_file_names_a_known_stage(tmp_path, monkeypatch):
    _file(tmp_path / "a.yaml", "ORG001", stage="deploy")
    monkeypatch.setattr(loader, "RULES_DIR", tmp_path)
    with pytest.raises(RulesFileError, match="'stage' must be one of check, scan, explain"):
        loader.bundled_files()


def test_each_stage_gets_only_its_own_files_rules(tmp_path, monkeypatch):
    from kvdoctor.data.fact_names import is_fact_name

    _file(tmp_path / "a.yaml", "ORG001", stage="check")
    _file(tmp_path / "b.yaml", "ORG002", stage="scan")
    monkeypatch.setattr(loader, "RULES_DIR", tmp_path)
    assert [r.id for r in loader.bundled_rules("scan", is_fact_name)] == ["ORG002"]
    assert [r.id for r in loader.bundled_rules("check", is_fact_name)] == ["ORG001"]


def test_an_edited_user_file_is_read_again(tmp_path):
    import os

    path = _file(tmp_path / "org.yaml", "ORG001")
    assert load_all_rules([path])[-1].id == "ORG001"
    _file(path, "ORG002")
    os.utime(path, ns=(1, 1))  # a different stamp even within the file system's time resolution
    assert load_all_rules([path])[-1].id == "ORG002"


def test_since_is_a_kvdoctor_release(tmp_path):
    path = tmp_path / "org.yaml"
    path.write_text("rules:\n" + RULE.format(id="ORG001").strip("\n") + '\n    since: "last week"\n')
    with pytest.raises(RulesFileError, match="field 'since'"):
        load_all_rules([path])
    path.write_text("rules:\n" + RULE.format(id="ORG001").strip("\n") + '\n    since: "0.2.0"\n')
    assert load_all_rules([path])[-1].since == "0.2.0"
