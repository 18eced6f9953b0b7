"""Which kernel vLLM runs quantized experts and dense FP4 layers with on a GPU, as each release's own selection code
answered with the capability stubbed (kvdoctor/data/vllm_pack/quantization/moe_backends.json.gz, built by
kvdoctor.builders.vllm_pack.quantization_moe; docs/quantization.md).

A MoE checkpoint's experts (fp8, mxfp4, modelopt NVFP4) go through the release's fused-MoE oracle
(select_fp8_moe_backend, select_mxfp4_moe_backend, select_nvfp4_moe_backend): it picks a backend or raises "No ... MoE
backend supports the deployment configuration." A modelopt NVFP4 linear layer goes through init_nvfp4_linear_kernel.
Marlin, Humming (weight-only W4A16/W8A16 kernels) and emulation are the slow paths: the checkpoint loads, but its
matmuls do not use the FP8/FP4 tensor-core path it was made for.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from kvdoctor.vllm_pack.store import read_pack_file

FILE = "quantization/moe_backends.json"
# What a slow path changes, by the backend / kernel name's family (vLLM's own names: Fp8MoeBackend.MARLIN,
# MarlinNvFp4LinearKernel, HummingMxFp4LinearKernel, NvFp4MoeBackend.EMULATION, ...).
SLOW_PATHS = {
    "EMULATION": "emulated: vLLM dequantizes the {fmt} weights and runs the matmul in bf16 (a Triton emulation "
                 "kernel), far slower than a native {fmt} kernel",
    "MARLIN": "weight-only: Marlin keeps the {fmt} weights in memory and dequantizes them to bf16 inside its GEMM; "
              "activations are not quantized (no {fmt} tensor-core math), so throughput is lower than on a GPU "
              "with the native path",
    "HUMMING": "weight-only: the Humming kernels dequantize the {fmt} weights to bf16 inside their GEMM; "
               "activations are not quantized, so throughput is lower than on a GPU with the native path",
}
# The exception types vLLM's selection raises to refuse (others are the child's own failures: not an answer).
REFUSALS = ("NotImplementedError", "ValueError")
FORMATS = {"fp8_block": "FP8", "fp8_tensor": "FP8", "mxfp4": "MXFP4", "nvfp4": "NVFP4", "ct_fp8_channel": "FP8",
           "ct_fp8_block": "FP8"}


@dataclass(frozen=True)
class BackendAnswer:
    """One release's kernel choice for one kind of layer on one capability."""

    version: str
    part: str
    """'moe' (the experts) or 'dense' (linear layers)."""
    kind: str
    """'fp8_block', 'fp8_tensor', 'mxfp4' or 'nvfp4'."""
    backend: str | None
    """vLLM's backend (Fp8MoeBackend value) or kernel class name; None when it refuses."""
    error: str | None
    """vLLM's refusal, word for word (as the child recorded it, cut at 300 characters)."""
    where: str
    """The selection function (and its refusal) file:line in that release."""

    @property
    def slow(self) -> str | None:
        """SLOW_PATHS' family key when the choice is a slow path, else None."""
        name = (self.backend or "").upper()
        return next((key for key in SLOW_PATHS if key in name), None)

    def what_changes(self) -> str:
        key = self.slow
        return SLOW_PATHS[key].format(fmt=FORMATS[self.kind]) if key else "none"


@lru_cache(maxsize=1)
def _answers() -> dict:
    return read_pack_file(FILE) or {"releases": {}}


def asked_releases() -> tuple[str, ...]:
    """The releases whose own selection code was asked (their wheels were at hand when the pack was built)."""
    return tuple(_answers()["releases"])


def moe_kind(method: str | None, quant_config: dict, model_type: str | None) -> str | None:
    """The MOE_CASES kind whose oracle call matches this checkpoint's experts, or None when none was asked:
    fp8 with weight_block_size (Fp8MoEMethod's block keys), fp8 with dynamic activations (per-tensor keys),
    gpt-oss's mxfp4 (Mxfp4MoEMethod), ModelOpt NVFP4 (ModelOptNvFp4FusedMoE)."""
    if method == "fp8":
        if quant_config.get("weight_block_size"):
            return "fp8_block"
        return "fp8_tensor" if quant_config.get("activation_scheme", "dynamic") == "dynamic" else None
    if method in ("mxfp4", "gpt_oss_mxfp4"):  # gpt_oss_mxfp4: GptOssMxfp4Config, vLLM's name for gpt-oss's mxfp4
        return "mxfp4" if model_type == "gpt_oss" else None  # the child's layer is gpt-oss's (SwiGLU-OAI, biases)
    if method == "modelopt_fp4":
        return "nvfp4"
    if method == "compressed-tensors":
        return _ct_fp8_kind(quant_config)
    if method == "modelopt_mixed":  # every experts entry NVFP4 (W4A4): ModelOptNvFp4FusedMoE with the NVFP4 config
        from kvdoctor.vllm_pack.quantization_mixed import expert_algos

        return "nvfp4" if expert_algos(quant_config) == {"NVFP4"} else None
    return None


def _ct_fp8_kind(quant_config: dict) -> str | None:
    """The compressed-tensors FP8 experts the pack asked (CompressedTensorsW8A8Fp8MoEMethod's oracle keys): one config
    group targeting Linear layers, 8-bit float weights, either per-channel weights with dynamic per-token activations
    (FP8-dynamic) or 128x128 block weights with dynamic group-128 activations; anything else None (not asked)."""
    groups = [g for g in (quant_config.get("config_groups") or {}).values() if isinstance(g, dict)]
    if len(groups) != 1 or "Linear" not in (groups[0].get("targets") or []):
        return None
    weights, acts = groups[0].get("weights") or {}, groups[0].get("input_activations") or {}
    fp8 = lambda q: q.get("num_bits") == 8 and q.get("type") == "float"  # noqa: E731
    if not (fp8(weights) and fp8(acts) and acts.get("dynamic") is True):
        return None
    if weights.get("strategy") == "channel" and acts.get("strategy") == "token":
        return "ct_fp8_channel"
    if weights.get("strategy") == "block" and weights.get("block_structure") == [128, 128] \
            and acts.get("strategy") == "group" and acts.get("group_size") == 128:
        return "ct_fp8_block"
    return None


def dense_kind(method: str | None, quant_config: dict | None = None) -> str | None:
    """The DENSE_CASES kind of this checkpoint's linear layers, where the pack asked one (ModelOpt NVFP4; a ModelOpt
    MIXED_PRECISION checkpoint with NVFP4 (W4A4) linear entries: ModelOptMixedPrecisionConfig builds them with the
    NVFP4 linear method, whose kernel the pack asked)."""
    if method == "modelopt_mixed" and quant_config:
        from kvdoctor.vllm_pack.quantization_mixed import linear_algos

        return "nvfp4" if "NVFP4" in linear_algos(quant_config) else None
    return "nvfp4" if method == "modelopt_fp4" else None


def dense_method_kind(method: str | None, is_moe: bool) -> str | None:
    """'mxfp4_method' for a dense model's linear layers under vLLM's mxfp4 method (Mxfp4Config.get_quant_method,
    asked of every release), else None. A MoE model's linear layers are left out: gpt-oss checkpoints keep them
    unquantized (modules_to_not_convert), and its experts are judged by moe_kind."""
    return "mxfp4_method" if method == "mxfp4" and not is_moe else None


def backend_answer(version: str, part: str, kind: str, capability: int,
                   requested: str = "auto") -> BackendAnswer | None:
    """The release's answer for this capability (75 for SM 7.5) and --moe-backend value (experts only), or None
    when it was not asked (a release without the oracle or that flag value, a capability not in the grid)."""
    release = _answers()["releases"].get(version)
    if release is None:
        return None
    by_sm = release.get(part, {}).get(kind)
    if not isinstance(by_sm, dict) or not isinstance(by_sm.get(str(capability)), dict):
        return None
    answer = by_sm[str(capability)]
    if part == "moe":
        answer = answer.get(requested)
    if not isinstance(answer, dict) or "error" in answer and answer.get("type") not in REFUSALS:
        return None  # the child's stand-in failed (not vLLM's refusal): not asked
    where = release.get("where", {}).get(f"{part}:{kind}", {})
    at = where.get("refusal") if "error" in answer and where.get("refusal") else where.get("select")
    return BackendAnswer(version, part, kind, answer.get("backend") or answer.get("kernel"), answer.get("error"),
                         (at or "?").removeprefix("vllm/model_executor/"))  # fmt: skip


def native_capabilities(version: str, part: str, kind: str, requested: str = "auto") -> list[int]:
    """The asked capabilities on which the release picks a backend that is neither refused nor a slow path."""
    out = []
    for sm in _answers()["releases"].get(version, {}).get(part, {}).get(kind, {}) or {}:
        if sm.isdigit() and (a := backend_answer(version, part, kind, int(sm), requested)) and a.backend \
                and not a.slow:
            out.append(int(sm))
    return sorted(out)
