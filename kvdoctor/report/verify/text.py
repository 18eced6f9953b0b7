"""The human verify report: a headline, then each compared field with both values and where each came from."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from kvdoctor.report.terminal import SEVERITY_STYLE, VERDICT_STYLE, captured
from kvdoctor.verify.compare import MATCH
from kvdoctor.verify.result import VerifyReport

MARK = {"match": "ok", "mismatch": "MISMATCH", "not_checked": "not checked", "not_exposed": "not exposed"}


def print_console(report: VerifyReport, console: Console, verbose: bool = False) -> None:
    console.print(f"[{VERDICT_STYLE[report.verdict]}]{report.verdict}[/]  kvdoctor verify: {escape(report.summary_line())}")
    console.print("")
    for c in report.comparisons:
        style = "green" if c.status == MATCH else SEVERITY_STYLE[c.severity]
        console.print(f"  [{style}]{MARK[c.status]:<11}[/] {escape(c.line())}")
        evidence = [f"server: {c.served_from}"] + ([f"checked: {c.checked_from}"] if c.checked_from else [])
        if c.status != MATCH or verbose:
            for line in evidence:
                console.print(f"              [dim]{escape(line)}[/]")
        if c.note:
            console.print(f"              {escape(c.note)}")
    if verbose:
        console.print("\n[bold]Server[/]")
        for name, value in sorted(report.server.metrics.cache_config.items()):
            console.print(f"  vllm:cache_config_info {escape(name)} = {escape(value)}")
        for name, value in report.server.metrics.kv_usage.items():
            console.print(f"  {escape(name)} = {value:g}")
        for path, seconds in report.server.seconds.items():
            console.print(f"  {escape(path)} answered in {seconds:.3f} s")
    if report.credentials:
        console.print("\n[bold]Sent[/]  " + escape("; ".join(report.credentials)))
    if report.notes:
        console.print("\n[bold]Notes[/]")
        for note in report.notes:
            console.print(f"  - {escape(note)}")


def render(report: VerifyReport, verbose: bool = False, color: bool = False) -> str:
    return captured(print_console, report, verbose, color)
