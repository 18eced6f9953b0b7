"""The human scan report: a headline, then each workload with its findings at their manifest lines."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from kvdoctor.report.check.text import print_console as print_check
from kvdoctor.report.scan.summary import summary_line, workload_context
from kvdoctor.report.terminal import SEVERITY_STYLE, VERDICT_STYLE, captured
from kvdoctor.report.wording import fix_line, state
from kvdoctor.scan.result import ScanReport, WorkloadResult

def print_console(report: ScanReport, console: Console, verbose: bool = False) -> None:
    """The scan as a person reads it in a terminal: each workload, its findings at their manifest lines."""
    style = VERDICT_STYLE.get(report.verdict, "bold magenta")  # NONE: nothing was checked
    console.print(f"[{style}]{report.verdict}[/]  kvdoctor scan: {escape(summary_line(report))}")
    for unread in report.unread:
        console.print(f"\n[bold magenta]ERROR[/]  {escape(str(unread.location))}  [bold]not read[/]")
        console.print(f"  {escape(unread.message)}" + (f" ({escape(unread.hint)})" if unread.hint else ""))
    for result in report.workloads:
        _print_workload(console, result, verbose)
    if report.notes:
        console.print("\n[bold]Notes[/]")
        for note in report.notes:
            console.print(f"  - {escape(note)}")


def _print_workload(console: Console, result: WorkloadResult, verbose: bool) -> None:
    w = result.workload
    console.print(f"\n[{VERDICT_STYLE[result.verdict]}]{result.verdict}[/]  {escape(str(w.at(w.line)))}  [bold]{escape(w.title)}[/]")
    if result.report is None:
        console.print(f"  [magenta]not checked[/] {escape(str(result.error_location))}: {escape(result.error or '')}")
        return
    if result.error:
        console.print(f"  [magenta]ERROR[/] {escape(str(result.error_location))}: {escape(result.error)}; "
                      "the rest was checked without that flag")  # fmt: skip
    console.print(f"      {escape(workload_context(result))}")
    fired = [p for p in result.placed if p.finding.status == "fired"]
    undecided = [p for p in result.placed if p.finding.status == "undecided"]
    for placed in fired:
        f = placed.finding
        ignored = f" [dim](ignored: {escape(f.ignored_reason)})[/]" if state(f) == "ignored" else ""
        console.print(f"  [{SEVERITY_STYLE[f.severity]}]{f.severity.upper()}[/] [bold]{f.rule_id}[/] "
                      f"{escape(str(placed.location))}  {escape(f.title)}{ignored}")  # fmt: skip
        if placed.location.what:
            console.print(f"      [dim]{escape(placed.location.what)}[/]")
        console.print(f"      Cause: {escape(f.cause)}")
        for number, fix in enumerate(f.fixes, 1):
            console.print(f"      Fix {number}: {escape(fix_line(fix))}")
    for placed in undecided:
        f = placed.finding
        console.print(f"  [dim]undecided {f.severity}[/] [bold]{f.rule_id}[/] {escape(f.title)}")
        for line in f.decided_by:
            console.print(f"      decided by {escape(line)}")
    if not fired and not undecided:
        console.print("  No other problems found for this workload." if result.error else "  No problems found for this workload.")
    for why in result.unjudged:
        console.print(f"  [yellow]not judged[/] {escape(why)}")
    for note in result.report.notes:
        console.print(f"  [dim]- {escape(note)}[/]")
    if verbose:
        console.print("")
        print_check(result.report, console, verbose=True)


def render(report: ScanReport, verbose: bool = False, color: bool = False) -> str:
    return captured(print_console, report, verbose, color)
