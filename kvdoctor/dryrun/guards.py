"""vLLM's start-up guard in front of the kernels a dry run compiles, as a result that comes before them."""

from __future__ import annotations

from kvdoctor.data.constructor_guards import constructor_guards
from kvdoctor.dryrun.kernel_source import KernelSource
from kvdoctor.model.dry_run import CompileFailure, DryRunRequest, KernelResult, Status

GUARDED_FAMILIES = {"triton_attention": "TRITON_ATTN", "triton_mla": "TRITON_MLA"}
"""Kernel family (runner.kernel_family) -> the vLLM backend whose constructor guards it."""


def guard_result(family: str | None, request: DryRunRequest, source: KernelSource | None) -> KernelResult | None:
    """vLLM's start-up guard (TritonAttentionImpl 0.24.0+, TritonMLAImpl 0.26.0+) when this release has it and
    it refuses the config: it raises before any kernel compiles, so it comes first; the kernels after it show
    what it protects from. The pack says which releases refuse what, in vLLM's words; for a release it does not
    hold, the guard is looked for in the release's own source (kvdoctor/data/constructor_guards.yaml)."""
    backend = GUARDED_FAMILIES.get(family or "")
    if backend is None or source is None:
        return None
    guard = constructor_guards()[backend]
    from kvdoctor.vllm_pack.select import NotInPack, constructor_guard

    version = request.vllm_version or source.version
    try:
        if not version:
            raise NotInPack("the vLLM version of these kernels is not known")
        found = constructor_guard(version, backend, tuple(request.capability), request.kv_cache_dtype)
    except NotInPack:  # a release the pack does not hold: find the guard in its own source
        refusal = guard.refusal_for(request.kv_cache_dtype)
        message = guard.fallback_message(request.kv_cache_dtype, tuple(request.capability))
        exc_type, file, kind = "ValueError", guard.source_file, refusal[1].kind if refusal else None
        lines = source_lines(source, file)
        hit = next((i for i, text in enumerate(lines) if refusal[1].needle in text), None) if message else None
        if hit is None:
            return None  # a release without the guard: the compile failure is the cause
        raise_line = next((i for i in range(hit, max(hit - 12, -1), -1) if "raise ValueError" in lines[i]), hit)
    else:
        if found is None:
            return None
        exc_type, message, where = found
        which = "fp8" if "FP8" in message else "bf16" if "bfloat16" in message else None
        kind = guard.refusals[which].kind if which in guard.refusals else None
        file, _, line = where.rpartition(":")
        raise_line = int(line) - 1
        lines = source_lines(source, file) if version == source.version else []
    failure = CompileFailure(
        kind=kind or "constructor_guard", exc_type=exc_type, message=message,
        innermost_type=exc_type, innermost_message=message, kernel_file=file, kernel_line=raise_line + 1,
        kernel_source_line=lines[raise_line].strip() if raise_line < len(lines) else None,
    )  # fmt: skip
    note = "vLLM refuses this configuration at start-up, before any of the kernels below is compiled"
    return KernelResult(guard.impl, "guard", file, Status.FAILED, 0.0, False, {}, failure, note)


def source_lines(source: KernelSource, file: str) -> list[str]:
    """The lines of one of the release's files; [] when it is not at hand or cannot be read."""
    path = source.files.get(file)
    try:
        return path.read_text(encoding="utf-8").splitlines() if path is not None else []
    except OSError:
        return []
