"""Stand-ins for what the pack builder's CPU-only child lacks: the wheel's compiled extensions, its hard GPU
dependencies (served as permissive stand-in modules), CUDA tensors created at import time (put on the meta device),
torch.cuda's capability queries (answered with the capability being asked), and, for releases before 0.20, the
compiled op namespaces their modules call at import time."""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types


class Anything:
    """A permissive stand-in object: any attribute, call, index or iteration gives another stand-in."""

    def __init__(self, name="stub"):
        self._name = name

    def __getattr__(self, item):
        if item.startswith("__") and item.endswith("__"):
            raise AttributeError(item)
        return Anything(f"{self._name}.{item}")

    def __call__(self, *a, **k):
        return Anything(self._name + "()")

    def __getitem__(self, item):
        return Anything(self._name + "[]")

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __mro_entries__(self, bases):
        return (object,)

    def __or__(self, other):
        return self

    __ror__ = __or__

    def __eq__(self, other):
        return False

    def __hash__(self):
        return id(self)


class _StubModule(types.ModuleType):
    def __getattr__(self, item):
        if item.startswith("__") and item.endswith("__"):
            raise AttributeError(item)
        return Anything(f"{self.__name__}.{item}")


def stand_in_module(name: str) -> types.ModuleType:
    """A module whose every attribute is a permissive stand-in."""
    return _StubModule(name)


class _StubLoader(importlib.abc.Loader):
    def __init__(self, version):
        self.version = version

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []  # a package, so submodules resolve through the finder too
        module.__version__ = self.version
        return module

    def exec_module(self, module):
        pass


class StubFinder(importlib.abc.MetaPathFinder):
    """Serves stand-in modules for compiled vLLM extensions the wheel ships and for modelled dependencies."""

    def __init__(self, exact: set[str], roots: dict[str, str]):
        self.exact = exact
        self.roots = roots  # top-level package -> version string

    def find_spec(self, fullname, path=None, target=None):
        root = fullname.split(".")[0]
        if fullname in self.exact:
            return importlib.machinery.ModuleSpec(fullname, _StubLoader("0"), is_package=True)
        if root in self.roots:
            return importlib.machinery.ModuleSpec(fullname, _StubLoader(self.roots[root]), is_package=True)
        return None


def cuda_tensors_on_meta(default_capability: tuple[int, int]):
    """Module-level `torch.empty(..., device="cuda")` (a workspace buffer) lands on the meta device instead, and
    torch.cuda's capability queries answer the capability the stubbed platform reports now."""
    import functools

    import torch

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            device = kwargs.get("device")
            if device is not None and str(device).startswith("cuda"):
                kwargs["device"] = "meta"
            return fn(*args, **kwargs)

        return inner

    for name in ("empty", "zeros", "ones", "full", "tensor", "arange", "randn", "rand", "empty_strided"):
        setattr(torch, name, wrap(getattr(torch, name)))
    torch.cuda.current_device = lambda: 0

    class _Props:  # what code reads of device 0; its capability is the one the platform reports right now
        multi_processor_count, total_memory, name = 132, 80 << 30, "{device_name}"

        @property
        def major(self):
            return _capability_now(default_capability)[0]

        @property
        def minor(self):
            return _capability_now(default_capability)[1]

    torch.cuda.get_device_properties = lambda *a, **k: _Props()
    torch.cuda.get_device_capability = lambda *a, **k: _capability_now(default_capability)


CAPABILITY_HOLDER = None
"""Before 0.5 (no vllm.platforms): what holds the capability being asked (child_platform._no_platform_layer)."""


def _capability_now(default_capability: tuple[int, int]) -> tuple[int, int]:
    """The capability the stubbed platform reports now (install_platform; the tasks switch it per target)."""
    platform = sys.modules.get("vllm.platforms")
    current = getattr(platform, "_current_platform", None) if platform else CAPABILITY_HOLDER
    return tuple(getattr(type(current), "capability_now", default_capability))


def legacy_ops():
    """Releases before 0.20 call compiled ops at import time (`torch.ops._C.cutlass_scaled_mm_supports_fp8`):
    their op namespaces become stand-ins (falsy answers), so the modules import."""
    import torch

    for name in ("_C", "_C_cache_ops", "_C_custom_ar", "_moe_C", "_rocm_C", "_vllm_fa2_C", "_vllm_fa3_C",
                 "_flashmla_C", "_flashmla_extension_C", "_qutlass_C"):
        setattr(torch.ops, name, Anything(f"torch.ops.{name}"))
    for name in ("register_fake", "impl_abstract"):  # fake kernels for ops that do not exist here: skipped
        original = getattr(torch.library, name, None)
        if original is not None:
            setattr(torch.library, name, _tolerant(original))
    _config_names_shared()
    _triton_cache_dirs()


def nvml_without_devices() -> None:
    """Releases before 0.7 call NVML at import time (vllm/platforms/cuda.py's `warn_if_different_devices`, the
    platform's detection) and this builder has no driver: NVML answers as a driver with no device would (the
    stubbed platform, install_platform, then reports the capability asked)."""
    import pynvml

    pynvml.nvmlInit = lambda *args, **kwargs: None
    pynvml.nvmlShutdown = lambda: None
    pynvml.nvmlDeviceGetCount = lambda: 0


def _triton_cache_dirs():
    """0.7 imports triton's `default_cache_dir` / `default_dump_dir` / `default_override_dir` (its custom cache
    manager), which the builder's newer Triton no longer has: stand-ins naming a folder, never used to compile."""
    try:
        import triton.runtime.cache as cache
    except ImportError:
        return
    for name in ("default_cache_dir", "default_dump_dir", "default_override_dir"):
        if not hasattr(cache, name):
            setattr(cache, name, lambda name=name: os.path.join(os.path.expanduser("~"), ".triton", name))


def _config_names_shared():
    """0.9 registers its own config classes under names a newer transformers (the builder's) already uses
    ('aimv2'); with the transformers the release pins the name was free, so the release's own class takes it."""
    try:
        from transformers import AutoConfig
    except ImportError:
        return
    register = AutoConfig.register

    def register_over(model_type, config, exist_ok=False):
        return register(model_type, config, exist_ok=True)

    AutoConfig.register = register_over


def _tolerant(register):
    def wrapper(*args, **kwargs):
        try:
            decorator = register(*args, **kwargs)
        except RuntimeError:
            return lambda fn=None, *a, **k: fn
        def apply(fn=None, *a, **k):
            try:
                return decorator(fn, *a, **k)
            except RuntimeError:
                return fn
        return apply

    return wrapper


MODELLED_FLASHINFER_MODULE = "vllm.utils.flashinfer"
"""Where vLLM asks whether FlashInfer's TRT-LLM cubins are reachable (`has_nvidia_artifactory`: flashinfer-cubin
installed, else an HTTP request to NVIDIA's artifactory) and whether FlashInfer's JIT toolchain is on PATH."""


class _ModelledWhich:
    """`shutil` as vllm/utils/flashinfer.py sees it: nvcc and ninja (FlashInfer's JIT toolchain) are found, as the
    modelled FlashInfer needs; everything else is the real shutil."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, item):
        return getattr(self._real, item)

    def which(self, name, *args, **kwargs):
        base = os.path.basename(str(name))
        if base in ("nvcc", "ninja"):
            return "/usr/local/cuda/bin/nvcc" if base == "nvcc" else "/usr/bin/ninja"
        return self._real.which(name, *args, **kwargs)


def _model_flashinfer_module(module: types.ModuleType, cubin_present: bool) -> None:
    """The stated modelled input answers vLLM's reachability probe, never the network."""

    def has_nvidia_artifactory() -> bool:  # modelled: the builder's stated flashinfer-cubin value
        return cubin_present

    module.has_nvidia_artifactory = has_nvidia_artifactory
    if hasattr(module, "_flashinfer_nvcc_path"):
        module._flashinfer_nvcc_path = lambda: "/usr/local/cuda/bin/nvcc"
    if isinstance(getattr(module, "shutil", None), types.ModuleType):
        module.shutil = _ModelledWhich(module.shutil)


class _PatchAfterExec(importlib.abc.Loader):
    def __init__(self, loader, patch):
        self.loader, self.patch = loader, patch

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.patch(module)

    def __getattr__(self, item):  # get_source / get_filename / ... (inspect reads them for file:line)
        return getattr(self.loader, item)


class ModelledInputsFinder(importlib.abc.MetaPathFinder):
    """Patches vllm/utils/flashinfer.py right after it executes (before any other module imports its names)."""

    def __init__(self, cubin_present: bool):
        self.cubin_present = cubin_present

    def find_spec(self, fullname, path=None, target=None):
        if fullname != MODELLED_FLASHINFER_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        present = self.cubin_present
        spec.loader = _PatchAfterExec(spec.loader, lambda m: _model_flashinfer_module(m, present))
        return spec


def no_network() -> None:
    """The child reaches no network: a connection attempt raises OSError (what an unreachable host raises), so
    no answer depends on where the builder runs."""
    import socket

    def refuse(self, *args, **kwargs):
        raise OSError("the vLLM pack builder's child reaches no network (modelled inputs answer instead)")

    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = lambda *a, **k: refuse(None)
    socket.getaddrinfo = lambda *a, **k: refuse(None)
