"""The stubbed CUDA platform the pack builder's child asks vLLM through: `current_platform` becomes a CUDA platform
whose device reports the capability being asked (switched per target through `capability_now`), with no GPU."""
from __future__ import annotations


def install_platform(capability: tuple[int, int]):
    """Make vLLM's current_platform a CUDA platform whose device reports `capability` (no GPU needed)."""
    import vllm.platforms as platforms
    from vllm.platforms.cuda import CudaPlatformBase
    from vllm.platforms.interface import DeviceCapability

    class StubCudaPlatform(CudaPlatformBase):
        capability_now = tuple(capability)

        @classmethod
        def get_device_capability(cls, device_id: int = 0):
            return DeviceCapability(*cls.capability_now)

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

    platforms._current_platform = StubCudaPlatform()
    return StubCudaPlatform
