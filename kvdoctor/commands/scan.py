"""`kvdoctor scan`: gate the deployment itself (Kubernetes manifests, Compose files, production-stack Helm values)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("scan")
    def scan(
        ctx: typer.Context,
        paths: List[str] = typer.Argument(..., help="Manifest files or directories to scan, or - for stdin (e.g. helm template ... | kvdoctor scan -)."),
        gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU for workloads whose node labels name none (A100, L4, sm_80)."),
        vllm_version: Optional[str] = typer.Option(None, "--vllm-version", help="vLLM version for images whose tag pins none (latest, a digest)."),
        model_path: List[str] = typer.Option([], "--model-path", help="MODEL=DIR: read the model the manifests call MODEL (e.g. /models/qwen) from DIR here."),
        fix_source: List[str] = typer.Option([], "--fix-source", help="vLLM wheels/trees (or dirs of wheels) to verify upgrade fixes with."),
        offline: bool = typer.Option(False, "--offline", help="Never use the network (also HF_HUB_OFFLINE=1)."),
        rules: List[Path] = typer.Option([], "--rules", help="Extra rules file(s), after the bundled rules."),
        no_compile: bool = typer.Option(False, "--no-compile", help="Skip the dry-run compile of vLLM's kernels."),
        compile_timeout: float = typer.Option(60.0, "--compile-timeout", help="Seconds before a compile is given up."),
        no_cache: bool = typer.Option(False, "--no-cache", help="Compile again even if a cached result exists."),
        output_format: str = typer.Option("text", "--format", "-f", help="text, json, sarif, junit, github or markdown."),
        output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write --format output here; the terminal still gets the text report."),
        fail_on: str = typer.Option("error", "--fail-on", help="Exit 1 when a finding reaches: error, warning, never."),
        verbose: bool = typer.Option(False, "--verbose", "-v", help="Also print each workload's full check report."),
        debug: bool = typer.Option(False, "--debug", help="Show tracebacks of kvdoctor's own errors."),
        config: Optional[Path] = typer.Option(None, "--config", help="Config file (default: nearest kvdoctor.toml or pyproject.toml [tool.kvdoctor])."),
    ) -> None:
        """Find the vLLM workloads in manifests and check each; findings point at the manifest line to change."""
        from click.core import ParameterSource

        from kvdoctor.cli import FAIL_ON, check_choice, fail_input
        from kvdoctor.config_file import load_config
        from kvdoctor.errors import KvdoctorError

        try:
            team = load_config(config)
        except KvdoctorError as exc:
            fail_input(exc)
        explicit = {n for n in ctx.params if ctx.get_parameter_source(n) != ParameterSource.DEFAULT}
        chosen = team.merged(ctx.params, explicit)

        def work():
            from kvdoctor.cache_dir import default_cache_dir
            from kvdoctor.check import CheckSettings
            from kvdoctor.scan.judge import ScanDefaults
            from kvdoctor.scan.run import run_scan

            check_choice("--fail-on", chosen["fail_on"], FAIL_ON)
            _check_defaults(chosen["gpu"], chosen["vllm_version"])
            defaults = ScanDefaults(gpu=chosen["gpu"], vllm_version=chosen["vllm_version"], offline=chosen["offline"],
                                    cache_dir=default_cache_dir(), model_paths=_model_paths(model_path))  # fmt: skip
            settings = CheckSettings(
                rules_files=team.rules_files + tuple(rules),
                compile=not chosen["no_compile"],
                compile_timeout_s=chosen["compile_timeout"],
                use_cache=not chosen["no_cache"],
                fix_sources=team.fix_sources + tuple(fix_source),
                ignored=dict(team.ignore),
            )
            return run_scan(list(paths), defaults, settings)

        _run_and_exit(work, chosen["output_format"], output, chosen["fail_on"], chosen["verbose"], debug)


def _model_paths(pairs: list[str]) -> dict[str, str]:
    from kvdoctor.errors import UsageError

    mapping = {}
    for pair in pairs:
        model, sep, path = pair.partition("=")
        if not sep or not model or not path:
            raise UsageError(f"--model-path {pair!r}: expected MODEL=DIR", "e.g. --model-path /models/qwen=./qwen-config")
        mapping[model] = path
    return mapping


def _check_defaults(gpu: str | None, vllm_version: str | None) -> None:
    """A bad --gpu or --vllm-version fails once here, not in every workload."""
    from packaging.version import InvalidVersion, Version

    from kvdoctor.errors import UsageError
    from kvdoctor.probes.gpu_table import resolve_gpu_target

    if gpu is not None:
        resolve_gpu_target(gpu)
    if vllm_version is not None:
        try:
            Version(vllm_version)
        except InvalidVersion:
            raise UsageError(f"--vllm-version {vllm_version!r} is not a version", "e.g. 0.25.1") from None


def _run_and_exit(work, output_format: str, output: Optional[Path], fail_on: str, verbose: bool, debug: bool) -> None:
    from kvdoctor.cli import INTERNAL_ERROR, _write_output, fail_input
    from kvdoctor.errors import KvdoctorError
    from kvdoctor.scan.formats import scan_renderer

    try:
        render = scan_renderer(output_format)
        report = work()
        if output is not None:
            _write_output(output, render(report, verbose=verbose))
        if output is not None or output_format == "text":
            from rich.console import Console

            from kvdoctor.scan.formats.text import print_scan

            print_scan(report, Console(highlight=False, soft_wrap=not sys.stdout.isatty()), verbose)
        else:
            sys.stdout.write(render(report, verbose=verbose))
    except KvdoctorError as exc:
        if debug:
            raise
        fail_input(exc)
    except (typer.Exit, KeyboardInterrupt):
        raise
    except Exception as exc:  # kvdoctor's own bug: one line, the traceback behind --debug
        if debug:
            raise
        typer.echo(f"kvdoctor: internal error: {type(exc).__name__}: {exc} "
                   "(a kvdoctor bug: rerun with --debug for the traceback and report it)", err=True)  # fmt: skip
        raise typer.Exit(INTERNAL_ERROR) from None
    for result in report.workloads:
        if result.error:  # an input problem in one workload: said on stderr too, as every exit-2 error is
            typer.echo(f"kvdoctor: error: {result.error_location}: {result.workload.title}: {result.error}", err=True)
    raise typer.Exit(report.exit_code(fail_on))
