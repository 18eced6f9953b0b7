"""The human report: verdict first, then each finding with cause, evidence, fixes and references."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kvdoctor.model.report import Finding, Report
from kvdoctor.report.terminal import SEVERITY_STYLE, VERDICT_STYLE, captured

VERIFIED_MARK = {"verified": "[green]verified by compile[/]", "not_verified": "[red]not verified[/]"}


def print_console(report: Report, console: Console, verbose: bool = False) -> None:
    """The report as a person reads it in a terminal."""
    console.print(_headline(report))
    fired = [f for f in report.sorted_findings() if f.status == "fired"]
    undecided = [f for f in report.sorted_findings() if f.status == "undecided"]
    if not fired and not undecided:
        console.print("No problems found for this configuration.")
    for finding in fired:
        _print_finding(console, finding)
    if undecided:
        console.print("\n[bold]Undecided[/] (unknown facts decide these; supply them to get a verdict):")
        for finding in undecided:
            _print_undecided(console, finding)
    if report.notes:
        console.print("\n[bold]Notes[/]")
        for note in report.notes:
            console.print(f"  - {escape(note)}")
    if verbose:
        console.print(_facts_table(report))


def _headline(report: Report) -> str:
    facts = report.facts
    parts = [
        facts.get("model.model_id"),
        f"--kv-cache-dtype {facts['serve.kv_cache_dtype']}" if facts.get("serve.kv_cache_dtype") else None,
        _gpu_label(facts),
        f"vLLM {facts['vllm.version']}" if facts.get("vllm.version") else "vLLM unknown",
    ]
    context = " | ".join(escape(str(p)) for p in parts if p)
    style = VERDICT_STYLE[report.verdict]
    return f"[{style}]{report.verdict}[/]  kvdoctor {report.command}: {context}"


def _gpu_label(facts: dict) -> str:
    if facts.get("gpu.capability") is None:
        return "GPU unknown"
    return f"{facts.get('gpu.name') or 'GPU'} (SM {facts['gpu.capability']:.1f})"


def _print_finding(console: Console, finding: Finding) -> None:
    style = SEVERITY_STYLE[finding.severity]
    ignored = f" [dim](ignored: {escape(finding.ignored_reason)})[/]" if finding.ignored_reason else ""
    console.print(f"\n[{style}]{finding.severity.upper()}[/] [bold]{finding.rule_id}[/] {escape(finding.title)}{ignored}")
    console.print(f"  [bold]Cause:[/] {escape(finding.cause)}")
    if finding.evidence:
        console.print("  [bold]Evidence:[/]")
        for line in finding.evidence:
            console.print(f"    {escape(line)}")
    if finding.fixes:
        console.print("  [bold]Fixes:[/]")
        for number, fix in enumerate(finding.fixes, 1):
            action = " ".join(f"[bold]{escape(a)}[/]" for a in (fix.flag, fix.env, fix.version) if a)
            mark = f"  {VERIFIED_MARK[fix.verified]}" if fix.verified in VERIFIED_MARK else ""
            console.print(f"    {number}. {escape(fix.title)}{'  ' + action if action else ''}{mark}")
            if fix.verification_note:
                console.print(f"       [dim]{escape(fix.verification_note)}[/]")
    if finding.references:
        console.print("  [bold]References:[/] " + " ".join(finding.references))
    if finding.checked_against:
        console.print(f"  [dim]Checked against {escape(finding.checked_against)}[/]")


def _print_undecided(console: Console, finding: Finding) -> None:
    style = SEVERITY_STYLE[finding.severity]
    console.print(f"  [{style}]{finding.severity}[/] [bold]{finding.rule_id}[/] {escape(finding.title)}")
    for line in finding.decided_by:
        console.print(f"      decided by {escape(line)}")


def _facts_table(report: Report) -> Table:
    table = Table(title="Facts", show_lines=False)
    table.add_column("fact")
    table.add_column("value")
    for name, value in sorted(report.facts.items()):
        table.add_row(name, "[dim]unknown[/]" if value is None else escape(str(value)))
    return table


def render(report: Report, verbose: bool = False, color: bool = False) -> str:
    return captured(print_console, report, verbose, color)
