"""Markdown tables: a cell's '|' or newline cannot break the table."""

from __future__ import annotations

from kvdoctor.report.markdown import cell, html_text, table


def test_every_row_keeps_the_header_width_whatever_the_cells_hold():
    lines = table(("rule", "finding"), [("`KVD1`", "a | b\nc"), ("x\\", "y")])
    assert lines == ["| rule | finding |", "| --- | --- |", "| `KVD1` | a \\| b c |", "| x\\\\ | y |"]
    assert {line.count("|") - line.count("\\|") for line in lines} == {3}


def test_cell_and_html_text():
    assert cell("a|b") == "a\\|b"
    assert html_text("<b> & </b>") == "&lt;b&gt; &amp; &lt;/b&gt;"
