"""What every sub-command shares: run the work, render, and exit with the one error contract.

The contract: a user error (kvdoctor.base.errors.KvdoctorError) is one line on stderr and exit 2; kvdoctor's own bug
is one line and exit 3 (the traceback behind --debug); otherwise the report's own exit code.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

import typer

if TYPE_CHECKING:
    from kvdoctor.report.registry import FormatMenu

INTERNAL_ERROR = 3  # exit code for kvdoctor's own bugs, distinct from 2 (the user's input)


def run_and_exit(work: Callable[[], Any], formats: FormatMenu, output_format: str, output: Optional[Path], fail_on: str,
                 verbose: bool, debug: bool, *, after: Callable[[Any], None] | None = None) -> None:  # fmt: skip
    """Run a command, render its report (--format, --output; the terminal gets the command's terminal format) and
    exit with its code. after(report) runs once the report is out, before the exit."""
    from kvdoctor.base.errors import KvdoctorError

    try:
        render = formats.renderer(output_format)
        report = work()
        rendered = render(report, verbose=verbose)
        if output is not None:
            write_output(output, rendered)
        if output is not None or output_format == formats.terminal:
            from rich.console import Console

            formats.print_console(report, Console(highlight=False, soft_wrap=not sys.stdout.isatty()), verbose)
        else:
            sys.stdout.write(rendered)
    except KvdoctorError as exc:
        if debug:
            raise
        fail_input(exc)
    except (typer.Exit, KeyboardInterrupt):
        raise
    except Exception as exc:  # kvdoctor's own bug: one line, the traceback behind --debug
        if debug:
            raise
        fail_internal(exc)
    if after is not None:
        after(report)
    raise typer.Exit(gate_exit_code(report, fail_on))


def gate_exit_code(report: Any, fail_on: str) -> int:
    """The report's exit code for --fail-on. 'undecided' gates as 'error' and also on an error rule that unknown
    facts leave undecided (a GPU-less CI job without --gpu or --vllm-version; a release kvdoctor did not read)."""
    if fail_on != "undecided" or not hasattr(report, "findings") and not hasattr(report, "workloads"):
        return report.exit_code(fail_on)  # a report without rule findings (verify) says what undecided means
    code = report.exit_code("error")
    if code == 0 and any(f.status == "undecided" and f.severity == "error" and f.ignored_reason is None
                         for f in judged_findings(report)):  # fmt: skip
        return 1
    return code


def judged_findings(report: Any) -> list[Any]:
    """Every finding of a report: a check's own, or those of each workload a scan judged (verify has none)."""
    if hasattr(report, "workloads"):
        return [f for w in report.workloads if w.report is not None for f in w.report.findings]
    return list(getattr(report, "findings", ()))


def write_output(path: Path, text: str) -> None:
    from kvdoctor.base.errors import UsageError

    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write --output {path}: {exc.strerror or exc}") from None


def fail_internal(exc: Exception) -> None:
    """kvdoctor's own bug: one line and exit 3 (the traceback is behind --debug where a command has it)."""
    one_line = " ".join(str(exc).split())
    typer.echo(
        f"kvdoctor: internal error: {type(exc).__name__}: {one_line} "
        "(a kvdoctor bug: rerun with --debug for the traceback and report it)",
        err=True,
    )
    raise typer.Exit(INTERNAL_ERROR) from None


def fail_input(exc) -> None:
    """A user error: its one line and exit 2."""
    typer.echo(f"kvdoctor: error: {exc.one_line()}", err=True)
    raise typer.Exit(2)


def explicit_params(ctx: typer.Context) -> set[str]:
    """Names of the parameters the command line set (a config file's values fill in the others)."""
    from click.core import ParameterSource

    return {name for name in ctx.params if ctx.get_parameter_source(name) != ParameterSource.DEFAULT}


def team_and_choices(ctx: typer.Context, config: Path | None):
    """(the team's config file, every option's value): config values are defaults, a flag given wins; a bad
    config file is a user error (exit 2)."""
    from kvdoctor.inputs.config_file import load_config
    from kvdoctor.base.errors import KvdoctorError

    try:
        team = load_config(config)
    except KvdoctorError as exc:
        fail_input(exc)
    return team, team.merged(ctx.params, explicit_params(ctx))
