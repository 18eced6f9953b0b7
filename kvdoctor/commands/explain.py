"""`kvdoctor explain LOG`: what really failed in a vLLM start-up log. Imports nothing heavy at load."""

from __future__ import annotations

import typer

from kvdoctor.commands._options import Debug, FailOn, OutputFile, RulesFiles, format_option, verbose_option
from kvdoctor.report.registry import CHECK


def register(app: typer.Typer) -> None:
    @app.command("explain")
    def explain(
        log: str = typer.Argument(..., help="A vLLM log file (.gz read as it is), or - to read stdin (kubectl logs POD | kvdoctor explain -)."),
        rules: RulesFiles = [],
        output_format: str = format_option(CHECK),
        output: OutputFile = None,
        fail_on: FailOn = "error",
        verbose: bool = verbose_option("Also list every fact read from the log."),
        debug: Debug = False,
    ) -> None:
        """Explain a failed vLLM start-up log: the real failure, why the last line misleads, the fix."""
        from kvdoctor.inputs.validate import validate_check_inputs
        from kvdoctor.commands._run import run_and_exit

        def work():
            from kvdoctor.explain.explain import explain_log

            from kvdoctor.base.errors import UsageError
            from kvdoctor.base.special_files import FIFO_WAIT_S, fifo_as_stdin, special_kind

            validate_check_inputs(fail_on=fail_on)
            kind = special_kind(log) if log != "-" else None
            if kind == "a FIFO" and fifo_as_stdin(log):  # read as a pipe: kvdoctor explain <(kubectl logs POD)
                return explain_log("-", tuple(rules))
            if kind == "a FIFO":  # a plain read would wait for a writer for ever
                raise UsageError(f"{log} is a FIFO that nothing wrote to within {FIFO_WAIT_S:g} s",
                                 "pass the log file, or pipe it: ... | kvdoctor explain -")
            if kind and kind != "a FIFO":  # a socket or a device: reading it would block or never end
                raise UsageError(f"{log} is {kind}, not a log file", "pass the log file, or pipe it: ... | kvdoctor explain -")
            return explain_log(log, tuple(rules))

        run_and_exit(work, CHECK, output_format, output, fail_on, verbose, debug)
