"""Derived facts: a named release (not the installed one) reports the torch, Triton and FlashInfer its wheel pins,
and a Triton rule is decided from the pin when no local Triton says otherwise."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conftest import EXAMPLE_MODEL, REPO
from kvdoctor.facts.derive import exact_pin

WHAT_IF = ["check", "--model", str(EXAMPLE_MODEL), "--vllm-version", "0.25.1", "--no-compile", "-f", "json"]


def hidden(tmp_path: Path, *distributions: str) -> dict[str, str]:
    """Environment whose kvdoctor sees none of `distributions` installed (tests/test_faults.py hides Triton so)."""
    directory = tmp_path / "shim"
    directory.mkdir()
    (directory / "sitecustomize.py").write_text(textwrap.dedent(f"""
        import sys
        for name in {distributions!r}:
            sys.modules[name] = None  # import fails; importlib.util.find_spec is None
        import kvdoctor.facts.probes.versions as _versions  # and no distribution metadata says it is installed
        _installed = _versions.installed_version
        def _installed_version(*names, module=None):
            if set(names) & set({distributions!r}):
                return None
            return _installed(*names, module=module)
        _versions.installed_version = _installed_version
    """))
    return {"PYTHONPATH": f"{directory}:{REPO}"}


def facts_of(result) -> dict:
    assert result.code in (0, 1), result.stderr[-2000:]
    return result.json()


def test_a_named_release_reports_the_torch_and_flashinfer_its_wheel_pins(run_cli, tmp_path):
    document = facts_of(run_cli(*WHAT_IF, "--gpu", "A100", env=hidden(tmp_path, "torch")))
    assert document["facts"]["torch.version"] == "2.11.0"  # vLLM 0.25.1 pins torch==2.11.0
    assert document["facts"]["flashinfer.version"] == "0.6.13"  # and flashinfer-python==0.6.13
    assert document["facts"]["flashinfer.installed"] is True


def test_kvd150_is_decided_from_the_triton_pin_when_no_triton_is_installed(run_cli, tmp_path):
    document = facts_of(run_cli(*WHAT_IF, "--gpu", "sm_120", env=hidden(tmp_path, "triton")))
    assert document["facts"]["triton.version"] == "3.6.0"  # vLLM 0.25.1's Triton pin: its ptxas knows SM 12.0
    assert [f for f in document["findings"] if f["rule_id"] == "KVD150"] == []  # neither fired nor undecided


@pytest.mark.parametrize("spec, version", [
    ("2.11.0", "2.11.0"), ("0.7.2.post1", "0.7.2.post1"), ("~=3.8.0", None), (">=2.9,<3", None), ("==2.11.0", None),
    (None, None), ("", None),
])  # fmt: skip
def test_only_an_exact_pin_names_a_version(spec, version):
    # the pack loader strips '==' from exact pins; anything with an operator left is a range
    assert exact_pin(spec) == version
