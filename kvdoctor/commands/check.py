"""`kvdoctor check`: one deployment (flags, or a pasted `vllm serve` command) judged before it starts."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from kvdoctor.commands._options import (
    CompileTimeout,
    ConfigFile,
    Debug,
    FailOn,
    FixSources,
    ModelDtype,
    NoCache,
    NoCompile,
    Offline,
    OutputFile,
    Revision,
    RulesFiles,
    TargetPackages,
    VllmSource,
    format_option,
    target_packages,
    verbose_option,
)
from kvdoctor.commands._run import run_and_exit, team_and_choices
from kvdoctor.report.registry import CHECK


def register(app: typer.Typer) -> None:
    @app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    def check(
        ctx: typer.Context,
        model: Optional[str] = typer.Option(None, "--model", "-m", help="Model directory, config.json, or Hugging Face id."),
        kv_cache_dtype: Optional[str] = typer.Option(None, "--kv-cache-dtype", help="As vLLM's --kv-cache-dtype."),
        dtype: ModelDtype = None,
        attention_backend: Optional[str] = typer.Option(None, "--attention-backend", help="As vLLM's --attention-backend."),
        tensor_parallel_size: Optional[int] = typer.Option(None, "--tensor-parallel-size", help="As vLLM's -tp."),
        gpu: Optional[str] = typer.Option(None, "--gpu", help="Target GPU: a name (A100, L4, H100) or a capability (sm_80, 8.0). Default: probe local GPUs."),
        vllm_version: Optional[str] = typer.Option(None, "--vllm-version", help="Judge as this vLLM release (what-if): 0.25.1, or a series such as 0.25 (its newest patch kvdoctor read)."),
        vllm_source: VllmSource = None,
        fix_source: FixSources = [],
        revision: Revision = None,
        offline: Offline = False,
        target_package: TargetPackages = [],
        torch_check: bool = typer.Option(False, "--torch-check", help="Cross-check the NVML GPU probe with torch.cuda (imports torch: slow)."),
        rules: RulesFiles = [],
        no_compile: NoCompile = False,
        compile_timeout: CompileTimeout = 60.0,
        no_cache: NoCache = False,
        output_format: str = format_option(CHECK),
        output: OutputFile = None,
        fail_on: FailOn = "error",
        verbose: bool = verbose_option("Also list every fact."),
        debug: Debug = False,
        config: ConfigFile = None,
    ) -> None:
        """Check a model + serve flags against a GPU and vLLM version.

        Two forms. kvdoctor's own flags (above) with vLLM serve flags mixed in: a flag that is neither kvdoctor's nor a
        flag of vLLM's `serve` is an error. Or a pasted command after `--`: `kvdoctor check --gpu A100 -- vllm serve
        MODEL --kv-cache-dtype fp8 ...`, judged as the judged vLLM release's own parser would (unknown, ambiguous or
        refused flags are findings in vLLM's words); kvdoctor's own flags belong before the `--`."""
        from kvdoctor.base.cache_dir import default_cache_dir
        from kvdoctor.check.run import CheckSettings, run_check
        from kvdoctor.inputs.validate import named_vllm_release, validate_check_inputs
        from kvdoctor.facts.collect import CheckOptions

        team, chosen = team_and_choices(ctx, config)
        model, kv_cache_dtype, dtype, attention_backend, tensor_parallel_size, gpu = (chosen[n] for n in (
            "model", "kv_cache_dtype", "dtype", "attention_backend", "tensor_parallel_size", "gpu"))  # fmt: skip
        vllm_version, vllm_source, revision, offline, no_compile, compile_timeout, no_cache = (chosen[n] for n in (
            "vllm_version", "vllm_source", "revision", "offline", "no_compile", "compile_timeout", "no_cache"))  # fmt: skip
        output_format, fail_on, verbose = chosen["output_format"], chosen["fail_on"], chosen["verbose"]

        pasted, loose = split_pasted_command(list(ctx.args), sys.argv[1:])
        own_flags = tuple(sorted(o for p in ctx.command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")))

        def work():
            from kvdoctor.inputs.pasted_command import typed_command

            validate_check_inputs(fail_on=fail_on, compile_timeout=compile_timeout)
            named = named_vllm_release(vllm_version) if vllm_version is not None else None
            options = CheckOptions(
                model=model,
                serve_argv=tuple(typed_command(pasted)),
                loose_flags=tuple(loose),
                own_flags=own_flags,
                kv_cache_dtype=kv_cache_dtype,
                dtype=dtype,
                attention_backend=attention_backend,
                tensor_parallel_size=tensor_parallel_size,
                gpu=gpu,
                vllm_version=named.version if named else None,
                vllm_source=vllm_source,
                revision=revision,
                offline=offline,
                torch_check=torch_check,
                target_packages=target_packages(target_package),
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
            return with_note(run_check(options, settings), named.note if named else None)

        run_and_exit(work, CHECK, output_format, output, fail_on, verbose, debug)


def with_note(report, note: str | None):
    """The report with `note` first among its notes (how --vllm-version was read), or as it is."""
    from dataclasses import replace

    return replace(report, notes=(note, *report.notes)) if note else report


def split_pasted_command(extra: list[str], raw_argv: list[str]) -> tuple[list[str], list[str]]:
    """(the command after `--`, the unclaimed tokens before it): click hands both over as one list."""
    if "--" not in raw_argv:
        return [], extra
    pasted = raw_argv[raw_argv.index("--") + 1 :]
    if extra[len(extra) - len(pasted) :] != pasted:  # not run from a command line (an embedding); trust click
        return extra, []
    return pasted, extra[: len(extra) - len(pasted)]
