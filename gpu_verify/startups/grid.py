"""The start-up configurations that mean something on an SM90 GPU, per vLLM release.

A case is a plain dict: id, model (dense | moe | hybrid), kv, dtype, backend (None = vLLM's own choice), runner
(None = vLLM's default, "0" = V1, "1" = V2: the value of VLLM_USE_V2_MODEL_RUNNER), force_e4b15 (vLLM's
`_use_fp8_e4b15` patched to True: the SM<8.9 key path on this SM90 GPU). `full` is the grid for the releases
that matter most; `short` keeps the cases whose outcome changes between releases (TurboQuant, runners, the
SM<8.9 key path, MoE).
"""

from __future__ import annotations

TURBOQUANT = ("turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc")
FP8 = ("fp8", "fp8_e4m3", "fp8_e5m2")
KV_ALL = ("auto", *FP8, *TURBOQUANT)
SHORT_KV = {"auto": "auto", "fp8": "fp8", "fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2", "turboquant_k8v4": "k8v4",
            "turboquant_4bit_nc": "4bit", "turboquant_k3v4_nc": "k3v4", "turboquant_3bit_nc": "3bit"}


def _vt(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3])


def has_v1_runner(version: str) -> bool:
    """0.34.0 removed the V1 GPU model runner (VLLM_USE_V2_MODEL_RUNNER other than 1 is an error there)."""
    return _vt(version) < (0, 34, 0)


def case(model: str = "dense", kv: str = "auto", dtype: str = "bfloat16", backend: str | None = None,
         runner: str | None = None, force_e4b15: bool = False, limit_s: float | None = None) -> dict:
    parts = [model, SHORT_KV.get(kv, kv), {"bfloat16": "bf16", "float16": "fp16"}.get(dtype, dtype)]
    if backend:
        parts.append(backend.lower())
    if runner is not None:
        parts.append(f"v{'2' if runner == '1' else '1'}")
    if force_e4b15:
        parts.append("e4b15")
    out = {"id": "-".join(parts), "model": model, "kv": kv, "dtype": dtype, "backend": backend, "runner": runner,
           "force_e4b15": force_e4b15}
    if limit_s:
        out["limit_s"] = limit_s
    return out


def grid(version: str, size: str = "full") -> list[dict]:
    """The cases for one release, most informative first (the runner starts them in this order)."""
    cases: list[dict] = []
    # The founding question first: k8v4 on the SM<8.9 key path, both runners, both dtypes.
    cases.append(case(kv="turboquant_k8v4", force_e4b15=True))
    cases.append(case(kv="turboquant_k8v4", dtype="float16", force_e4b15=True))
    cases.append(case(kv="turboquant_4bit_nc", force_e4b15=True))
    if has_v1_runner(version):
        cases.append(case(kv="turboquant_k8v4", runner="0"))
        cases.append(case(kv="turboquant_k8v4", runner="0", force_e4b15=True))
        cases.append(case(kv="turboquant_4bit_nc", runner="0"))
    else:
        cases.append(case(kv="auto", runner="0"))
    cases += [case(kv=kv) for kv in KV_ALL]
    cases.append(case(model="moe", kv="turboquant_k8v4"))
    cases.append(case(model="moe", kv="auto"))
    if size == "short":
        return cases
    cases.append(case(model="moe", kv="turboquant_k8v4", runner="1"))
    cases.append(case(model="moe", kv="fp8"))
    cases.append(case(model="hybrid", kv="auto"))
    cases.append(case(model="hybrid", kv="turboquant_k8v4"))
    if has_v1_runner(version):
        cases += [case(kv=kv, runner="0") for kv in ("auto", "fp8")]
        cases.append(case(kv="turboquant_k8v4", runner="1"))
    else:
        cases.append(case(kv="turboquant_k8v4", runner="1"))
    cases += [case(kv=kv, dtype="float16") for kv in ("auto", "fp8", "fp8_e5m2", "turboquant_k8v4",
                                                       "turboquant_4bit_nc")]
    for backend in ("FLASH_ATTN", "TRITON_ATTN", "FLASHINFER"):
        for kv in ("auto", "fp8", "fp8_e5m2", "turboquant_k8v4"):
            cases.append(case(kv=kv, backend=backend, limit_s=300 if backend == "FLASHINFER" else None))
    cases.append(case(kv="fp8_e4m3", backend="TRITON_ATTN"))
    cases.append(case(kv="auto", backend="TURBOQUANT"))
    cases.append(case(kv="turboquant_k8v4", backend="TURBOQUANT"))
    return cases
