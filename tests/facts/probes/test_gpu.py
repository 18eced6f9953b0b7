from __future__ import annotations

import sys
import types

import pytest

from kvdoctor.base.errors import GpuTargetError
from kvdoctor.model.facts import GpuDevice, GpuFacts
from kvdoctor.facts.probes import gpu as gpu_probe
from kvdoctor.data.gpus import gpu_table, resolve_gpu_target

REQUIRED = ["V100", "T4", "A100-40GB", "A100-80GB", "A10", "A10G", "A30", "A40", "L4", "L40S", "RTX 3090",
            "RTX 4090", "RTX 5090", "RTX A6000", "H100", "H200", "GH200", "B200", "GB200",
            "RTX PRO 6000 Blackwell", "GB10", "Jetson Orin"]


@pytest.mark.parametrize("name", REQUIRED)
def test_issue_gpu_list_resolves(name):
    device = resolve_gpu_target(name)
    assert device.capability is not None and device.memory_gib


@pytest.mark.parametrize(
    "text, capability",
    [("A100", (8, 0)), ("nvidia a100-sxm4-80gb", (8, 0)), ("NVIDIA GeForce RTX 4090", (8, 9)), ("L4", (8, 9)),
     ("h100", (9, 0)), ("B200", (10, 0)), ("GB10", (12, 1)), ("Orin", (8, 7)), ("T4", (7, 5)),
     ("sm_80", (8, 0)), ("sm89", (8, 9)), ("8.6", (8, 6)), ("sm_120", (12, 0)), ("sm_90a", (9, 0))],
)
def test_names_and_capabilities(text, capability):
    assert resolve_gpu_target(text).capability == capability


def test_unknown_gpu_suggests_close_names():
    with pytest.raises(GpuTargetError) as error:
        resolve_gpu_target("A1000")
    assert "unknown GPU 'A1000'" in error.value.one_line() and "did you mean" in error.value.one_line()
    with pytest.raises(GpuTargetError, match="not a CUDA GPU"):
        resolve_gpu_target("sm_20")


def test_weakest_gpu_decides_and_mixed_is_reported():
    facts = GpuFacts("nvml", (GpuDevice("H100", (9, 0), 80), GpuDevice("A100", (8, 0), 80)))
    assert facts.weakest.name == "A100" and facts.mixed


@pytest.fixture
def driver_present(monkeypatch):
    """The NVIDIA driver's library loads, so the probe asks pynvml (here a fake)."""
    monkeypatch.setattr(gpu_probe, "_nvml_library_loads", lambda: True)


def test_no_driver_library_answers_without_importing_pynvml(monkeypatch):
    monkeypatch.setattr(gpu_probe, "_nvml_library_loads", lambda: False)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # importing it would fail with another note
    monkeypatch.setattr(gpu_probe, "_probe_torch", lambda: pytest.fail("torch must not be imported without a driver"))
    facts = gpu_probe.probe_gpu()
    assert facts.source == "none" and facts.notes == ("NVML: library not found (no NVIDIA driver on this machine)",)


def test_driver_library_check_is_the_dlopen_pynvml_does(monkeypatch):
    import ctypes

    opened = []

    def fake_cdll(name):
        opened.append(name)
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", fake_cdll)
    monkeypatch.setattr(gpu_probe.sys, "platform", "linux")
    assert gpu_probe._nvml_library_loads() is False and opened == ["libnvidia-ml.so.1"]
    monkeypatch.setattr(ctypes, "CDLL", lambda name: object())
    assert gpu_probe._nvml_library_loads() is True


def _fake_pynvml(devices, error=None):
    module = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    class NVMLError_LibraryNotFound(NVMLError):
        pass

    module.NVMLError = NVMLError
    module.NVMLError_LibraryNotFound = NVMLError_LibraryNotFound

    def init():
        if error:
            raise {"missing": NVMLError_LibraryNotFound, "mismatch": NVMLError}[error]("Driver/library version mismatch")

    module.nvmlInit = init
    module.nvmlShutdown = lambda: None
    module.nvmlDeviceGetCount = lambda: len(devices)
    module.nvmlDeviceGetHandleByIndex = lambda i: i
    module.nvmlDeviceGetName = lambda h: devices[h][0]
    module.nvmlDeviceGetCudaComputeCapability = lambda h: devices[h][1]
    module.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=devices[h][2] * 2**30)
    module.nvmlSystemGetDriverVersion = lambda: "570.86.15"
    module.nvmlSystemGetCudaDriverVersion_v2 = lambda: 12080
    return module


def test_nvml_probe_reads_every_gpu(monkeypatch, driver_present):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml([("NVIDIA H200", (9, 0), 140.4), ("NVIDIA A10", (8, 6), 24)]))
    facts = gpu_probe.probe_gpu(cross_check=False)
    assert facts.source == "nvml" and facts.driver_version == "570.86.15" and facts.cuda_driver_version == "12.8"
    assert [d.capability for d in facts.devices] == [(9, 0), (8, 6)]
    assert facts.weakest.name == "NVIDIA A10"


def test_missing_nvml_library_skips_torch(monkeypatch, driver_present):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml([], error="missing"))
    monkeypatch.setattr(gpu_probe, "_probe_torch", lambda: pytest.fail("torch must not be imported without a driver"))
    facts = gpu_probe.probe_gpu()
    assert facts.source == "none" and "library not found" in facts.notes[0]


def test_nvml_error_falls_back_to_torch(monkeypatch, driver_present):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml([], error="mismatch"))
    monkeypatch.setattr(gpu_probe, "_probe_torch", lambda: GpuFacts("torch", (GpuDevice("NVIDIA L4", (8, 9), 22),)))
    facts = gpu_probe.probe_gpu()
    assert facts.source == "torch" and facts.devices[0].capability == (8, 9)
    assert "mismatch" in facts.notes[0]


def test_cross_check_notes_disagreement(monkeypatch, driver_present):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml([("NVIDIA H200", (9, 0), 140.4)] * 2))
    monkeypatch.setattr(gpu_probe, "_probe_torch", lambda: GpuFacts("torch", (GpuDevice("NVIDIA H200", (9, 0), 140.4),)))
    facts = gpu_probe.probe_gpu(cross_check=True)
    assert "torch.cuda sees" in facts.notes[-1]


def test_torch_without_cuda_is_reported():
    facts = gpu_probe._probe_torch()
    if facts.devices:
        pytest.skip("this machine has a CUDA GPU")
    assert facts.source == "none" and facts.notes


def test_gpu_table_has_no_duplicate_aliases_pointing_elsewhere():
    assert len({device.name for device in gpu_table().values()}) >= 30
