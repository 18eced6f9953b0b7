import re

from formats_support import IGNORE_REASON, failing_report, passing_report

from kvdoctor.report.check import github

COMMAND = re.compile(r"^::(error|warning|notice) title=([^:\n]*)::(.*)$")


def _parse(text: str) -> list[tuple[str, str, str]]:
    lines = text.splitlines()
    parsed = [COMMAND.match(line) for line in lines]
    assert all(parsed), [line for line, m in zip(lines, parsed) if not m]  # every line one workflow command
    return [m.groups() for m in parsed]


def _unescape(text: str) -> str:
    return text.replace("%0A", "\n").replace("%0D", "\r").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


def test_one_annotation_per_finding_plus_verdict(tmp_path):
    commands = _parse(github.render(failing_report(tmp_path)))
    by_title = {_unescape(t).split(" ")[0]: (level, _unescape(msg)) for level, t, msg in commands}
    assert by_title["KVD101"][0] == "error"
    assert "--dtype float16" in by_title["KVD101"][1]
    assert by_title["KVD104"][0] == "notice" and IGNORE_REASON in by_title["KVD104"][1]
    assert commands[-1][0] == "error" and "FAIL" in commands[-1][1]


def test_special_characters_are_escaped(tmp_path):
    text = github.render(failing_report(tmp_path))
    kvd102 = next(line for line in text.splitlines() if "KVD102" in line.split("::")[1])
    title = kvd102.split("::")[1]
    assert "%3A" in title and ":" not in title.removeprefix("error title=")  # "cache dtype: 'auto'" in the title
    assert "\n" not in kvd102


def test_pass_is_a_notice(tmp_path):
    assert _parse(github.render(passing_report(tmp_path))) [-1][0] == "notice"
