"""The matrix: one `kvdoctor check` per (GPU, KV-cache dtype) cell, compiled in parallel, with capacity."""

from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import Callable

from kvdoctor.check.run import CheckSettings
from kvdoctor.facts.collect import CheckOptions
from kvdoctor.matrix.capacity import ASSUMPTIONS, Capacity, ModelShape, capacity


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
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    """None: the model's max_position_embeddings."""
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
    gpu_memory_utilization: float
    max_model_len: int | None
    weights_bytes: int | None
    weights_source: str | None
    seconds: float
    workers: int
    assumptions: tuple[str, ...] = ASSUMPTIONS
    notes: tuple[str, ...] = field(default=())

    def cell(self, gpu: str, kv_cache_dtype: str) -> Cell:
        return next(c for c in self.cells if c.gpu == gpu and c.kv_cache_dtype == kv_cache_dtype)


def judge_cell(options: CheckOptions, settings: CheckSettings) -> tuple[Cell, dict]:
    """Run one check (in a worker process); the cell and the model facts capacity needs."""
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
    )
    shape_facts = {k: facts.get(k) for k in ("model.num_hidden_layers", "model.num_kv_heads", "model.head_dim",
                                             "model.dtype", "model.is_mla", "model.max_position_embeddings", "vllm.version")}  # fmt: skip
    return cell, shape_facts


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
    """Judge every cell in parallel (processes sized to the cores), then size each cell's KV cache."""
    from kvdoctor.matrix.weights import weights_size
    from kvdoctor.facts.probes.model_config import read_model_facts
    from kvdoctor.facts.probes.model_source import locate_config, offline_requested

    started = time.perf_counter()
    options = request.options
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
    shape_facts = next((facts for _, facts in results.values() if facts), {})
    weights = weights_size(location.path, location.model_dir, shape_facts.get("model.dtype") or model_facts.config_dtype)
    max_len = request.max_model_len or shape_facts.get("model.max_position_embeddings")
    cells = []
    for gpu in request.gpus:
        for dtype in request.kv_cache_dtypes:
            cell, facts = results[(gpu, dtype)]
            cells.append(replace(cell, capacity=_capacity(cell, facts, weights, request, max_len)))
    return Matrix(
        model=model_facts.model_id or request.model,
        vllm_version=shape_facts.get("vllm.version"),
        gpus=request.gpus,
        kv_cache_dtypes=request.kv_cache_dtypes,
        cells=tuple(cells),
        gpu_memory_utilization=request.gpu_memory_utilization,
        max_model_len=max_len,
        weights_bytes=weights.bytes if weights else None,
        weights_source=weights.source if weights else None,
        seconds=time.perf_counter() - started,
        workers=workers,
    )


def _capacity(cell: Cell, facts: dict, weights, request: MatrixRequest, max_len: int | None) -> Capacity | None:
    needed = ("model.num_hidden_layers", "model.num_kv_heads", "model.head_dim")
    if cell.memory_gib is None or weights is None or any(facts.get(k) is None for k in needed):
        return None
    shape = ModelShape(facts["model.num_hidden_layers"], facts["model.num_kv_heads"], facts["model.head_dim"],
                       facts.get("model.dtype") or "bfloat16", bool(facts.get("model.is_mla")))  # fmt: skip
    return capacity(shape, cell.kv_cache_dtype, cell.memory_gib, weights.bytes, request.gpu_memory_utilization,
                    max_len, request.options.tensor_parallel_size or 1)  # fmt: skip
