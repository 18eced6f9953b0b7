"""kvdoctor's own YAML files are parsed once per content and read back from its cache."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kvdoctor.base.yaml_safe import YAMLError, load_yaml, load_yaml_cached


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KVDOCTOR_CACHE_DIR", str(tmp_path))
    return tmp_path / "parsed-yaml"


def test_a_file_is_parsed_once_and_an_edit_replaces_its_entry(cache):
    assert load_yaml_cached("a: [1, 2]\n", "x.yaml") == {"a": [1, 2]}
    (entry,) = cache.glob("x.yaml-*.json")
    entry.write_text(json.dumps({"a": "from the cache"}))  # the next read is the cached form, not a parse
    assert load_yaml_cached("a: [1, 2]\n", "x.yaml") == {"a": "from the cache"}
    assert load_yaml_cached("a: 3\n", "x.yaml") == {"a": 3}
    assert [p.name for p in cache.glob("x.yaml-*.json")] != [entry.name] and len(list(cache.glob("x.yaml-*"))) == 1


def test_data_json_would_change_is_not_cached(cache):
    assert load_yaml_cached("1: one\nwhen: 2024-01-02\n", "y.yaml") == load_yaml("1: one\nwhen: 2024-01-02\n")
    assert not list(cache.glob("y.yaml-*"))


def test_an_unwritable_cache_still_parses(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("KVDOCTOR_CACHE_DIR", str(blocker))
    assert load_yaml_cached("a: 1\n", "z.yaml") == {"a": 1}


def test_invalid_yaml_says_where_and_what():
    with pytest.raises(YAMLError) as err:
        load_yaml("a: [1,\n")
    assert err.value.line == 2 and err.value.kind == "ParserError"


def test_a_warm_check_does_not_import_pyyaml(tmp_path):
    code = ("import sys\nfrom kvdoctor.rules import load_all_rules\nfrom kvdoctor.data.gpus import "
            "resolve_gpu_target\nload_all_rules(); resolve_gpu_target('A100')\nprint('yaml' in sys.modules)")
    env = {"KVDOCTOR_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert first.stdout.strip() == "True", first.stderr
    assert second.stdout.strip() == "False", second.stderr
