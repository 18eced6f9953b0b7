"""The `kvdoctor` command line: the app and its entry point; the sub-commands live in kvdoctor/commands/."""

from __future__ import annotations

import sys
import typer

from kvdoctor import __version__

app = typer.Typer(
    name="kvdoctor",
    help="Preflight checks for vLLM KV-cache deployments: will this kv-cache dtype, model, GPU and vLLM work?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help: rich's help renderer alone costs ~0.3 s
)

def _version(value: bool) -> None:
    if value:
        typer.echo(f"kvdoctor {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """kvdoctor: diagnose vLLM KV-cache configurations before `vllm serve` starts."""


def _register_commands() -> None:
    import importlib

    from kvdoctor.commands import COMMANDS

    for name in COMMANDS:
        importlib.import_module(f"kvdoctor.commands.{name}").register(app)


_register_commands()


def main() -> None:
    """Entry point: usage errors become one line and exit 2, like kvdoctor's own."""
    from click import exceptions as click_errors

    try:
        result = app(standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except getattr(click_errors, "NoArgsIsHelpError", ()) as exc:  # click >= 8.2
        typer.echo(exc.ctx.get_help() if exc.ctx else "see kvdoctor --help")
        sys.exit(0)
    except click_errors.ClickException as exc:
        typer.echo(f"kvdoctor: error: {exc.format_message()} (see kvdoctor --help)", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("kvdoctor: interrupted", err=True)
        sys.exit(130)
    sys.exit(result if isinstance(result, int) else 0)
