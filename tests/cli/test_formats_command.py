"""`kvdoctor formats [COMMAND]`: each command's menu from the one format registry."""

from __future__ import annotations


def test_formats_lists_checks_menu_by_default_and_any_commands_on_request(run_cli):
    assert run_cli("formats").stdout.split() == ["github", "json", "junit", "markdown", "prometheus", "sarif", "text"]
    assert run_cli("formats", "scan").stdout.split() == ["github", "json", "junit", "markdown", "sarif", "text"]
    assert run_cli("formats", "matrix").stdout.split() == ["table", "json", "csv", "html"]
    assert run_cli("formats", "verify").stdout.split() == ["github", "json", "junit", "markdown", "text"]


def test_formats_of_a_command_without_formats_is_one_line_and_exit_2(run_cli):
    result = run_cli("formats", "explainn")
    assert result.code == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "use one of check, explain, scan, matrix, verify" in result.stderr
