"""GitHub workflow commands: what the runner would misread is escaped, file and line go where it looks."""

from __future__ import annotations

from kvdoctor.report.github import Annotation, annotation_line, annotations_text


def test_title_and_file_escape_the_property_separators_and_message_keeps_its_lines():
    line = annotation_line(Annotation("error", "KVD102 cache dtype: 'auto', bf16", "50% slower\nfix: x", "a,b:c.yaml", 7))
    assert line == "::error file=a%2Cb%3Ac.yaml,line=7,title=KVD102 cache dtype%3A 'auto'%2C bf16::50%25 slower%0Afix: x"


def test_without_a_file_there_is_no_line_and_the_output_ends_with_a_newline():
    text = annotations_text([Annotation("notice", "kvdoctor PASS", "ok", line=3), Annotation("warning", "t", "m")])
    assert text == "::notice title=kvdoctor PASS::ok\n::warning title=t::m\n"
