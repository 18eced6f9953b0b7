import json
import struct

import pytest

from kvdoctor.matrix.capacity import GIB, ModelShape, capacity, kv_bytes_per_token, turboquant_slot_bytes
from kvdoctor.matrix.weights import weights_size

QWEN_3B = ModelShape(num_layers=36, num_kv_heads=2, head_dim=128, dtype="bfloat16")


@pytest.mark.parametrize(
    "preset, slot",
    # KPS + ceil(D*VQB/8) + 4, rounded up to even, for D=128
    [("turboquant_k8v4", 128 + 64 + 4), ("turboquant_4bit_nc", 66 + 64 + 4), ("turboquant_k3v4_nc", 50 + 64 + 4),
     ("turboquant_3bit_nc", 50 + 48 + 4)],
)
def test_turboquant_slot_sizes(preset, slot):
    assert turboquant_slot_bytes(preset, 128) == slot


def test_odd_slot_rounds_up_to_even():
    # D=72, 3-bit keys + 4-bit values: KPS = 27 + 2 = 29, values 36, + 4 = 69 -> 70
    assert turboquant_slot_bytes("turboquant_k3v4_nc", 72) == 70
    assert turboquant_slot_bytes("turboquant_3bit_nc", 74) == 62  # 30 + 28 + 4, already even


def test_bytes_per_token_by_dtype():
    assert kv_bytes_per_token(QWEN_3B, "auto") == 36 * 2 * 2 * 128 * 2
    assert kv_bytes_per_token(QWEN_3B, "fp8") == 36 * 2 * 2 * 128
    assert kv_bytes_per_token(QWEN_3B, "nvfp4") == 36 * 2 * 2 * (64 + 8)
    # 32 TurboQuant layers + 4 native bf16 layers
    assert kv_bytes_per_token(QWEN_3B, "turboquant_k8v4") == 32 * 2 * 196 + 4 * 2 * 2 * 128 * 2
    assert kv_bytes_per_token(QWEN_3B, "octave_k3v4") is None
    ordered = ["auto", "fp8", "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc"]
    sizes = [kv_bytes_per_token(QWEN_3B, d) for d in ordered]
    assert sizes[1:] == sorted(sizes[1:], reverse=True) and sizes[0] == max(sizes)


def test_tokens_that_fit_after_weights():
    cap = capacity(QWEN_3B, "fp8", gpu_memory_gib=80, weights_bytes=6 * GIB, gpu_memory_utilization=0.9,
                   max_model_len=32768)  # fmt: skip
    expected = int((72 * GIB - 6 * GIB) // 18432) // 16 * 16
    assert cap.tokens == expected and cap.max_concurrent_seqs == pytest.approx(expected / 32768)
    too_small = capacity(QWEN_3B, "fp8", gpu_memory_gib=7, weights_bytes=8 * GIB)
    assert too_small.tokens == 0 and too_small.free_bytes < 0
    tp2 = capacity(ModelShape(36, 8, 128, "bfloat16"), "auto", 80, 6 * GIB, tensor_parallel_size=2)
    assert tp2.kv_bytes_per_token == 36 * 2 * 4 * 128 * 2


def _safetensors(path, tensors):
    header, offset = {}, 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)  # header only: sizes are read, tensors never


def test_weights_from_index_then_headers_then_config(tmp_path, request):
    from pathlib import Path

    config = Path(request.fspath).parents[2] / "examples" / "qwen2.5-3b-instruct" / "config.json"
    estimate = weights_size(config, tmp_path, "bfloat16")
    assert "config.json" in estimate.source and 3.0e9 * 2 < estimate.bytes < 3.2e9 * 2  # Qwen2.5-3B: 3.09B params
    _safetensors(tmp_path / "model-00001-of-00002.safetensors", {"a": ("BF16", [1024, 1024], 2 * 1024 * 1024)})
    _safetensors(tmp_path / "model-00002-of-00002.safetensors", {"b": ("BF16", [512], 1024)})
    headers = weights_size(config, tmp_path, "bfloat16")
    assert headers.bytes == 2 * 1024 * 1024 + 1024 and "2 files" in headers.source
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 6171877376}}))
    assert weights_size(config, tmp_path, "bfloat16").bytes == 6171877376
