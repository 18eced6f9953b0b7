"""Compose's `include:` (scan/compose_include.py): a Compose file scanned alone reads the files it includes, with
their own directory and .env; a folder scan reads each file once."""

from __future__ import annotations

from scan_support import write_tree

from kvdoctor.scan.run import read_manifests

TOP = """\
include:
  - llm/compose.yaml
  - path: [missing.yaml]
services:
  web:
    image: nginx
"""
LLM = """\
services:
  vllm:
    image: vllm/vllm-openai:${VLLM_TAG}
    command: --model Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 2
"""


def test_a_compose_file_scanned_alone_reads_what_it_includes(tmp_path):
    root = write_tree(tmp_path / "repo", {"compose.yaml": TOP, "llm/compose.yaml": LLM, "llm/.env": "VLLM_TAG=v0.9.2\n"})
    files, found, notes, unread = read_manifests([str(root / "compose.yaml")])
    (vllm,) = found
    assert (vllm.name, vllm.image, vllm.line) == ("vllm", "vllm/vllm-openai:v0.9.2", 2)  # the included file's .env
    assert vllm.file.endswith("llm/compose.yaml") and len(files) == 2
    assert any("included by" in n and "compose.yaml:2" in n for n in notes)
    assert not unread and any("include 'missing.yaml': no such file here" in n for n in notes)


def test_a_folder_scan_reads_an_included_file_once(tmp_path):
    root = write_tree(tmp_path / "repo", {"compose.yaml": TOP.replace("  - path: [missing.yaml]\n", ""),
                                          "llm/compose.yaml": LLM})  # fmt: skip
    assert [w.name for w in read_manifests([str(root)])[1]] == ["vllm"]
