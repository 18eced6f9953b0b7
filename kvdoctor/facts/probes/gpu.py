"""Probe the local GPUs through NVML, cross-checked and backed up by torch.cuda.

Never decides anything: it reports what it saw, including why it saw nothing.
"""

from __future__ import annotations

import importlib.util
import sys

from kvdoctor.model.facts import GpuDevice, GpuFacts


def probe_gpu(cross_check: bool = False) -> GpuFacts:
    """GpuFacts for this machine; source 'none' with notes when no GPU can be read.

    cross_check also asks torch.cuda (importing torch costs ~4 s on a GPU machine, so it is opt-in)."""
    nvml = _probe_nvml()
    if nvml.devices:
        if cross_check:
            return _cross_check(nvml)
        return nvml
    if nvml.notes and _NO_DRIVER in nvml.notes[0]:
        # No NVIDIA driver at all: torch.cuda would fail the same way, and importing torch costs seconds.
        return nvml
    torch_facts = _probe_torch()
    if torch_facts.devices:
        return GpuFacts("torch", torch_facts.devices, notes=nvml.notes + torch_facts.notes)
    return GpuFacts("none", notes=nvml.notes + torch_facts.notes)


_NO_DRIVER = "library not found (no NVIDIA driver on this machine)"


def _probe_nvml() -> GpuFacts:
    if not _nvml_library_loads():
        return GpuFacts("none", notes=(f"NVML: {_NO_DRIVER}",))
    try:
        import pynvml
    except ImportError:
        return GpuFacts("none", notes=("NVML: nvidia-ml-py is not installed",))
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return GpuFacts("none", notes=(f"NVML: {_nvml_reason(pynvml, exc)}",))
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else name
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30
            devices.append(GpuDevice(name, (int(major), int(minor)), round(memory, 1)))
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        return GpuFacts(
            "nvml",
            tuple(devices),
            driver_version=driver,
            cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}",
        )
    except pynvml.NVMLError as exc:
        return GpuFacts("none", notes=(f"NVML: {_nvml_reason(pynvml, exc)}",))
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _nvml_library_loads() -> bool:
    """Whether the library pynvml would load is there (Linux: the same dlopen pynvml does).

    Importing pynvml costs ~15-50 ms; on a machine without the driver this answers in ~3 ms."""
    if not sys.platform.startswith("linux"):
        return True  # pynvml's own search (Windows paths) decides
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def _nvml_reason(pynvml, exc: Exception) -> str:
    if isinstance(exc, pynvml.NVMLError_LibraryNotFound):
        return _NO_DRIVER
    if isinstance(exc, getattr(pynvml, "NVMLError_DriverNotLoaded", ())):
        return "driver not loaded"
    return str(exc) or type(exc).__name__


def _probe_torch() -> GpuFacts:
    if importlib.util.find_spec("torch") is None:
        return GpuFacts("none", notes=("torch: not installed",))
    try:
        import torch

        if not torch.cuda.is_available():
            return GpuFacts("none", notes=(f"torch {torch.__version__}: CUDA not available",))
        devices = []
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            devices.append(
                GpuDevice(props.name, (props.major, props.minor), round(props.total_memory / 2**30, 1))
            )
        return GpuFacts("torch", tuple(devices))
    except Exception as exc:  # torch raises many types for a broken CUDA setup; report, never crash
        return GpuFacts("none", notes=(f"torch: {type(exc).__name__}: {exc}",))


def _cross_check(nvml: GpuFacts) -> GpuFacts:
    """Note where torch.cuda disagrees with NVML (CUDA_VISIBLE_DEVICES, a broken CUDA install)."""
    torch_facts = _probe_torch()
    if not torch_facts.devices:
        note = "torch cross-check skipped: " + "; ".join(torch_facts.notes)
    else:
        nvml_view = [(d.name, d.capability) for d in nvml.devices]
        torch_view = [(d.name, d.capability) for d in torch_facts.devices]
        if nvml_view == torch_view:
            note = f"torch.cuda agrees with NVML ({len(torch_view)} GPU(s))"
        else:
            note = f"torch.cuda sees {torch_view}, NVML sees {nvml_view} (CUDA_VISIBLE_DEVICES?)"
    return GpuFacts(
        nvml.source, nvml.devices, nvml.driver_version, nvml.cuda_driver_version, nvml.notes + (note,)
    )
