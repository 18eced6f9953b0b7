"""Turn a DryRunRequest into compile jobs: which kernels, with which dtypes and constexprs.

The values mirror vLLM's launchers (triton_turboquant_store, triton_turboquant_decode_attention and the
backend's continuation-prefill dequant), which share one layout in vLLM 0.20.0-0.33.0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvdoctor.base.versions import release_numbers
from kvdoctor.data.kernel_layouts import launches_since
from kvdoctor.data.turboquant import presets

STORE_FILE = "vllm/v1/attention/ops/triton_turboquant_store.py"
DECODE_FILE = "vllm/v1/attention/ops/triton_turboquant_decode.py"
PROBE_FILE = "kvdoctor/dryrun/probe_kernel.py"
PROBE_KERNEL = "kvdoctor_probe_fp8_convert"

# preset -> (key_quant_bits, value_quant_bits, norm_correction), as in vLLM's TQ_PRESETS (kvdoctor/data/turboquant.yaml)
TURBOQUANT_PRESETS: dict[str, tuple[int, int, bool]] = {
    name: (p.key_bits, p.value_bits, p.norm_correction) for name, p in presets().items()
}

# kv dtype -> fp8 format vLLM's kernels would write (probe only; TurboQuant k8v4 depends on the GPU)
PROBE_FP8_FORMATS = {"fp8": "fp8e4nv", "fp8_e4m3": "fp8e4nv", "fp8_e5m2": "fp8e5"}

TRITON_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}

# tq_max_kv_splits_for_cuda_graph default; constexpr only shapes the grid, not the dtypes
NUM_KV_SPLITS = 32
KV_GROUP_SIZE = 1

STORE_FP8_ARGS = (
    "Key_ptr", "Value_ptr", "KV_cache_ptr", "Slot_mapping_ptr",
    "stride_cache_block", "stride_cache_pos", "stride_cache_head",
    "D", "H", "BLOCK_SIZE", "BLOCK_D", "KPS", "VQB", "VAL_DATA_BYTES", "BLOCK_VAL", "BLOCK_GRP", "FP8_E4B15",
)  # fmt: skip
STORE_MSE_ARGS = (
    "Y_ptr", "Norms_ptr", "Value_ptr", "Midpoints_ptr", "KV_cache_ptr", "Slot_mapping_ptr",
    "stride_cache_block", "stride_cache_pos", "stride_cache_head",
    "D", "H", "BLOCK_SIZE", "BLOCK_D", "MSE_BYTES", "KPS", "VQB", "VAL_DATA_BYTES", "BLOCK_VAL",
    "MSE_BITS", "N_CENTROIDS", "BLOCK_GRP",
)  # fmt: skip
DECODE_STAGE1_ARGS = (
    "Q_rot_ptr", "KV_cache_ptr", "Block_table_ptr", "Seq_lens_ptr", "Centroids_ptr", "Mid_o_ptr",
    "stride_qb", "stride_qh", "stride_cache_block", "stride_cache_pos", "stride_cache_head", "stride_bt_b",
    "stride_mid_b", "stride_mid_h", "stride_mid_s",
    "NUM_KV_HEADS", "HEAD_DIM", "BLOCK_SIZE", "NUM_KV_SPLITS", "KV_GROUP_SIZE", "MSE_BITS", "MSE_BYTES",
    "KPS", "VQB", "VAL_DATA_BYTES", "ATTN_SCALE", "BLOCK_D", "BLOCK_KV", "KEY_FP8", "NORM_CORRECTION",
    "FP8_E4B15",
)  # fmt: skip
FULL_DEQUANT_ARGS = (
    "KV_cache_ptr", "Block_table_ptr", "Centroids_ptr", "K_out_ptr", "V_out_ptr",
    "stride_ko_b", "stride_ko_h", "stride_ko_s", "stride_vo_b", "stride_vo_h", "stride_vo_s",
    "stride_cache_block", "stride_cache_pos", "stride_cache_head", "stride_bt_b",
    "HEAD_DIM", "BLOCK_SIZE", "NUM_KV_HEADS", "MSE_BYTES", "KPS", "VQB", "VAL_DATA_BYTES", "MSE_BITS",
    "KEY_FP8", "BLOCK_D", "NORM_CORRECTION", "FP8_E4B15",
)  # fmt: skip
PROBE_ARGS = ("In_ptr", "Out_ptr", "BLOCK", "FP8_FORMAT", "WIDEN_FIRST")


@dataclass(frozen=True)
class CompileJob:
    """One kernel to compile, exactly as a launcher would specialise it."""

    kernel: str
    """Kernel function name inside source_file."""
    role: str
    """"store", "decode" or "probe"."""
    source_file: str
    """Path of the kernel's file inside vllm (or kvdoctor for the probe)."""
    expected_args: tuple[str, ...]
    """The kernel's parameter names this plan was written for; anything else = a changed layout."""
    signature: dict[str, str]
    """Triton signature: pointer/int dtypes for runtime args, "constexpr" for constexprs."""
    constexprs: dict[str, Any]
    """Constexpr values."""
    capability: tuple[int, int]
    """Target compute capability."""
    num_warps: int
    """As the launcher passes it."""
    num_stages: int | None
    """As the launcher passes it; None = Triton's default."""
    by_name: bool = False
    """Bind signature/constexprs to the kernel's parameters by name (they may list parameters other releases
    have); else expected_args must equal the kernel's parameters exactly."""

    def inputs(self) -> dict[str, Any]:
        """JSON-able description of what this job compiles, for reports and cache keys."""
        runtime = {k: v for k, v in self.signature.items() if v != "constexpr"}
        return {
            "target": f"sm_{self.capability[0]}{self.capability[1]}",
            "signature": runtime,
            "constexprs": dict(self.constexprs),
            "num_warps": self.num_warps,
            "num_stages": self.num_stages,
        }

    def to_json(self) -> dict[str, Any]:
        """Plain dict for the child process."""
        return {
            "kernel": self.kernel,
            "role": self.role,
            "source_file": self.source_file,
            "expected_args": list(self.expected_args),
            "signature": self.signature,
            "constexprs": self.constexprs,
            "capability": list(self.capability),
            "num_warps": self.num_warps,
            "num_stages": self.num_stages,
            "by_name": self.by_name,
        }


def fp8_e4b15_flag(capability: tuple[int, int]) -> int:
    """vLLM's `_use_fp8_e4b15` rule: Triton's software e4b15 below SM 8.9."""
    return 1 if tuple(capability) < (8, 9) else 0


def next_pow2(n: int) -> int:
    """The smallest power of two >= n (triton.next_power_of_2, as vLLM's launchers size their blocks); 1 for n <= 1."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _signature(args: tuple[str, ...], runtime: dict[str, str]) -> dict[str, str]:
    return {name: runtime.get(name, "constexpr") for name in args}


def _layout(preset: str, head_dim: int, num_kv_heads: int, block_size: int) -> dict[str, int]:
    key_bits, value_bits, norm_correction = TURBOQUANT_PRESETS[preset]
    key_fp8 = key_bits == 8
    mse_bits = 0 if key_fp8 else key_bits  # TurboQuantConfig.key_mse_bits
    kps = head_dim if key_fp8 else math.ceil(head_dim * key_bits / 8) + 2
    val_bytes = math.ceil(head_dim * value_bits / 8)
    slot = kps + val_bytes + 4
    slot += slot % 2
    return {
        "key_fp8": int(key_fp8), "mse_bits": mse_bits, "mse_bytes": math.ceil(head_dim * mse_bits / 8),
        "kps": kps, "vqb": value_bits, "val_bytes": val_bytes, "norm_correction": int(norm_correction),
        "stride_block": block_size * num_kv_heads * slot, "stride_pos": num_kv_heads * slot,
        "stride_head": slot, "block_d": next_pow2(head_dim),
        "block_grp": next_pow2(head_dim // 8) if head_dim >= 8 else 1,
    }  # fmt: skip


def plan_turboquant(
    preset: str, dtype: str, head_dim: int, num_kv_heads: int, capability: tuple[int, int], block_size: int
) -> list[CompileJob]:
    """Store kernel of the preset plus both decode kernels, as vLLM would launch them."""
    lay = _layout(preset, head_dim, num_kv_heads, block_size)
    e4b15 = fp8_e4b15_flag(capability)
    cap = tuple(capability)
    strides = {
        "stride_cache_block": lay["stride_block"],
        "stride_cache_pos": lay["stride_pos"],
        "stride_cache_head": lay["stride_head"],
    }
    common = {"D": head_dim, "H": num_kv_heads, "BLOCK_SIZE": block_size, "BLOCK_D": lay["block_d"]}
    value = {"VQB": lay["vqb"], "VAL_DATA_BYTES": lay["val_bytes"], "BLOCK_VAL": next_pow2(lay["val_bytes"])}
    if lay["key_fp8"]:
        runtime = {"Key_ptr": f"*{dtype}", "Value_ptr": f"*{dtype}", "KV_cache_ptr": "*u8", "Slot_mapping_ptr": "*i64"}
        consts = {**strides, **common, "KPS": lay["kps"], **value, "BLOCK_GRP": lay["block_grp"], "FP8_E4B15": e4b15}
        store = CompileJob("_tq_fused_store_fp8", "store", STORE_FILE, STORE_FP8_ARGS,
                           _signature(STORE_FP8_ARGS, runtime), consts, cap, 4, 1)  # fmt: skip
    else:
        runtime = {n: "*fp32" for n in ("Y_ptr", "Norms_ptr", "Value_ptr", "Midpoints_ptr")}
        runtime |= {"KV_cache_ptr": "*u8", "Slot_mapping_ptr": "*i64"}
        consts = {**strides, **common, "MSE_BYTES": lay["mse_bytes"], "KPS": lay["kps"], **value,
                  "MSE_BITS": lay["mse_bits"], "N_CENTROIDS": 2 ** lay["mse_bits"], "BLOCK_GRP": lay["block_grp"]}  # fmt: skip
        store = CompileJob("_tq_fused_store_mse", "store", STORE_FILE, STORE_MSE_ARGS,
                           _signature(STORE_MSE_ARGS, runtime), consts, cap, 4, 1)  # fmt: skip

    tq = {"MSE_BYTES": lay["mse_bytes"], "KPS": lay["kps"], "VQB": lay["vqb"], "VAL_DATA_BYTES": lay["val_bytes"],
          "MSE_BITS": lay["mse_bits"], "KEY_FP8": lay["key_fp8"], "BLOCK_D": lay["block_d"],
          "NORM_CORRECTION": lay["norm_correction"], "FP8_E4B15": e4b15}  # fmt: skip
    # fp8 keys: the launcher passes the query as is (model dtype); MSE keys: a float32 rotated query
    q_dtype = f"*{dtype}" if lay["key_fp8"] else "*fp32"
    runtime = {"Q_rot_ptr": q_dtype, "KV_cache_ptr": "*u8", "Block_table_ptr": "*i32", "Seq_lens_ptr": "*i32",
               "Centroids_ptr": "*fp32", "Mid_o_ptr": "*fp32"}  # fmt: skip
    runtime |= {n: "i32" for n in DECODE_STAGE1_ARGS if n.startswith("stride_")}
    consts = {"NUM_KV_HEADS": num_kv_heads, "HEAD_DIM": head_dim, "BLOCK_SIZE": block_size,
              "NUM_KV_SPLITS": NUM_KV_SPLITS, "KV_GROUP_SIZE": KV_GROUP_SIZE, **tq,
              "ATTN_SCALE": 1.0 / math.sqrt(head_dim), "BLOCK_KV": 4}  # fmt: skip
    stage1 = CompileJob("_tq_decode_stage1", "decode", DECODE_FILE, DECODE_STAGE1_ARGS,
                        _signature(DECODE_STAGE1_ARGS, runtime), consts, cap, 1, 1)  # fmt: skip

    runtime = {"KV_cache_ptr": "*u8", "Block_table_ptr": "*i32", "Centroids_ptr": "*fp32",
               "K_out_ptr": "*fp16", "V_out_ptr": "*fp16"}  # fmt: skip
    runtime |= {n: "i32" for n in FULL_DEQUANT_ARGS if n.startswith("stride_")}
    consts = {"HEAD_DIM": head_dim, "BLOCK_SIZE": block_size, "NUM_KV_HEADS": num_kv_heads, **tq}
    dequant = CompileJob("_tq_full_dequant_kv", "decode", DECODE_FILE, FULL_DEQUANT_ARGS,
                         _signature(FULL_DEQUANT_ARGS, runtime), consts, cap, 4, None)  # fmt: skip
    return [store, stage1, dequant]


def probe_format(kv_cache_dtype: str, capability: tuple[int, int]) -> str | None:
    """fp8 format vLLM would write for this kv dtype on this GPU; None when it writes no fp8."""
    if kv_cache_dtype == "turboquant_k8v4":
        return "fp8e4b15" if fp8_e4b15_flag(capability) else "fp8e4nv"
    if kv_cache_dtype in TURBOQUANT_PRESETS:
        return None
    return PROBE_FP8_FORMATS[kv_cache_dtype]


def plan_probe(kv_cache_dtype: str, dtype: str, head_dim: int, capability: tuple[int, int],
               vllm_version: str | None = None) -> list[CompileJob]:  # fmt: skip
    """kvdoctor's own probe kernel: model-dtype values converted to the fp8 format vLLM would pick,
    widened to float32 first where the judged vLLM release does so."""
    fmt = probe_format(kv_cache_dtype, capability)
    code = {None: 0, "fp8e4b15": 1, "fp8e4nv": 2, "fp8e5": 3}[fmt]
    runtime = {"In_ptr": f"*{dtype}", "Out_ptr": "*u8"}
    k8v4 = kv_cache_dtype == "turboquant_k8v4"
    widen = int(k8v4 and launches_since("turboquant_k8v4_keys_widened", release_numbers(vllm_version)))
    consts = {"BLOCK": next_pow2(head_dim), "FP8_FORMAT": code, "WIDEN_FIRST": widen}
    sig = _signature(PROBE_ARGS, runtime)
    return [CompileJob(PROBE_KERNEL, "probe", PROBE_FILE, PROBE_ARGS, sig, consts, tuple(capability), 4, 1)]

