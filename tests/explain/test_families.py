"""Failure families (kvdoctor/data/rules/explain.yaml). Each family rule's firing log and near miss sit beside it
in the file and run in tests/rules/test_rule_examples.py."""

from __future__ import annotations

from kvdoctor.explain.explain import explain_text
from kvdoctor.explain.families import paste_tolerant


def test_a_space_in_a_family_pattern_matches_a_wrapped_line():
    import re

    assert re.search(paste_tolerant("KV cache is needed"), "KV cache\nis  needed")
    assert paste_tolerant("[ab ]c d") == r"[ab ]c\s+d"


def test_a_consequence_gives_way_to_its_cause():
    log = ("/usr/lib/python3/site-packages/torch/cuda/__init__.py:128: UserWarning: CUDA initialization: The NVIDIA "
           "driver on your system is too old (found version 11040).\n"
           "RuntimeError: No CUDA GPUs are available\n")
    report = explain_text(log)
    assert report.extra["primary"]["rule_id"] == "KVD303"
