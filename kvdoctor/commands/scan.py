"""`kvdoctor scan`: gate the deployment itself (Kubernetes manifests, Compose files, production-stack Helm values)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from kvdoctor.commands._options import (
    CompileTimeout,
    ConfigFile,
    Debug,
    FailOn,
    FixSources,
    NoCache,
    NoCompile,
    Offline,
    OutputFile,
    RulesFiles,
    TargetPackages,
    format_option,
    target_packages,
    verbose_option,
)
from kvdoctor.report.registry import SCAN


def register(app: typer.Typer) -> None:
    @app.command("scan")
    def scan(
        ctx: typer.Context,
        paths: List[str] = typer.Argument(..., help="Manifest files or directories to scan, or - for stdin (e.g. helm template ... | kvdoctor scan -)."),
        gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU for workloads whose node labels name none (A100, L4, sm_80)."),
        vllm_version: Optional[str] = typer.Option(None, "--vllm-version", help="vLLM release for images whose tag pins none (latest, a digest): 0.25.1, or a series such as 0.25."),
        model_path: List[str] = typer.Option([], "--model-path", help="MODEL=DIR: read the model the manifests call MODEL (e.g. /models/qwen) from DIR here."),
        values: List[Path] = typer.Option([], "--values", help="A Helm values file over each chart's values.yaml when scan renders a chart (as helm template -f; repeatable, later ones win)."),
        fix_source: FixSources = [],
        offline: Offline = False,
        target_package: TargetPackages = [],
        rules: RulesFiles = [],
        no_compile: NoCompile = False,
        compile_timeout: CompileTimeout = 60.0,
        no_cache: NoCache = False,
        output_format: str = format_option(SCAN),
        output: OutputFile = None,
        fail_on: FailOn = "error",
        verbose: bool = verbose_option("Also print each workload's full check report."),
        debug: Debug = False,
        config: ConfigFile = None,
        allow_no_workload: bool = typer.Option(False, "--allow-no-workload", help="Exit 0 when the files hold no vLLM workload (the pre-commit hook on unrelated YAML); without it that is exit 2, nothing checked."),
    ) -> None:
        """Find the vLLM workloads in manifests and check each; findings point at the manifest line to change."""
        from kvdoctor.commands._run import team_and_choices

        team, chosen = team_and_choices(ctx, config)

        def work():
            from kvdoctor.base.cache_dir import default_cache_dir
            from kvdoctor.check.run import CheckSettings
            from kvdoctor.commands.check import with_note
            from kvdoctor.inputs.validate import named_vllm_release, validate_check_inputs
            from kvdoctor.scan.judge import ScanDefaults
            from kvdoctor.scan.run import run_scan

            # a bad --gpu or --vllm-version fails once here, not in every workload
            validate_check_inputs(gpu=chosen["gpu"], vllm_version=chosen["vllm_version"], fail_on=chosen["fail_on"],
                                  compile_timeout=chosen["compile_timeout"])  # fmt: skip
            named = named_vllm_release(chosen["vllm_version"]) if chosen["vllm_version"] is not None else None
            defaults = ScanDefaults(gpu=chosen["gpu"], vllm_version=named.version if named else None,
                                    offline=chosen["offline"], cache_dir=default_cache_dir(),
                                    model_paths=_model_paths(model_path),
                                    target_packages=target_packages(target_package))  # fmt: skip
            settings = CheckSettings(
                rules_files=team.rules_files + tuple(rules),
                compile=not chosen["no_compile"],
                compile_timeout_s=chosen["compile_timeout"],
                use_cache=not chosen["no_cache"],
                fix_sources=team.fix_sources + tuple(fix_source),
                ignored=dict(team.ignore),
            )
            missing = [str(v) for v in values if not v.is_file()]
            if missing:
                from kvdoctor.base.errors import UsageError

                raise UsageError(f"--values {missing[0]}: no such file", "give a Helm values file (YAML)")
            return with_note(run_scan(list(paths), defaults, settings, allow_none=allow_no_workload,
                                      values_files=tuple(values), debug=debug),
                             named.note if named else None)  # fmt: skip

        _run_and_exit(work, chosen["output_format"], output, chosen["fail_on"], chosen["verbose"], debug)


def _model_paths(pairs: list[str]) -> dict[str, str]:
    from kvdoctor.base.errors import UsageError

    mapping = {}
    for pair in pairs:
        model, sep, path = pair.partition("=")
        if not sep or not model or not path:
            raise UsageError(f"--model-path {pair!r}: expected MODEL=DIR", "e.g. --model-path /models/qwen=./qwen-config")
        mapping[model] = path
    return mapping


def _run_and_exit(work, output_format: str, output: Optional[Path], fail_on: str, verbose: bool, debug: bool) -> None:
    from kvdoctor.commands._run import run_and_exit

    def workload_errors(report) -> None:
        for unread in report.unread:  # a file that cannot be read: said on its own, the others were checked
            typer.echo(f"kvdoctor: error: {unread.message}" + (f" ({unread.hint})" if unread.hint else ""), err=True)
        if report.verdict == "NONE":
            typer.echo(f"kvdoctor: error: no vLLM workload in {len(report.files)} file(s): nothing checked "
                       "(pass --allow-no-workload where that is expected)", err=True)  # fmt: skip
        for result in report.workloads:
            if result.error:  # an input problem in one workload: said on stderr too, as every exit-2 error is
                typer.echo(f"kvdoctor: error: {result.error_location}: {result.workload.title}: {result.error}", err=True)

    run_and_exit(work, SCAN, output_format, output, fail_on, verbose, debug, after=workload_errors)
