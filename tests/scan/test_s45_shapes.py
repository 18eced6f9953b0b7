"""A shape batch s45 showed (measured once, after the stop's changes): a Compose-named file in the legacy version 1
format (services at the top level, no `services:` mapping), which Docker Compose v2 refuses: reported as a file not
read, with the reason, never silence and never a pass. Written from compose-spec's schema (additional properties are
not allowed at the top level)."""

from __future__ import annotations

from scan_support import scan

LEGACY = """\
vllm:
  image: vllm/vllm-openai:latest
  entrypoint: ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "meta-llama/Llama-3.1-8B-Instruct"]
"""


def test_a_legacy_compose_file_is_reported_unread_with_the_reason(tmp_path):
    (tmp_path / "docker-compose.yaml").write_text(LEGACY)
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "docker-compose.yaml").write_text("services:\n" + "".join("  " + l + "\n" for l in LEGACY.splitlines()))
    report = scan([str(tmp_path)], tmp_path)
    (unread,) = report.unread
    assert "docker-compose.yaml:1" in unread.message and "no `services:` mapping" in unread.message
    assert [r.workload.name for r in report.workloads] == ["vllm"]  # the other file is still checked
    assert report.exit_code("error") == 2


def test_other_yaml_with_top_level_maps_is_not_taken_for_compose(tmp_path):
    (tmp_path / "values.yaml").write_text(LEGACY)
    assert not scan([str(tmp_path / "values.yaml")], tmp_path).unread
