"""Every flag the release's parser refuses is placed at its own line: the first as the finding's location, the others
as related locations (argparse names them all in one "unrecognized arguments" message)."""

from __future__ import annotations

from scan_support import finding, scan, write_tree

COMPOSE = """services:
  vllm:
    image: vllm/vllm-openai:v0.25.1
    command:
      - --model
      - Qwen/Qwen3-8B
      - --swap-space
      - "4"
      - --disable-log-requests
      - --max-model-len
      - "8192"
"""


def test_each_refused_flag_has_its_line(tmp_path):
    root = write_tree(tmp_path / "repo", {"compose.yaml": COMPOSE})
    (served,) = scan([str(root)], tmp_path, gpu=None).workloads
    placed = finding(served, "KVD004")
    assert "--swap-space 4 --disable-log-requests" in placed.finding.title
    assert placed.location.line == 7 and [r.line for r in placed.related] == [9]
