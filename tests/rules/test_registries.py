"""Knowledge lives in data: failure kinds in one registry, rule roles declared in the rules files, no rule id in code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvdoctor.dryrun.kinds import failure_kinds
from kvdoctor.base.errors import RulesFileError
from kvdoctor.explain.families import load_families
from kvdoctor.rules import load_all_rules
from kvdoctor.rules.loader import EXPLAIN_ROLES

PACKAGE = Path(__file__).resolve().parents[2] / "kvdoctor"
RULE = """schema_version: 1
rules:
  - id: ORG101
    title: t
    severity: error
    cause: c
    compile_kind: {kind}
    when: {{fact: serve.kv_cache_dtype, eq: fp8}}
"""


def test_no_rule_id_in_python():
    hits = [f"{p.relative_to(PACKAGE)}:{n}" for p in PACKAGE.rglob("*.py")
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if re.search(r"KVD[0-9]{3}", line)]  # fmt: skip
    assert hits == []


def test_every_compile_kind_of_the_shipped_rules_is_registered():
    kinds = {kind for r in load_all_rules() + list(load_families().rules) for kind in r.compile_kinds}
    assert kinds and kinds <= set(failure_kinds())


def test_a_misspelt_compile_kind_is_refused_naming_the_rule_and_the_closest_kind(tmp_path):
    path = tmp_path / "org.yaml"
    path.write_text(RULE.format(kind="ptxas_eror"))
    with pytest.raises(RulesFileError) as raised:
        load_all_rules([path])
    assert "rule 'ORG101'" in raised.value.one_line() and "did you mean ptxas_error?" in raised.value.one_line()
    path.write_text(RULE.format(kind="ptxas_error"))
    assert any(r.id == "ORG101" for r in load_all_rules([path]))


def test_a_misspelt_compile_kind_is_exit_2_on_one_line(run_cli, tmp_path):
    path = tmp_path / "org.yaml"
    path.write_text(RULE.format(kind="layout_change"))
    result = run_cli("check", "--model", str(Path(__file__).resolve().parents[2] / "examples" / "qwen2.5-3b-instruct"),
                     "--kv-cache-dtype", "fp8", "--gpu", "A100", "--vllm-version", "0.25.1", "--no-compile",
                     "--rules", str(path))  # fmt: skip
    assert result.code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "ORG101" in result.stderr and "compile_kind" in result.stderr


def test_explain_roles_are_declared_once_each_where_explain_needs_one():
    rules = load_all_rules() + list(load_families().rules)
    roles = {}
    for rule in rules:
        if rule.explain_role:
            roles.setdefault(rule.explain_role, []).append(rule.id)
    assert set(roles) == set(EXPLAIN_ROLES)
    assert len(roles["unknown_failure"]) == 1


def test_every_failure_kind_the_classifier_and_guards_can_give_is_registered():
    source = "\n".join(p.read_text(encoding="utf-8") for p in (PACKAGE / "dryrun").glob("*.py"))
    given = set(re.findall(r'return "([a-z0-9_]+)"', (PACKAGE / "dryrun" / "classify.py").read_text()))
    given |= set(re.findall(r'"kind": "([a-z0-9_]+)"', source)) | set(re.findall(r'kind="([a-z0-9_]+)"', source))
    given |= set(re.findall(r'"(triton_attn_[a-z0-9]+_guard)"', source))
    assert given and given <= set(failure_kinds()), given - set(failure_kinds())
