"""Python apps that give vLLM its engine arguments as keywords rather than as a command: Ray Serve LLM's
`LLMConfig(model_loading_config=..., engine_kwargs=..., accelerator_type=...)` (served by build_openai_app) and
vLLM's own `AsyncEngineArgs(...)` / `EngineArgs(...)` (a Ray Serve deployment that builds its engine). Each call
becomes the `vllm serve` argv its keywords stand for, every word on the line of its keyword; a keyword whose value
is not a constant of the module or of the enclosing function is left out and named in a note."""

from __future__ import annotations

import ast
from pathlib import PurePosixPath

from kvdoctor.scan.documents import SourceFile
from kvdoctor.scan.engine_kwargs import flag_words
from kvdoctor.scan.python_apps import (GPU_KEYWORD, app_name, declared_gpu, module_constants, parsed, registry_image,
                                      value_of, vllm_pin)
from kvdoctor.scan.serving_crds import RAY_ACCELERATOR
from kvdoctor.scan.workload import GpuSelector, Token, Workload

RAY_LLM_CONFIG = "LLMConfig"
"""ray.serve.llm.LLMConfig: model_loading_config (model_id, model_source), engine_kwargs, accelerator_type."""
ENGINE_ARGS = {"AsyncEngineArgs", "EngineArgs"}
"""vLLM's engine argument classes: their keywords are the fields `vllm serve` flags set."""
OFFLINE_ENGINE = "LLM"
"""vllm.LLM, the offline engine (a Modal class or a batch job builds it): its keywords go to EngineArgs too; read only
where the module imports it from vllm (`from vllm import LLM`, `vllm.LLM(...)`)."""
UNKNOWN = object()
CASTS = {"int": int, "float": float, "str": str}


def _is_env_lookup(node: ast.AST) -> bool:
    """os.getenv(...) / os.environ.get(...) with a constant name."""
    if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
        return False
    text = ast.unparse(node.func)
    return text in ("os.getenv", "os.environ.get", "getenv", "environ.get")


def workloads(source: SourceFile) -> list[Workload]:
    tree = parsed(source)
    if tree is None:
        return []
    constants = module_constants(tree)
    pin, image = vllm_pin(tree, constants), registry_image(tree, constants)
    name = app_name(tree, constants) or PurePosixPath(source.path).name
    found: list[Workload] = []
    engines = ENGINE_ARGS | {RAY_LLM_CONFIG} | ({OFFLINE_ENGINE} if _imports_vllm_llm(tree) else set())
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call) or _called(call) not in engines:
            continue
        scope = _scope_constants(tree, call, constants)
        read = (_ray_llm_config(call, scope) if _called(call) == RAY_LLM_CONFIG
                else _engine_args(tree, call, scope, pin[0] if pin else None))
        if read is None:
            continue
        container, argv, notes, selectors = read
        count = count_line = None
        if not selectors and (gpu := declared_gpu(tree, constants)):  # a Modal function's gpu="A100-80GB:1"
            selectors, count, count_line = (GpuSelector(GPU_KEYWORD, (gpu[0],), gpu[2]),), gpu[1], gpu[2]
        if pin:
            notes.append(f"vLLM pinned by the image's pip install: vllm=={pin[0]}")
        found.append(Workload(
            file=source.path, line=call.lineno, platform="python", kind="Python app", name=name, container=container,
            argv=tuple(argv), command_line=call.lineno, gpu_selectors=selectors, gpu_limit=count,
            gpu_limit_line=count_line, image=image[0] if image else None, image_line=image[1] if image else None,
            vllm_pin=pin[0] if pin else None, vllm_pin_line=pin[1] if pin else None, notes=tuple(notes),
        ))  # fmt: skip
    return found


def unread_notes(source: SourceFile) -> list[str]:
    """A note for each engine the file builds from arguments it does not write (`AsyncEngineArgs(**kwargs)`, a
    Ray Serve deployment's bind(); `AsyncEngineArgs.from_cli_args(args)`), so that its silence is never a pass."""
    tree = parsed(source)
    if tree is None:
        return []
    notes = []
    for call in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Call)), key=lambda n: n.lineno):
        runtime = isinstance(call.func, ast.Attribute) and call.func.attr == "from_cli_args" \
            and getattr(call.func.value, "id", None) in ENGINE_ARGS
        unwritten = _called(call) in ENGINE_ARGS and not any(k.arg == "model" for k in call.keywords)
        if runtime or unwritten:
            notes.append(f"{source.path}:{call.lineno}: {ast.unparse(call)} builds vLLM's engine from arguments given "
                         "at run time (not written in the file): not checked")  # fmt: skip
    return notes


def _imports_vllm_llm(tree: ast.Module) -> bool:
    """Whether `LLM` is vLLM's offline engine here: `from vllm import LLM` (anywhere, a Modal method imports it
    inside), or `vllm.LLM(...)`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "vllm" and any(a.name == OFFLINE_ENGINE for a in node.names):
            return True
        if isinstance(node, ast.Attribute) and node.attr == OFFLINE_ENGINE and getattr(node.value, "id", None) == "vllm":
            return True
    return False


def _called(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)


def _ray_llm_config(call: ast.Call, scope: dict[str, object]):
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    loading = _mapping(keywords.get("model_loading_config"))
    source_node = loading.get("model_source", loading.get("model_id"))
    model = _plain(source_node, scope) if source_node is not None else UNKNOWN
    model_id = _plain(loading["model_id"], scope) if "model_id" in loading else model
    argv = [Token(str(model), source_node.lineno)] if isinstance(model, str) else []
    notes = ["Ray Serve LLM (a Python app): vLLM's engine arguments from LLMConfig's engine_kwargs, read as vllm serve "
             "flags; Ray places its workers on the cluster's GPUs, so GPU counts are not compared with -tp x -pp"]
    flags, unknown = _keyword_flags(_mapping(keywords.get("engine_kwargs")), scope)
    argv += flags
    notes += unknown
    accelerator = keywords.get(RAY_ACCELERATOR)
    value = _plain(accelerator, scope) if accelerator is not None else None
    selectors = (GpuSelector(RAY_ACCELERATOR, (value,), accelerator.lineno),) if isinstance(value, str) else ()
    label = model_id if isinstance(model_id, str) else "?"
    return f"llm_configs {label}", argv, notes, selectors


def _engine_args(tree: ast.Module, call: ast.Call, scope: dict[str, object], release: str | None = None):
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    if "model" not in keywords and (not call.args or isinstance(call.args[0], ast.Starred)):
        return None  # EngineArgs(**kwargs) and the like: nothing to read
    model_node = keywords.pop("model") if "model" in keywords else call.args[0]  # LLM(MODEL, ...): model comes first
    model = _plain(model_node, scope)
    # a model the app computes stays a variable: said unknown, never "no model given"
    argv = [Token(str(model) if isinstance(model, str) else f"${{{ast.unparse(model_node)}}}", model_node.lineno)]
    flags, unknown = _keyword_flags(keywords, scope, release)
    notes = [f"{_called(call)}(...) in a Python app: its keywords read as vllm serve flags"] + unknown
    return _enclosing(tree, call) or "(module)", argv + flags, notes, ()


def _keyword_flags(keywords: dict[str, ast.AST], scope: dict[str, object],
                   release: str | None = None) -> tuple[list[Token], list[str]]:
    argv: list[Token] = []
    unknown: list[str] = []
    for key, node in keywords.items():
        value = _plain(node, scope)
        if value is UNKNOWN:
            unknown.append(f"{key} takes its value from {ast.unparse(node)}, unknown here: not judged")
            continue
        argv += flag_words(key, value, node.lineno, release)
    return argv, unknown


def _mapping(node: ast.AST | None) -> dict[str, ast.AST]:
    """The keys and value nodes of a dict literal or a dict(...) call; {} for anything else."""
    if isinstance(node, ast.Dict):
        return {k.value: v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict" and not node.args:
        return {k.arg: k.value for k in node.keywords if k.arg}
    return {}


def _plain(node: ast.AST, scope: dict[str, object]) -> object:
    """A keyword's value as data (constants, dicts, lists), or UNKNOWN."""
    if isinstance(node, ast.Constant) and node.value is None:
        return None
    if isinstance(node, (ast.Dict, ast.Call)) and (_mapping(node) or isinstance(node, ast.Dict)):
        items = {key: _plain(value, scope) for key, value in _mapping(node).items()}
        return UNKNOWN if UNKNOWN in items.values() else items
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_plain(item, scope) for item in node.elts]
        return UNKNOWN if UNKNOWN in items else items
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return scope.get(f"self.{node.attr}", UNKNOWN)
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) in CASTS and len(node.args) == 1:
        inner = _plain(node.args[0], scope)
        try:
            return UNKNOWN if inner is UNKNOWN or inner is None else CASTS[node.func.id](inner)
        except (TypeError, ValueError):
            return UNKNOWN
    if _is_env_lookup(node):  # os.getenv("X", default): the app's environment is unknown here, its default runs
        return _plain(node.args[1], scope) if len(node.args) > 1 else UNKNOWN
    value = value_of(node, scope)
    return UNKNOWN if value is None else value


def _enclosing(tree: ast.Module, target: ast.AST) -> str | None:
    """The innermost class (a Ray Serve deployment) around the call, else the innermost function."""
    around = [n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
              and any(m is target for m in ast.walk(n))]  # fmt: skip  # ast.walk: outer first
    classes = [n for n in around if isinstance(n, ast.ClassDef)]
    innermost = (classes or around)[-1:]
    return innermost[0].name if innermost else None


def _scope_constants(tree: ast.Module, call: ast.Call, constants: dict[str, object]) -> dict[str, object]:
    """The module's constants plus the plain assignments before the call in the functions around it (NAME =
    constant, self.NAME = constant): what the call's keywords can be read from."""
    scope = dict(constants)
    for node in ast.walk(tree):  # a class attribute with a default (`model_id: str = MODEL_ID`) is self.model_id
        if isinstance(node, ast.ClassDef) and any(n is call for n in ast.walk(node)):
            for statement in node.body:
                target, value = (statement.targets[0], statement.value) if isinstance(statement, ast.Assign) \
                    and len(statement.targets) == 1 else (getattr(statement, "target", None), getattr(statement, "value", None))
                if isinstance(target, ast.Name) and value is not None and (known := value_of(value, scope)) is not None:
                    scope[f"self.{target.id}"] = known
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(n is call for n in ast.walk(node)):
            for statement in ast.walk(node):
                if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and statement.lineno < call.lineno:
                    target = statement.targets[0]
                    key = target.id if isinstance(target, ast.Name) else (
                        f"self.{target.attr}" if isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name) and target.value.id == "self" else None)  # fmt: skip
                    value = value_of(statement.value, scope) if key else None
                    if key and value is not None:
                        scope[key] = value
    return scope
