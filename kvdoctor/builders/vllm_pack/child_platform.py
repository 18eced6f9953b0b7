"""The stubbed CUDA platform the pack builder's child asks vLLM through: `current_platform` becomes a CUDA platform
whose device reports the capability being asked (switched per target through `capability_now`), with no GPU."""
from __future__ import annotations

import sys


def install_platform(capability: tuple[int, int]):
    """Make vLLM's current_platform a CUDA platform whose device reports `capability` (no GPU needed)."""
    try:
        import vllm.platforms as platforms
    except ModuleNotFoundError as missing:
        if missing.name != "vllm.platforms":
            raise
        return _no_platform_layer(capability)
    import vllm.platforms.cuda as cuda
    import vllm.platforms.interface as interface

    base = getattr(cuda, "CudaPlatformBase", None) or cuda.CudaPlatform  # before 0.6.4: one CudaPlatform
    # before 0.6: the capability is a plain (major, minor) tuple
    capability_type = getattr(interface, "DeviceCapability", None) or (lambda *parts: tuple(parts))

    class StubCudaPlatform(base):
        capability_now = tuple(capability)

        @classmethod
        def get_device_capability(cls, device_id: int = 0):
            return capability_type(*cls.capability_now)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return "{device_name}"

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return 80 << 30

        @classmethod
        def is_fully_connected(cls, physical_device_ids) -> bool:
            return True

        @classmethod
        def device_count(cls) -> int:
            return 1

    stub = StubCudaPlatform()
    if "__getattr__" not in vars(platforms):  # before 0.7: a plain attribute, bound by name at each module's import
        _rebind_eager_platform(platforms.current_platform, stub)
    platforms._current_platform = stub
    return StubCudaPlatform


def _rebind_eager_platform(old, stub) -> None:
    """Releases before 0.7 pick `current_platform` once at import (no GPU here: an unspecified platform) and every
    module imports it by name: each vLLM module already holding the old object holds the stub instead."""
    for name, module in list(sys.modules.items()):
        if (name == "vllm" or name.startswith("vllm.")) and getattr(module, "current_platform", None) is old:
            module.current_platform = stub


def _no_platform_layer(capability: tuple[int, int]):
    """Before 0.5 vLLM asks torch.cuda itself (no vllm.platforms): torch.cuda's stubbed capability query reads the
    holder this returns (child_stubs.CAPABILITY_HOLDER), and the device name is a placeholder, as with a platform."""
    import torch

    from kvdoctor.builders.vllm_pack import child_stubs

    class CapabilityHolder:
        capability_now = tuple(capability)

    child_stubs.CAPABILITY_HOLDER = CapabilityHolder()
    torch.cuda.get_device_name = lambda *args, **kwargs: "{device_name}"
    return CapabilityHolder
