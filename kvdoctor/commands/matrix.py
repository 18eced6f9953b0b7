"""`kvdoctor matrix`: a grid of verdicts (and KV-cache capacity) for one model across GPUs and KV-cache dtypes."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kvdoctor.commands._options import (
    CompileTimeout,
    ModelDtype,
    NoCache,
    NoCompile,
    Offline,
    Revision,
    RulesFiles,
    TargetPackages,
    VllmSource,
    format_option,
    target_packages,
)
from kvdoctor.report.registry import MATRIX


def _split(text: Optional[str]) -> tuple[str, ...]:
    return tuple(part.strip() for part in (text or "").split(",") if part.strip())


def _given_not_empty(flag: str, text: Optional[str]) -> None:
    """A list given but naming nothing (`--gpus ""`, `--gpus ,`) is bad input, not the default list."""
    from kvdoctor.base.errors import UsageError

    if text is not None and not _split(text):
        raise UsageError(f"{flag} names nothing ({text!r}): give a comma-separated list, or leave the flag out")


def default_gpus() -> tuple[str, ...]:
    """Every GPU in the bundled table, weakest first."""
    from kvdoctor.data.gpus import gpu_table

    devices = {d.name: d for d in gpu_table().values()}
    return tuple(name for name, d in sorted(devices.items(), key=lambda item: (item[1].capability, item[0])))


def default_kv_dtypes(vllm_version: str | None) -> tuple[str, ...]:
    """Every --kv-cache-dtype value the target vLLM accepts (all kvdoctor knows when the version is unknown)."""
    from kvdoctor.facts.kv_dtypes import accepted_values

    return accepted_values(vllm_version)


def target_vllm_version(vllm_version: str | None, vllm_source: str | None) -> str | None:
    if vllm_version:
        return vllm_version
    from kvdoctor.facts.probes.versions import probe_versions, version_of_source

    return version_of_source(Path(vllm_source)) if vllm_source else probe_versions().vllm


def register(app: typer.Typer) -> None:
    @app.command()
    def matrix(
        model: str = typer.Option(..., "--model", "-m", help="Model directory, config.json, or Hugging Face id."),
        gpus: Optional[str] = typer.Option(None, "--gpus", help="Comma-separated GPUs (default: every GPU `kvdoctor gpus` lists)."),
        kv_cache_dtypes: Optional[str] = typer.Option(None, "--kv-cache-dtypes", help="Comma-separated values (default: every value the target vLLM accepts)."),
        vllm_source: VllmSource = None,
        vllm_version: Optional[str] = typer.Option(None, "--vllm-version", help="Judge as this vLLM version."),
        dtype: ModelDtype = None,
        tensor_parallel_size: Optional[int] = typer.Option(None, "--tensor-parallel-size", help="As vLLM's -tp (capacity is per GPU)."),
        gpu_memory_utilization: Optional[float] = typer.Option(None, "--gpu-memory-utilization", help="As vLLM's; sizes the KV cache (default: the release's, as check)."),
        max_model_len: Optional[int] = typer.Option(None, "--max-model-len", help="One request's length: a cell that cannot hold one is FAIL (default: what vLLM derives from config.json)."),
        quantization: Optional[str] = typer.Option(None, "--quantization", "-q", help="As vLLM's --quantization, for every cell (default: the checkpoint's own method)."),
        revision: Revision = None,
        offline: Offline = False,
        target_package: TargetPackages = [],
        rules: RulesFiles = [],
        no_compile: NoCompile = False,
        no_cache: NoCache = False,
        compile_timeout: CompileTimeout = 60.0,
        workers: Optional[int] = typer.Option(None, "--workers", help="Processes (default: the machine's cores)."),
        output_format: str = format_option(MATRIX),
        output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write --format output here; the terminal still gets the table."),
    ) -> None:
        """Which KV-cache dtype works on which GPU for this model and vLLM: verdicts, rule ids and KV capacity."""
        from kvdoctor.commands._run import fail_input, fail_internal, write_output
        from kvdoctor.base.errors import KvdoctorError, UsageError

        try:
            render = MATRIX.renderer(output_format)
            if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
                raise UsageError("--gpu-memory-utilization must be in (0, 1]")
            if max_model_len is not None and max_model_len < 1:
                raise UsageError("--max-model-len must be at least 1")
            request = _request(model, gpus, kv_cache_dtypes, vllm_source, vllm_version, dtype, tensor_parallel_size,
                               gpu_memory_utilization, max_model_len, revision, offline, rules, no_compile, no_cache,
                               compile_timeout, workers, quantization, target_packages(target_package))  # fmt: skip
            result = _run_with_progress(request)
            if output is not None:
                write_output(output, render(result))
            if output is None and output_format != MATRIX.terminal:
                typer.echo(render(result), nl=False)
            else:
                from rich.console import Console

                MATRIX.print_console(result, Console(highlight=False))
        except KvdoctorError as exc:
            fail_input(exc)
        except (typer.Exit, KeyboardInterrupt):
            raise
        except Exception as exc:  # kvdoctor's own bug: one line and exit 3, as `check` does
            fail_internal(exc)


def _request(model, gpus, kv_cache_dtypes, vllm_source, vllm_version, dtype, tensor_parallel_size,
             gpu_memory_utilization, max_model_len, revision, offline, rules, no_compile, no_cache,
             compile_timeout, workers, quantization=None, targets=()):  # fmt: skip
    from kvdoctor.base.cache_dir import default_cache_dir
    from kvdoctor.check.run import CheckSettings
    from kvdoctor.inputs.validate import validate_check_inputs
    from kvdoctor.facts.collect import CheckOptions
    from kvdoctor.base.errors import UsageError
    from kvdoctor.matrix import MatrixRequest

    # a bad value fails here, once, not in every cell
    validate_check_inputs(dtype=dtype, tensor_parallel_size=tensor_parallel_size, vllm_version=vllm_version,
                          vllm_source=vllm_source, compile_timeout=compile_timeout)  # fmt: skip
    _given_not_empty("--gpus", gpus)
    _given_not_empty("--kv-cache-dtypes", kv_cache_dtypes)
    gpu_list = _split(gpus) or default_gpus()
    for gpu in gpu_list:
        validate_check_inputs(gpu=gpu)
    dtypes = _split(kv_cache_dtypes) or default_kv_dtypes(target_vllm_version(vllm_version, vllm_source))
    if workers is not None and workers < 1:
        raise UsageError("--workers must be at least 1")
    options = CheckOptions(model=model, dtype=dtype, tensor_parallel_size=tensor_parallel_size,
                           vllm_version=vllm_version, vllm_source=vllm_source, revision=revision, offline=offline,
                           cache_dir=default_cache_dir(), target_packages=targets)  # fmt: skip
    settings = CheckSettings(rules_files=tuple(rules), compile=not no_compile, compile_timeout_s=compile_timeout,
                             use_cache=not no_cache)  # fmt: skip
    return MatrixRequest(model=model, gpus=gpu_list, kv_cache_dtypes=dtypes, options=options, settings=settings,
                         gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                         quantization=quantization, workers=workers)  # fmt: skip


def _run_with_progress(request):
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from kvdoctor.matrix import run_matrix

    total = len(request.gpus) * len(request.kv_cache_dtypes)
    columns = (TextColumn("[bold]matrix[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.description}"))  # fmt: skip
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("", total=total)

        def advance(cell) -> None:
            progress.update(task, advance=1, description=f"{cell.gpu} / {cell.kv_cache_dtype}: {cell.verdict}")

        return run_matrix(request, on_cell=advance)
