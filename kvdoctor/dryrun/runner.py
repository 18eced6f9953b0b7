"""run_dry_run(s): plan, look up the cache, compile the rest in a child, report."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from kvdoctor.dryrun import cache, compiler_process, warm_children
from kvdoctor.dryrun.kernel_source import DryRunSourceError, KernelSource, resolve_source
from kvdoctor.dryrun.plans import (
    PROBE_FILE,
    PROBE_FP8_FORMATS,
    TRITON_DTYPES,
    TURBOQUANT_PRESETS,
    CompileJob,
    plan_probe,
    plan_turboquant,
)
from kvdoctor.dryrun.guards import guard_result
from kvdoctor.dryrun.plans_attention import ATTENTION_KV_DTYPES, HELPERS_FILE, UNIFIED_FILE, plan_triton_attention
from kvdoctor.dryrun.plans_mla import MLA_KV_DTYPES, plan_triton_mla
from kvdoctor.model.dry_run import CompileFailure, DryRunReport, DryRunRequest, KernelResult, Status

PROBE_LABEL = "kvdoctor probe kernel, not vLLM's"
TRITON_BACKENDS = ("TRITON_ATTN", "TRITON_MLA", "TURBOQUANT")  # backends whose kernels kvdoctor compiles
SIBLINGS = {UNIFIED_FILE: (HELPERS_FILE,)}  # kernel files that import another vLLM file's @triton.jit helpers


def kernel_family(kv_cache_dtype: str, backend: str | None = None) -> str | None:
    """Which kernels a dry run compiles: "turboquant", "triton_attention", "triton_mla" (MLA decode),
    "probe" (fp8 KV on an unknown backend: kvdoctor's probe of the conversion), or None (nothing: a backend
    whose kernels are not Triton, or a KV dtype the backend does not list)."""
    if kv_cache_dtype in TURBOQUANT_PRESETS:
        return "turboquant"
    if backend == "TRITON_ATTN":
        return "triton_attention" if kv_cache_dtype in ATTENTION_KV_DTYPES else None
    if backend == "TRITON_MLA":
        return "triton_mla" if kv_cache_dtype in MLA_KV_DTYPES else None
    if backend is None and kv_cache_dtype in PROBE_FP8_FORMATS:
        return "probe"
    return None


def dry_run_applies(kv_cache_dtype: str, backend: str | None = None) -> bool:
    """True when a dry run has a kernel to compile for this KV-cache dtype on this backend."""
    return kernel_family(kv_cache_dtype, backend) is not None


def why_nothing_to_compile(kv_cache_dtype: str, backend: str | None) -> str:
    """One line on why kernel_family is None."""
    if backend and backend not in TRITON_BACKENDS:
        return f"the {backend} backend's kernels are not Triton kernels; kvdoctor compiles none for it"
    if backend == "TRITON_MLA" and kv_cache_dtype not in TURBOQUANT_PRESETS:
        return f"TRITON_MLA does not list --kv-cache-dtype {kv_cache_dtype} (it lists {', '.join(MLA_KV_DTYPES)})"
    return f"no kernel kvdoctor compiles for --kv-cache-dtype {kv_cache_dtype}" + (f" on {backend}" if backend else "")


def _triton_version() -> str | None:
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return None


def _skipped(request: DryRunRequest, reason: str, started: float, label: str = "none",
             version: str | None = None, triton: str | None = None) -> DryRunReport:  # fmt: skip
    return DryRunReport(Status.SKIPPED, request, (), label, version, triton, reason, time.perf_counter() - started)


# Which kernel roles can show a failure kind: fix verification recompiles just those.
def _choose_plan(request: DryRunRequest, source: KernelSource | None) -> tuple[list[CompileJob], str]:
    """Jobs and source label: vLLM's kernels when found, else kvdoctor's probe."""
    dtype = TRITON_DTYPES[request.model_dtype]
    cap = tuple(request.capability)
    family = kernel_family(request.kv_cache_dtype, request.backend)
    jobs: list[CompileJob] | None = None
    if family == "turboquant" and source is not None:
        jobs = plan_turboquant(request.kv_cache_dtype, dtype, request.head_dim, request.num_kv_heads, cap,
                               request.block_size)  # fmt: skip
    elif family == "triton_mla" and source is not None and request.kv_lora_rank:
        jobs = plan_triton_mla(request.kv_cache_dtype, dtype, request.kv_lora_rank,
                               request.head_dim - request.kv_lora_rank, request.num_q_heads or 1, cap,
                               request.block_size)  # fmt: skip
    elif family == "triton_attention" and source is not None:
        jobs = plan_triton_attention(request.kv_cache_dtype, dtype, request.head_dim, request.num_kv_heads,
                                     request.num_q_heads or request.num_kv_heads, cap, request.block_size,
                                     source.version or request.vllm_version)  # fmt: skip
    if family == "triton_mla" and source is not None and not request.kv_lora_rank:
        return [], "the MLA latent width (kv_lora_rank) is unknown, so the Triton MLA kernels cannot be specialised"
    if jobs is not None:
        if request.roles is not None:
            jobs = [job for job in jobs if job.role in request.roles]
        return jobs, source.label
    if request.use_probe:
        why = request.probe_reason or "no kernels of the judged vLLM version at hand; pass --vllm-source"
    elif source is None:
        why = "vLLM not installed"
    else:
        why = "kvdoctor does not compile vLLM's own fp8 KV kernels for an unknown attention backend"
    if request.kv_cache_dtype not in PROBE_FP8_FORMATS and request.kv_cache_dtype not in TURBOQUANT_PRESETS:
        return [], f"{PROBE_LABEL} ({why}); the probe models fp8 conversions only, so nothing was compiled"
    jobs = plan_probe(request.kv_cache_dtype, dtype, request.head_dim, cap, request.vllm_version)
    return jobs, f"{PROBE_LABEL} ({why})"


def _job_path(job: CompileJob, source: KernelSource | None) -> Path | None:
    if job.role == "probe":
        return Path(__file__).resolve().parents[2] / PROBE_FILE
    return source.files.get(job.source_file) if source else None


def _kernel_result(job: CompileJob, result: dict[str, Any], cached: bool) -> KernelResult:
    failure = result.get("failure")
    if failure is not None:
        names = {f.name for f in dataclasses.fields(CompileFailure)}
        failure = CompileFailure(**{k: v for k, v in failure.items() if k in names})
    return KernelResult(job.kernel, job.role, job.source_file, Status(result["status"]), float(result["seconds"]),
                        cached, job.inputs(), failure, result.get("note"))  # fmt: skip


def _verdict(kernels: list[KernelResult]) -> tuple[Status, str | None]:
    bad = [k for k in kernels if k.status.is_failure]
    if bad:
        first = bad[0]
        kind = first.failure.kind if first.failure else first.status
        return Status.FAILED, f"{first.kernel} {first.status} ({kind}) for this target"
    skipped = [k for k in kernels if k.status == Status.SKIPPED]
    if skipped:
        return Status.SKIPPED, f"{skipped[0].kernel} skipped: {skipped[0].note}"
    return Status.PASSED, None


def prestart_compilers(cache_dir: Path | None = None, *, use_cache: bool = True) -> int:
    """Start the compiler children now, while the caller gathers facts, unless the last run of this command line
    compiled nothing (warm_children); returns how many were started. Call it early, at most once."""
    usable = cache_dir if cache_dir is not None else cache.default_cache_dir()
    return warm_children.prestart(usable if use_cache else None, sys.argv, compiler_process.child_env(),
                                  compiler_process.spawn_child)  # fmt: skip


def run_dry_run(request: DryRunRequest, *, cache_dir: Path | None = None, use_cache: bool = True,
                timeout_s: float = 60.0) -> DryRunReport:  # fmt: skip
    """Compile the kernels vLLM would compile for request on its target GPU, without that GPU.

    Never raises for compiler trouble (failures, hangs, crashes are results); raises DryRunSourceError
    (a KvdoctorError) when request.vllm_source is not a vllm wheel or tree.
    """
    return run_dry_runs([request], cache_dir=cache_dir, use_cache=use_cache, timeout_s=timeout_s)[0]


def run_dry_runs(requests: list[DryRunRequest], *, cache_dir: Path | None = None, use_cache: bool = True,
                 timeout_s: float = 60.0) -> list[DryRunReport]:  # fmt: skip
    """run_dry_run for several requests, with every uncached kernel compiled in one child process
    (a child costs ~0.35 s to start; a check and its fix verifications share one).

    A bad vllm_source in the first request raises DryRunSourceError; in a later one (a fix candidate's
    wheel, say) it only skips that request, with the reason."""
    started = time.perf_counter()
    triton_version = _triton_version()
    notes: list[str] = []
    usable, why_not = cache.usable_cache_dir(cache_dir if cache_dir is not None else cache.default_cache_dir())
    if why_not:
        notes.append(why_not)
    with ExitStack() as stack:
        scratch = usable or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kvdoctor-")))
        plans = []
        for position, request in enumerate(requests):
            try:
                plans.append(_plan_request(request, triton_version, scratch, usable, use_cache, started))
            except DryRunSourceError as exc:
                if position == 0:
                    raise
                plans.append({"report": _skipped(request, exc.one_line(), started)})
        pending = [(plan, index, key, payload) for plan in plans for index, key, payload in plan.get("pending", [])]
        if pending:
            if usable and use_cache:
                triton_cache = usable / "triton"
            else:
                triton_cache = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kvdoctor-triton-")))
            # identical jobs (same kernel file, Triton, target and inputs) across requests compile once
            unique: dict[str, dict[str, Any]] = {}
            for _, _, key, payload in pending:
                unique.setdefault(key, payload)
            compiled = dict(zip(unique, compiler_process.run_jobs(list(unique.values()), timeout_s, triton_cache)))
            outcomes = [compiled[key] for _, _, key, _ in pending]
            if not (usable and use_cache) or any(o.get("status") not in cache.CACHEABLE for o in outcomes):
                warm_children.forget(usable, sys.argv)
            for (plan, index, key, _), outcome in zip(pending, outcomes):
                plan["kernels"][index] = _kernel_result(plan["jobs"][index], outcome, cached=False)
                if usable and key:
                    cache.store_result(usable, key, outcome)
    return [plan.get("report") or _finish(plan, notes, triton_version, started) for plan in plans]


def _plan_request(request: DryRunRequest, triton_version: str | None, scratch: Path, usable: Path | None,
                  use_cache: bool, started: float) -> dict[str, Any]:  # fmt: skip
    """Jobs for one request, with cache hits filled in and the rest listed as pending."""
    if not dry_run_applies(request.kv_cache_dtype, request.backend):
        return {"report": _skipped(request, why_nothing_to_compile(request.kv_cache_dtype, request.backend), started)}
    if request.model_dtype not in TRITON_DTYPES:
        reason = f"model dtype {request.model_dtype!r} is not one kvdoctor can compile for"
        return {"report": _skipped(request, reason, started)}
    if triton_version is None:
        return {"report": _skipped(request, "Triton is not installed (pip install triton)", started)}
    source = None if request.use_probe else resolve_source(request.vllm_source, scratch)
    jobs, label = _choose_plan(request, source)
    if not jobs:
        return {"report": _skipped(request, label, started)}
    guard = guard_result(kernel_family(request.kv_cache_dtype, request.backend), request, source)
    kernels: list[KernelResult | None] = [None] * len(jobs)
    pending: list[tuple[int, str | None, dict[str, Any]]] = []
    for index, job in enumerate(jobs):
        path = _job_path(job, source)
        if path is None:
            what = "TurboQuant" if "turboquant" in job.source_file else "such"
            note = f"{job.source_file} is not in {label}; this vLLM has no {what} kernel to compile"
            kernels[index] = KernelResult(job.kernel, job.role, job.source_file, Status.SKIPPED, 0.0, False,
                                          job.inputs(), None, note)  # fmt: skip
            continue
        siblings = {rel: source.files[rel] for rel in SIBLINGS.get(job.source_file, ()) if rel in source.files}
        content = "+".join(cache.file_sha256(p) for p in (path, *siblings.values()))
        key = cache.result_key(content if siblings else cache.file_sha256(path), triton_version, job.kernel,
                               job.inputs())  # fmt: skip
        hit = cache.load_result(usable, key) if usable and use_cache else None
        if hit is not None:
            try:
                kernels[index] = _kernel_result(job, hit, cached=True)
                continue
            except (KeyError, TypeError, ValueError):
                pass  # an entry that parses but does not fit: recompile
        siblings_json = {rel: str(p) for rel, p in siblings.items()}
        pending.append((index, key, {**job.to_json(), "path": str(path), "siblings": siblings_json}))
    version = source.version if source else None
    return {"request": request, "jobs": jobs, "kernels": kernels, "pending": pending, "label": label,
            "version": version, "guard": guard}  # fmt: skip


def _finish(plan: dict[str, Any], notes: list[str], triton_version: str | None, started: float) -> DryRunReport:
    results = [k for k in plan["kernels"] if k is not None]
    if plan.get("guard") is not None:
        results.insert(0, plan["guard"])
    if notes:
        results = [dataclasses.replace(k, note="; ".join(filter(None, [k.note, *notes]))) for k in results]
    status, reason = _verdict(results)
    return DryRunReport(status, plan["request"], tuple(results), plan["label"], plan["version"], triton_version,
                        reason, time.perf_counter() - started)  # fmt: skip
