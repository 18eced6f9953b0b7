"""`kvdoctor explain LOG`: what really failed in a vLLM start-up log. Imports nothing heavy at load."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("explain")
    def explain(
        log: str = typer.Argument(..., help="A vLLM log file, or - to read stdin (kubectl logs POD | kvdoctor explain -)."),
        rules: List[Path] = typer.Option([], "--rules", help="Extra rules file(s), after the bundled rules."),
        output_format: str = typer.Option("text", "--format", "-f", help="text, json, or another from `kvdoctor formats`."),
        output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write --format output here; the terminal still gets the text report."),
        fail_on: str = typer.Option("error", "--fail-on", help="Exit 1 when a finding reaches: error, warning, never."),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Also list every fact read from the log."),
        debug: bool = typer.Option(False, "--debug", help="Show tracebacks of kvdoctor's own errors."),
    ) -> None:
        """Explain a failed vLLM start-up log: the real failure, why the last line misleads, the fix."""
        from kvdoctor.check_inputs import validate_check_inputs
        from kvdoctor.commands._run import run_and_exit

        def work():
            from kvdoctor.explain.explain import explain_log

            validate_check_inputs(fail_on=fail_on)
            return explain_log(log, tuple(rules))

        run_and_exit(work, output_format, output, fail_on, verbose, debug)
