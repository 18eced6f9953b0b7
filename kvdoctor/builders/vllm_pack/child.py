"""Child process of the pack builder (build.py): asks one vLLM release's own code what it does.

Run as `python -m kvdoctor.builders.vllm_pack.child REQUEST.json OUT.json` in the builder's venv (CPU torch,
no GPU; kvdoctor importable); it puts the release's extracted `vllm/**/*.py` first on sys.path. Writes plain
JSON facts; never copies vLLM code, only values, vLLM's own message strings and file:line locations (relative to
the wheel root).

Where a compiled extension or a hard dependency would decide (FlashAttention's FA2/FA3 `.so`, FlashInfer),
its presence is modelled from the wheel's file list and requirements and recorded under `modelled`.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import json
import os
import sys
import traceback
import types
import warnings

from kvdoctor.builders.vllm_pack.child_shared import assignment_lines

TASKS_PACKAGE = "kvdoctor.builders.vllm_pack"  # `module:X` runs child_X.run(this module) from here
warnings.filterwarnings("ignore")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REQ = json.load(open(sys.argv[1]))
SRC = os.path.realpath(REQ["src"])  # the extracted wheel root (holds vllm/)


def rel_path(path: str) -> str:
    """A vLLM file path relative to the wheel root; other files by their last components."""
    path = os.path.realpath(path)
    if path.startswith(SRC + os.sep):
        return path[len(SRC) + 1:]
    for marker in ("site-packages" + os.sep, "lib" + os.sep + "python"):
        if marker in path:
            return path.split(marker, 1)[1]
    return os.path.basename(path)


def where(obj) -> str | None:
    """file:line of a function/class definition inside vLLM."""
    try:
        obj = inspect.unwrap(getattr(obj, "__func__", obj))
        file = inspect.getsourcefile(obj)
        line = inspect.getsourcelines(obj)[1]
    except (TypeError, OSError):
        return None
    return f"{rel_path(file)}:{line}" if file else None


# ---------------------------------------------------------------------------------------------------------------
# Stand-ins for what a CPU-only machine lacks: the wheel's compiled extensions and its hard GPU dependencies.
class _Anything:
    """A permissive stand-in object: any attribute, call, index or iteration gives another stand-in."""

    def __init__(self, name="stub"):
        self._name = name

    def __getattr__(self, item):
        if item.startswith("__") and item.endswith("__"):
            raise AttributeError(item)
        return _Anything(f"{self._name}.{item}")

    def __call__(self, *a, **k):
        return _Anything(self._name + "()")

    def __getitem__(self, item):
        return _Anything(self._name + "[]")

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
        return _Anything(f"{self.__name__}.{item}")


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


class _StubFinder(importlib.abc.MetaPathFinder):
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


def _cuda_tensors_on_meta():
    """Module-level `torch.empty(..., device="cuda")` (a workspace buffer) lands on the meta device instead."""
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
            return _capability_now()[0]

        @property
        def minor(self):
            return _capability_now()[1]

    torch.cuda.get_device_properties = lambda *a, **k: _Props()
    torch.cuda.get_device_capability = lambda *a, **k: _capability_now()


def _capability_now() -> tuple[int, int]:
    """The capability the stubbed platform reports now (install_platform; the tasks switch it per target)."""
    platform = sys.modules.get("vllm.platforms")
    current = getattr(platform, "_current_platform", None) if platform else None
    return tuple(getattr(type(current), "capability_now", REQ.get("capability", (9, 0))))


_cuda_tensors_on_meta()
# a dependency installed for real in the builder's venv (xgrammar's tvm_ffi, say) is used as it is
_REAL = {root for root in REQ["stub_packages"] if importlib.util.find_spec(root) is not None}
STUB_FINDER = _StubFinder(set(REQ["compiled_modules"]),
                          {k: v for k, v in REQ["stub_packages"].items() if k not in _REAL})
sys.meta_path.insert(0, STUB_FINDER)
sys.path.insert(0, SRC)


# ---------------------------------------------------------------------------------------------------------------
# Serve arguments: vLLM's own `vllm serve` parser, every action dumped; add_argument call sites recorded.
_CALL_SITES: dict[int, str] = {}


def _record_call_sites():
    original = argparse._ActionsContainer.add_argument

    def add_argument(self, *args, **kwargs):
        action = original(self, *args, **kwargs)
        for frame in inspect.stack()[1:8]:
            file = os.path.realpath(frame.filename)
            if file.startswith(SRC + os.sep) and not file.endswith("argparse_utils.py"):
                _CALL_SITES[id(action)] = f"{rel_path(file)}:{frame.lineno}"
                break
        return action

    argparse._ActionsContainer.add_argument = add_argument


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        if isinstance(value, float) and value != value:
            return "nan"
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is argparse.SUPPRESS:
        return "==SUPPRESS=="
    return repr(value)


def _type_name(t) -> str | None:
    if t is None:
        return None
    name = getattr(t, "__name__", None) or type(t).__name__
    if name == "<lambda>" or name == "partial":
        return repr(t)[:60] if name == "partial" else "lambda"
    return name


def dump_serve_args() -> dict:
    _record_call_sites()
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402
    except ImportError:  # before 0.11
        from vllm.utils import FlexibleArgumentParser  # noqa: E402

    # the `vllm serve` subparser exactly as the `vllm` CLI builds it
    from vllm.entrypoints.cli import serve as serve_module

    make_arg_parser = serve_module.make_arg_parser
    root = FlexibleArgumentParser(prog="vllm")
    subparsers = root.add_subparsers(required=False, dest="subparser")
    parser = serve_module.ServeSubcommand().subparser_init(subparsers)
    actions = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            kind = "help"
        else:
            kind = type(action).__name__
        help_text = action.help if isinstance(action.help, str) else None
        first = None
        if help_text and help_text != argparse.SUPPRESS:
            first = help_text.strip().split("\n")[0].strip()[:160]
        choices = action.choices
        if choices is not None:
            try:
                choices = [_jsonable(c) for c in choices]
            except TypeError:
                choices = repr(choices)
        actions.append({
            "option_strings": list(action.option_strings),
            "dest": action.dest,
            "action": kind,
            "nargs": _jsonable(action.nargs),
            "const": _jsonable(action.const),
            "default": _jsonable(action.default),
            "type": _type_name(action.type),
            "choices": choices,
            "required": bool(action.required),
            "help": first,
            "hidden": action.help == argparse.SUPPRESS,
            "where": _CALL_SITES.get(id(action)),
        })
    return {
        "actions": actions,
        "allow_abbrev": bool(parser.allow_abbrev),
        "parser_class": where(FlexibleArgumentParser),
        "make_arg_parser": where(make_arg_parser),
    }


def literal_values(module_name: str, name: str) -> dict:
    """Values of a typing.Literal alias (CacheDType, ModelDType) and the line that defines it."""
    import typing

    module = importlib.import_module(module_name)
    alias = getattr(module, name)
    values = list(typing.get_args(alias))
    file = inspect.getsourcefile(module)
    lines = assignment_lines(file, name)
    return {"values": values, "where": f"{rel_path(file)}:{lines[-1] if lines else None}"}


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


def _legacy_ops():
    """Releases before 0.20 call compiled ops at import time (`torch.ops._C.cutlass_scaled_mm_supports_fp8`):
    their op namespaces become stand-ins (falsy answers), so the modules import."""
    import torch

    for name in ("_C", "_C_cache_ops", "_C_custom_ar", "_moe_C", "_rocm_C", "_vllm_fa2_C", "_vllm_fa3_C",
                 "_flashmla_C", "_flashmla_extension_C", "_qutlass_C"):
        setattr(torch.ops, name, _Anything(f"torch.ops.{name}"))
    for name in ("register_fake", "impl_abstract"):  # fake kernels for ops that do not exist here: skipped
        original = getattr(torch.library, name, None)
        if original is not None:
            setattr(torch.library, name, _tolerant(original))


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


def main() -> None:
    out: dict = {"errors": {}}
    if REQ.get("legacy"):
        _legacy_ops()
    install_platform(tuple(REQ.get("capability", (9, 0))))
    tasks = REQ["tasks"]
    if "serve_args" in tasks:
        out["serve_args"] = dump_serve_args()
    if "dtypes" in tasks:
        for key, (mod, name) in {"kv_cache_dtypes": ("vllm.config.cache", "CacheDType"),
                                 "model_dtypes": ("vllm.config.model", "ModelDType")}.items():
            try:
                try:
                    out[key] = literal_values(mod, name)
                except (ImportError, AttributeError):
                    if not REQ.get("legacy"):
                        raise
                    out[key] = literal_values("vllm.config", name)  # before 0.11: one vllm/config/__init__.py
            except Exception as exc:  # an older layout: the builder falls back to the parser's choices
                out["errors"][key] = f"{type(exc).__name__}: {exc}"
    for task in tasks:
        if task.startswith("module:"):
            mod = importlib.import_module(f"{TASKS_PACKAGE}.child_{task.split(':', 1)[1]}")
            try:
                out[task.split(":", 1)[1]] = mod.run(sys.modules[__name__])
            except Exception:
                out["errors"][task] = traceback.format_exc()[-3000:]
    json.dump(out, open(sys.argv[2], "w"), sort_keys=True, indent=0)


if __name__ == "__main__":
    main()
