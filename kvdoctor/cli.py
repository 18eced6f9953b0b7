"""Command line: parse flags, run a command, render, exit. Heavy work is imported lazily."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

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

FAIL_ON = ("error", "warning", "never")
INTERNAL_ERROR = 3  # exit code for kvdoctor's own bugs, distinct from 2 (the user's input)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kvdoctor {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """kvdoctor: diagnose vLLM KV-cache configurations before `vllm serve` starts."""


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def check(
    ctx: typer.Context,
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model directory, config.json, or Hugging Face id."),
    kv_cache_dtype: Optional[str] = typer.Option(None, "--kv-cache-dtype", help="As vLLM's --kv-cache-dtype."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="As vLLM's --dtype (auto, half, float16, bfloat16, float, float32)."),
    attention_backend: Optional[str] = typer.Option(None, "--attention-backend", help="As vLLM's --attention-backend."),
    tensor_parallel_size: Optional[int] = typer.Option(None, "--tensor-parallel-size", help="As vLLM's -tp."),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="Target GPU: a name (A100, L4, H100) or a capability (sm_80, 8.0). Default: probe local GPUs."),
    vllm_version: Optional[str] = typer.Option(None, "--vllm-version", help="Judge as this vLLM version (what-if)."),
    vllm_source: Optional[str] = typer.Option(None, "--vllm-source", help="A vLLM wheel or unpacked tree whose kernels to compile."),
    fix_source: List[str] = typer.Option([], "--fix-source", help="vLLM wheels/trees (or dirs of wheels) to verify upgrade fixes with."),
    revision: Optional[str] = typer.Option(None, "--revision", help="Model revision on the Hugging Face hub."),
    offline: bool = typer.Option(False, "--offline", help="Never use the network (also HF_HUB_OFFLINE=1)."),
    torch_check: bool = typer.Option(False, "--torch-check", help="Cross-check the NVML GPU probe with torch.cuda (imports torch: slow)."),
    rules: List[Path] = typer.Option([], "--rules", help="Extra rules file(s), after the bundled rules."),
    no_compile: bool = typer.Option(False, "--no-compile", help="Skip the dry-run compile of vLLM's kernels."),
    compile_timeout: float = typer.Option(60.0, "--compile-timeout", help="Seconds before a compile is given up."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Compile again even if a cached result exists."),
    output_format: str = typer.Option("text", "--format", "-f", help="text, json, or another from `kvdoctor formats`."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write --format output here; the terminal still gets the text report."),
    fail_on: str = typer.Option("error", "--fail-on", help="Exit 1 when a finding reaches: error, warning, never."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also list every fact."),
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks of kvdoctor's own errors."),
    config: Optional[Path] = typer.Option(None, "--config", help="Config file (default: nearest kvdoctor.toml or pyproject.toml [tool.kvdoctor])."),
) -> None:
    """Check a model + serve flags against a GPU and vLLM version.

    Two forms. kvdoctor's own flags (above) with vLLM serve flags mixed in: a flag that is neither kvdoctor's nor a
    flag of vLLM's `serve` is an error. Or a pasted command after `--`: `kvdoctor check --gpu A100 -- vllm serve
    MODEL --kv-cache-dtype fp8 ...`, judged as the judged vLLM release's own parser would (unknown, ambiguous or
    refused flags are findings in vLLM's words); kvdoctor's own flags belong before the `--`."""
    from kvdoctor.cache_dir import default_cache_dir
    from kvdoctor.check import CheckSettings, run_check
    from kvdoctor.collect import CheckOptions
    from kvdoctor.config_file import load_config
    from kvdoctor.errors import KvdoctorError

    try:
        team = load_config(config)
    except KvdoctorError as exc:
        fail_input(exc)
    # config values are defaults: a flag given on the command line wins
    from click.core import ParameterSource

    explicit = {name for name in ctx.params if ctx.get_parameter_source(name) != ParameterSource.DEFAULT}
    chosen = team.merged(ctx.params, explicit)
    model, kv_cache_dtype, dtype, attention_backend, tensor_parallel_size, gpu = (chosen[n] for n in (
        "model", "kv_cache_dtype", "dtype", "attention_backend", "tensor_parallel_size", "gpu"))  # fmt: skip
    vllm_version, vllm_source, revision, offline, no_compile, compile_timeout, no_cache = (chosen[n] for n in (
        "vllm_version", "vllm_source", "revision", "offline", "no_compile", "compile_timeout", "no_cache"))  # fmt: skip
    output_format, fail_on, verbose = chosen["output_format"], chosen["fail_on"], chosen["verbose"]

    pasted, loose = split_pasted_command(list(ctx.args), sys.argv[1:])
    own_flags = tuple(sorted(o for p in ctx.command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")))

    def work():
        check_choice("--fail-on", fail_on, FAIL_ON)
        options = CheckOptions(
            model=model,
            serve_argv=tuple(pasted),
            loose_flags=tuple(loose),
            own_flags=own_flags,
            kv_cache_dtype=kv_cache_dtype,
            dtype=dtype,
            attention_backend=attention_backend,
            tensor_parallel_size=tensor_parallel_size,
            gpu=gpu,
            vllm_version=vllm_version,
            vllm_source=vllm_source,
            revision=revision,
            offline=offline,
            torch_check=torch_check,
            cache_dir=default_cache_dir(),
            resolve_kernels=not no_compile,
        )
        settings = CheckSettings(
            rules_files=team.rules_files + tuple(rules),
            compile=not no_compile,
            compile_timeout_s=compile_timeout,
            use_cache=not no_cache,
            fix_sources=team.fix_sources + tuple(fix_source),
            ignored=dict(team.ignore),
        )
        return run_check(options, settings)

    run_and_exit(work, output_format, output, fail_on, verbose, debug)


@app.command("rules")
def list_rules(
    rules: List[Path] = typer.Option([], "--rules", help="Extra rules file(s) to validate and list."),
    facts: bool = typer.Option(False, "--facts", help="List the fact names rules can use instead."),
) -> None:
    """List (and validate) the rules, or the fact names they may use."""
    from kvdoctor.errors import KvdoctorError

    try:
        if facts:
            from kvdoctor.derived import fact_names

            for name in sorted(fact_names()):
                typer.echo(name)
            typer.echo("env.<VLLM_* variable>")
            return
        from kvdoctor.rules import load_all_rules

        from kvdoctor.explain.families import load_families

        for rule in load_all_rules(list(rules)):
            typer.echo(f"{rule.id}  {rule.severity:<7}  {rule.title}")
        for rule in load_families().rules:  # explain-only families (kvdoctor/explain/families.yaml)
            typer.echo(f"{rule.id}  {rule.severity:<7}  {rule.title}  [explain]")
    except KvdoctorError as exc:
        fail_input(exc)


@app.command()
def gpus() -> None:
    """List the GPUs --gpu knows, with compute capability and memory."""
    from kvdoctor.probes.gpu_table import gpu_table

    seen = set()
    for device in sorted(gpu_table().values(), key=lambda d: (d.capability, d.name)):
        if device.name not in seen:
            seen.add(device.name)
            typer.echo(f"{device.name:<28} SM {device.capability[0]}.{device.capability[1]}  {device.memory_gib:g} GiB")


@app.command()
def formats() -> None:
    """List the output formats."""
    from kvdoctor.formats import available_formats

    for name in available_formats():
        typer.echo(name)


def _register_commands() -> None:
    import importlib
    import pkgutil

    from kvdoctor import commands

    for module in pkgutil.iter_modules(commands.__path__):
        importlib.import_module(f"kvdoctor.commands.{module.name}").register(app)


_register_commands()


def split_pasted_command(extra: list[str], raw_argv: list[str]) -> tuple[list[str], list[str]]:
    """(the command after `--`, the unclaimed tokens before it): click hands both over as one list."""
    if "--" not in raw_argv:
        return [], extra
    pasted = raw_argv[raw_argv.index("--") + 1 :]
    if extra[len(extra) - len(pasted) :] != pasted:  # not run from a command line (an embedding); trust click
        return extra, []
    return pasted, extra[: len(extra) - len(pasted)]


def check_choice(flag: str, value: str, choices: tuple[str, ...]) -> None:
    from kvdoctor.errors import UsageError

    if value not in choices:
        raise UsageError(f"{flag} {value!r} is not one of {', '.join(choices)}")


def run_and_exit(work, output_format: str, output: Optional[Path], fail_on: str, verbose: bool, debug: bool) -> None:
    """Run a command, render its report and exit with its code; user errors exit 2 on one line."""
    from kvdoctor.errors import KvdoctorError
    from kvdoctor.formats import renderer

    try:
        render = renderer(output_format)
        report = work()
        rendered = render(report, verbose=verbose)
        if output is not None:
            _write_output(output, rendered)
        if output is not None or output_format == "text":
            from rich.console import Console

            from kvdoctor.formats.text import print_report

            print_report(report, Console(highlight=False, soft_wrap=not sys.stdout.isatty()), verbose)
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
    raise typer.Exit(report.exit_code(fail_on))


def _write_output(path: Path, text: str) -> None:
    from kvdoctor.errors import UsageError

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
    typer.echo(f"kvdoctor: error: {exc.one_line()}", err=True)
    raise typer.Exit(2)


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
