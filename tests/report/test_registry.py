"""The one registry: every format a command offers renders, and an unknown one is a user error naming the choices."""

from __future__ import annotations

import importlib

import pytest

from kvdoctor.base.errors import UsageError
from kvdoctor.report.registry import CHECK, MATRIX, SCAN


@pytest.mark.parametrize("menu", [CHECK, SCAN, MATRIX])
def test_every_offered_format_has_an_adapter_and_the_terminal_one_prints(menu):
    for name in menu.available():
        assert callable(menu.renderer(name))
    assert menu.terminal in menu.available()
    assert callable(importlib.import_module(f"{menu.package}.{menu.terminal}").print_console)


@pytest.mark.parametrize(("menu", "message"), [
    (CHECK, "unknown format 'pdf' (use one of github, json, junit, markdown, prometheus, sarif, text)"),
    (SCAN, "unknown scan format 'pdf' (use one of github, json, junit, markdown, sarif, text)"),
    (MATRIX, "unknown matrix format 'pdf' (use one of table, json, csv, html)"),
])  # fmt: skip
def test_unknown_format_names_the_choices(menu, message):
    with pytest.raises(UsageError) as raised:
        menu.renderer("pdf")
    assert raised.value.one_line() == message
