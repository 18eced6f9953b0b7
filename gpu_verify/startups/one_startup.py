"""One real vLLM start-up and a short generation, in this process; prints one `KVD-RESULT {...}` line.

    python -m gpu_verify.startups.one_startup '{"id": ..., "model": DIR, "kv": "turboquant_k8v4", ...}'

Run by run_startups.py with the release's site directory first on PYTHONPATH and the case's VLLM_* variables
already in the environment (VLLM_ENABLE_V1_MULTIPROCESSING=0 keeps the engine in this process, so a patch of
`_use_fp8_e4b15` reaches the kernels). Case keys: model, kv, dtype, backend (None = vLLM's choice),
force_e4b15 (the SM<8.9 key path on SM90), max_tokens. SIGUSR1 dumps every thread's stack (the runner sends it
before killing a case that ran out of time). `KVD-PHASE name seconds` lines mark how far it got. KVD_SITE names
the release's site directory, whose .pth files are processed first (PYTHONPATH entries skip them).
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time
import traceback

T0 = time.monotonic()
PATCH_MODULES = (
    "vllm.v1.attention.ops.triton_turboquant_decode",
    "vllm.v1.attention.ops.triton_turboquant_store",
    "vllm.v1.attention.backends.turboquant_attn",
)


def phase(name: str) -> None:
    print(f"KVD-PHASE {name} {time.monotonic() - T0:.1f}", flush=True)


def force_e4b15() -> list[str]:
    """Make every module that holds vLLM's `_use_fp8_e4b15` answer True (SM<8.9 key storage on SM90)."""
    import importlib

    patched = []
    for name in PATCH_MODULES:
        try:
            mod = importlib.import_module(name)
        except Exception as e:  # a release without the module: say so, the case still runs
            patched.append(f"{name}: not importable ({type(e).__name__})")
            continue
        if hasattr(mod, "_use_fp8_e4b15"):
            mod._use_fp8_e4b15 = lambda *a, **k: True
            patched.append(name)
    return patched


def engine_kwargs(case: dict) -> tuple[dict, list[str]]:
    """LLM(...) keyword arguments, only those this release's EngineArgs has (the dropped ones are reported)."""
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    fields = {f.name for f in dataclasses.fields(EngineArgs)}
    want = dict(model=case["model"], kv_cache_dtype=case["kv"], dtype=case.get("dtype", "auto"), enforce_eager=True,
                skip_tokenizer_init=True, max_model_len=512, max_num_seqs=4, max_num_batched_tokens=512,
                gpu_memory_utilization=0.04, kv_cache_memory_bytes=256 << 20, seed=0,
                kernel_config={"enable_flashinfer_autotune": False})
    if case.get("backend"):
        want["attention_config"] = {"backend": case["backend"]}
    if case.get("block_size"):
        want["block_size"] = case["block_size"]
    kept = {k: v for k, v in want.items() if k in fields}
    return kept, sorted(set(want) - set(kept))


def error_chain(exc: BaseException) -> list[dict]:
    """The exception and its causes, outermost first; each with the deepest frame that raised it."""
    chain, seen, x = [], set(), exc
    while x is not None and id(x) not in seen and len(chain) < 8:
        seen.add(id(x))
        tb = traceback.extract_tb(x.__traceback__) if x.__traceback__ else []
        where = f"{tb[-1].filename}:{tb[-1].lineno} in {tb[-1].name}" if tb else None
        chain.append({"type": type(x).__name__, "message": str(x)[:1500], "where": where})
        x = x.__cause__ if x.__cause__ is not None else (None if x.__suppress_context__ else x.__context__)
    return chain


def introspect(llm) -> dict:
    """Which model runner and attention backends the engine really built (best effort, per release)."""
    out: dict = {}
    try:
        core = llm.llm_engine.engine_core
        core = getattr(core, "engine_core", core)
        worker = core.model_executor.driver_worker
        worker = getattr(worker, "worker", worker)
        runner = worker.model_runner
        out["model_runner"] = f"{type(runner).__module__}.{type(runner).__name__}"
        ctx = runner.vllm_config.compilation_config.static_forward_context
        backends = set()
        for layer in ctx.values():
            backend = getattr(layer, "attn_backend", None)
            if backend is not None:
                backends.add(backend.get_name() if hasattr(backend, "get_name") else type(backend).__name__)
        out["attention_backends"] = sorted(backends)
        cache = getattr(runner, "kv_cache_config", None)
        if cache is not None:
            out["kv_cache_blocks"] = getattr(cache, "num_blocks", None)
    except Exception as e:
        out["introspect_error"] = f"{type(e).__name__}: {e}"[:300]
    return out


def main() -> int:
    if os.environ.get("KVD_SITE"):  # pip --target dirs on PYTHONPATH skip .pth files (cutlass DSL needs its one)
        import site

        site.addsitedir(os.environ["KVD_SITE"])
    faulthandler.enable()
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    case = json.loads(sys.argv[1])
    result: dict = {"id": case["id"], "ok": False}
    try:
        import torch

        result["torch_cuda"] = torch.version.cuda
        if case.get("force_e4b15"):
            result["patched"] = force_e4b15()
        from vllm import LLM, SamplingParams

        phase("imported")
        kwargs, dropped = engine_kwargs(case)
        result["engine_kwargs"] = {k: v for k, v in kwargs.items() if k != "model"}
        result["dropped_kwargs"] = dropped
        llm = LLM(**kwargs)
        result["startup_s"] = round(time.monotonic() - T0, 1)
        phase("engine_ready")
        result.update(introspect(llm))
        params = SamplingParams(max_tokens=case.get("max_tokens", 4), temperature=0.0, detokenize=False)
        out = llm.generate([{"prompt_token_ids": list(range(1, 17))}], params, use_tqdm=False)
        result["tokens"] = list(out[0].outputs[0].token_ids)
        result["ok"] = len(result["tokens"]) > 0
        result["total_s"] = round(time.monotonic() - T0, 1)
        phase("generated")
    except BaseException as e:  # the verdict is the exception: record it, never re-raise
        result["error"] = error_chain(e)
        result["total_s"] = round(time.monotonic() - T0, 1)
        traceback.print_exc()
    print("KVD-RESULT " + json.dumps(result), flush=True)
    sys.stdout.flush()
    os._exit(0)  # skip vLLM's atexit shutdown, which can hang after a failed start-up


if __name__ == "__main__":
    main()
