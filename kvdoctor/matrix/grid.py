"""The matrix: one `kvdoctor check` per (GPU, KV-cache dtype) cell, compiled in parallel; each cell's verdict, rules
and KV-cache capacity are that check's (its memory.* facts and the rules of data/rules/check-fit.yaml and
check-quantization.yaml), so a cell says what `kvdoctor check` says for the same inputs."""

from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import Callable

from kvdoctor.check.run import CheckSettings
from kvdoctor.facts.collect import CheckOptions
from kvdoctor.matrix.capacity import Capacity, capacity_from_facts

ASSUMPTIONS = (
    "Capacity is check's own fit model (docs/fit.md): the context length vLLM derives, KV bytes per token and the "
    "groups as vLLM's planner builds them, the memory left after the weights and a modelled activation peak with "
    "its error band; tokens and concurrency are what vLLM will log ('GPU KV cache size', 'Maximum concurrency').",
    "A cell whose KV cache cannot hold one request of max_model_len is FAIL (check's fit rule that says so, or the "
    "one for no memory left after the weights); inside the budget's error band it is WARN.",
    "'capacity n/a' means check did not judge the fit (its reason is in the cell: e.g. hybrid Mamba layers, a "
    "--kv-cache-dtype whose page size is not modelled, releases that disagree when no version is named).",
)


@dataclass(frozen=True)
class MatrixRequest:
    """What `kvdoctor matrix` was asked."""

    model: str
    gpus: tuple[str, ...]
    """--gpu targets, one row each."""
    kv_cache_dtypes: tuple[str, ...]
    """One column each."""
    options: CheckOptions
    """Everything but gpu and kv_cache_dtype, shared by every cell."""
    settings: CheckSettings
    gpu_memory_utilization: float | None = None
    """None: the judged release's default, as check."""
    max_model_len: int | None = None
    """None: the length vLLM derives from config.json, as check."""
    quantization: str | None = None
    """--quantization for every cell (None: the checkpoint's own method, if any)."""
    workers: int | None = None
    """Processes; None = os.cpu_count()."""


@dataclass(frozen=True)
class Cell:
    """One (GPU, KV-cache dtype) verdict."""

    gpu: str
    kv_cache_dtype: str
    verdict: str
    """PASS, WARN, FAIL, or ERROR when the check itself could not run (message in error)."""
    rules: tuple[tuple[str, str, str], ...] = ()
    """(rule id, severity, 'fired' / 'undecided' / 'ignored') of each finding."""
    gpu_name: str | None = None
    capability: float | None = None
    memory_gib: float | None = None
    dry_run: str | None = None
    """Dry-run status: passed, failed, skipped, or None when not run."""
    dry_run_source: str | None = None
    """'vllm' (vLLM's real kernels) or 'probe' (kvdoctor's probe kernel) when a dry run ran."""
    compile_seconds: float = 0.0
    cached: bool = False
    """Every compiled kernel came from the cache."""
    capacity: Capacity | None = None
    error: str | None = None


@dataclass(frozen=True)
class Matrix:
    model: str
    vllm_version: str | None
    gpus: tuple[str, ...]
    kv_cache_dtypes: tuple[str, ...]
    cells: tuple[Cell, ...]
    gpu_memory_utilization: float | None
    """As asked; None: each release's default (the cells' kv_budget says the figure used)."""
    max_model_len: int | None
    """The length every cell judged one request at (context.max_model_len); None when the cells disagree or none
    knows it."""
    weights_bytes: int | None
    weights_source: str | None
    seconds: float
    workers: int
    assumptions: tuple[str, ...] = ASSUMPTIONS
    notes: tuple[str, ...] = field(default=())

    def cell(self, gpu: str, kv_cache_dtype: str) -> Cell:
        return next(c for c in self.cells if c.gpu == gpu and c.kv_cache_dtype == kv_cache_dtype)


def serve_flags(request: MatrixRequest) -> tuple[str, ...]:
    """The vLLM serve flags every cell's check reads, as `kvdoctor check` takes them mixed in."""
    flags: list[str] = []
    if request.gpu_memory_utilization is not None:
        flags += ["--gpu-memory-utilization", f"{request.gpu_memory_utilization:g}"]
    if request.max_model_len is not None:
        flags += ["--max-model-len", str(request.max_model_len)]
    if request.quantization is not None:
        flags += ["--quantization", request.quantization]
    return tuple(flags)


def judge_cell(options: CheckOptions, settings: CheckSettings) -> tuple[Cell, dict]:
    """Run one check (in a worker process); the cell and the facts the matrix header reads."""
    from kvdoctor.check.run import run_check
    from kvdoctor.base.errors import KvdoctorError

    try:
        report = run_check(options, settings)
    except KvdoctorError as exc:
        return Cell(options.gpu or "", options.kv_cache_dtype or "", "ERROR", error=exc.one_line()), {}
    facts = report.facts
    dry = report.dry_run
    kernels = dry.kernels if dry else ()
    rules = tuple(
        (f.rule_id, f.severity, "ignored" if f.ignored_reason else f.status) for f in report.sorted_findings()
    )
    cell = Cell(
        gpu=options.gpu or "",
        kv_cache_dtype=options.kv_cache_dtype or "",
        verdict=report.verdict,
        rules=rules,
        gpu_name=facts.get("gpu.name"),
        capability=facts.get("gpu.capability"),
        memory_gib=facts.get("gpu.memory_gib"),
        dry_run=str(dry.status) if dry else None,
        dry_run_source=facts.get("dryrun.source") if dry and dry.status in ("passed", "failed") else None,
        compile_seconds=float(sum(k.seconds for k in kernels if not k.cached)),
        cached=bool(kernels) and all(k.cached for k in kernels),
        capacity=capacity_from_facts(facts),
    )
    header = {k: facts.get(k) for k in ("vllm.version", "context.max_model_len", "checkpoint.weights_bytes",
                                        "checkpoint.weights_source", "memory.weights_bytes", "memory.weights_estimated")}  # fmt: skip
    return cell, header


def _waves(request: MatrixRequest) -> list[list[tuple[str, str]]]:
    """Cells in two waves: one per (capability, dtype) first, so the rest find its compile in the cache."""
    from kvdoctor.data.gpus import resolve_gpu_target

    first, rest, seen = [], [], set()
    for dtype in request.kv_cache_dtypes:
        for gpu in request.gpus:
            key = (resolve_gpu_target(gpu).capability, dtype)
            (rest if key in seen else first).append((gpu, dtype))
            seen.add(key)
    return [first, rest]


def run_matrix(request: MatrixRequest, on_cell: Callable[[Cell], None] | None = None) -> Matrix:
    """Judge every cell in parallel (processes sized to the cores): each one `kvdoctor check`, capacity included."""
    from kvdoctor.facts.probes.model_config import read_model_facts
    from kvdoctor.facts.probes.model_source import locate_config, offline_requested

    started = time.perf_counter()
    options = replace(request.options, loose_flags=(*request.options.loose_flags, *serve_flags(request)))
    download_dir = options.cache_dir / "hf" if options.cache_dir else None
    # locate once here, so workers find config.json in the cache instead of each asking the hub
    location = locate_config(request.model, revision=options.revision,
                             offline=offline_requested(options.offline), download_dir=download_dir)  # fmt: skip
    model_facts = read_model_facts(location)
    workers = max(1, request.workers or os.cpu_count() or 1)
    results: dict[tuple[str, str], tuple[Cell, dict]] = {}
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for wave in _waves(request):
            futures = {
                pool.submit(judge_cell, replace(options, gpu=gpu, kv_cache_dtype=dtype), request.settings): (gpu, dtype)
                for gpu, dtype in wave
            }
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                if on_cell:
                    on_cell(results[futures[future]][0])
    headers = [header for _, header in results.values() if header]
    weights_bytes, weights_source = _weights(headers)
    return Matrix(
        model=model_facts.model_id or request.model,
        vllm_version=_agreed(headers, "vllm.version"),
        gpus=request.gpus,
        kv_cache_dtypes=request.kv_cache_dtypes,
        cells=tuple(results[(gpu, dtype)][0] for gpu in request.gpus for dtype in request.kv_cache_dtypes),
        gpu_memory_utilization=request.gpu_memory_utilization,
        max_model_len=_agreed(headers, "context.max_model_len"),
        weights_bytes=weights_bytes,
        weights_source=weights_source,
        seconds=time.perf_counter() - started,
        workers=workers,
    )


def _agreed(headers: list[dict], name: str):
    """The value every cell that knows it agrees on; None when none knows it or they differ."""
    values = {h.get(name) for h in headers} - {None}
    return values.pop() if len(values) == 1 else None


def _weights(headers: list[dict]) -> tuple[int | None, str | None]:
    """The checkpoint's bytes and where they came from, as check read them (per rank when only estimated)."""
    exact = _agreed(headers, "checkpoint.weights_bytes")
    if exact:
        return exact, _agreed(headers, "checkpoint.weights_source")
    estimated = _agreed(headers, "memory.weights_bytes")
    if estimated:
        return estimated, "estimated from config.json's shapes (per rank; no checkpoint size found)"
    return None, None
