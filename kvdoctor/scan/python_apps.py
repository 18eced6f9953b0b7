"""Python deployment apps (Modal and the like) -> vLLM workloads: each list literal or string that is a vLLM
launch (["vllm", "serve", MODEL, "--tensor-parallel-size", str(N_GPU)], "vllm serve ..."), its words evaluated from
the module's constants (names, str(), f-strings); words that are not constants stay variables (unknown here). The GPU
and count of a `gpu="H100:2"` keyword, and a `vllm==X` pin in the image's pip install, are read too."""

from __future__ import annotations

import ast
import posixpath
import re
import shlex
from dataclasses import replace
from pathlib import PurePosixPath

from kvdoctor.scan import systemd_units
from kvdoctor.scan.command import after_launcher, script_commands
from kvdoctor.scan.documents import PYTHON_SUFFIX, SourceFile
from kvdoctor.scan.embedded_scripts import INSTANCE_TYPE_KEYS, INSTANCE_TYPE_LABEL, RUNS_VLLM
from kvdoctor.scan.scripts import docker_run, installed_before, installed_in, script_workloads
from kvdoctor.scan.workload import GpuSelector, Token, Workload

GPU_KEYWORD = "gpu"
"""A `gpu=` keyword (Modal's `@app.function(gpu="H100:2")`): a GPU product name with a count."""
VLLM_PIN = re.compile(r"^vllm==([0-9][0-9A-Za-z.+-]*)$")
DOCKER_RUN = re.compile(r"\s*(?:sudo\s+)?(?:docker|podman|nerdctl)\s+run\s")
GPU_SPEC = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*?)(?::(\d+))?$")


def is_python_app(source: SourceFile) -> bool:
    """A Python file given to scan: read as Python (never as YAML), whether or not it launches vLLM."""
    return source.path.endswith(PYTHON_SUFFIX)


def workloads(source: SourceFile) -> list[Workload]:
    tree = parsed(source)
    if tree is None:
        return []
    constants = module_constants(tree)
    found: list[Workload] = []
    gpu, pin, image = declared_gpu(tree, constants), vllm_pin(tree, constants), registry_image(tree, constants)
    machine = declared_machine(tree, constants)
    pieces = _fstring_pieces(tree)
    joined = _joined_lists(tree)
    for node in ast.walk(tree):
        if id(node) not in pieces and (run := _docker_run_string(source, tree, node, constants)) is not None:
            found.append(run)
            continue
        if id(node) not in pieces and (scripted := _script_string(source, node, constants)):
            found += [replace(w, gpu_selectors=w.gpu_selectors or machine) for w in scripted]
            continue
        words = _launch_words(node, constants) if id(node) not in pieces else None
        if words and id(node) in joined:  # `subprocess.Popen(" ".join(cmd), shell=True)`: the shell splits items
            words = [Token(part, word.line) for word in words
                     for part in ((_split(word.text) if "${" not in word.text else None) or [word.text])]
        argv = after_launcher(words) if words else None
        if argv is None:
            continue
        function = _enclosing_function(tree, node)
        notes = ["a Python app's vLLM launch: its words evaluated from the module's constants"]
        if pin:
            notes.append(f"vLLM pinned by the image's pip install: vllm=={pin[0]}")
        found.append(Workload(
            file=source.path, line=node.lineno, platform="python", kind="Python app",
            name=app_name(tree, constants) or PurePosixPath(source.path).name, container=function or "(module)",
            argv=tuple(argv), command_line=node.lineno,
            gpu_selectors=(GpuSelector(GPU_KEYWORD, (gpu[0],), gpu[2]),) if gpu else (),
            gpu_limit=gpu[1] if gpu else None, gpu_limit_line=gpu[2] if gpu else None,
            image=image[0] if image else None, image_line=image[1] if image else None,
            vllm_pin=pin[0] if pin else None, vllm_pin_line=pin[1] if pin else None, notes=tuple(notes),
        ))  # fmt: skip
    return found


def parsed(source: SourceFile) -> ast.Module | None:
    """The file's syntax tree, or None for a file that is no valid Python."""
    try:
        return ast.parse(source.text)
    except (SyntaxError, ValueError):
        return None


ENV_LOOKUPS = ("os.getenv", "os.environ.get", "getenv", "environ.get")


def module_constants(tree: ast.Module) -> dict[str, object]:
    """Module-level NAME = constant (or an f-string / str() of constants), in order."""
    constants: dict[str, object] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name):  # fmt: skip
            name = statement.targets[0].id
            value = value_of(statement.value, constants)
            if value is not None:
                constants[name] = value
            elif (gpu := _modal_gpu_object(statement.value, constants)) is not None and gpu[1] is not None:
                constants[f"{name}.count"] = gpu[1]  # GPU_CONFIG = modal.gpu.A100(count=2): GPU_CONFIG.count is 2
    constants.update(_class_attributes(tree, constants))
    return constants


def _class_attributes(tree: ast.Module, constants: dict[str, object]) -> dict[str, object]:
    """`self.NAME` for a class body's `NAME = constant` or `NAME: T = modal.parameter(default=constant)` (a Modal
    class's parameter runs with its default unless the caller gives one); a name two classes give different values is
    left unknown."""
    found: dict[str, object] = {}
    clashing: set[str] = set()
    for statement in (s for c in tree.body if isinstance(c, ast.ClassDef) for s in c.body):
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) and statement.value:
            name, node = statement.target.id, statement.value
        elif isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0],
                                                                                                ast.Name):
            name, node = statement.targets[0].id, statement.value
        else:
            continue
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("parameter"):
            node = next((k.value for k in node.keywords if k.arg == "default"), None)
        value = value_of(node, constants) if node is not None else None
        key = f"self.{name}"
        if value is None:
            continue
        if key in found and found[key] != value:
            clashing.add(key)
        found.setdefault(key, value)
    return {k: v for k, v in found.items() if k not in clashing}


def value_of(node: ast.AST, constants: dict[str, object]) -> object | None:
    """A constant's value, else None (unknown here)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool)):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and f"{node.value.id}.{node.attr}" in constants:
        return constants[f"{node.value.id}.{node.attr}"]
    if isinstance(node, ast.Attribute) and ast.unparse(node) == "sys.executable":
        return "python3"  # the app's own interpreter: `[sys.executable, "-m", "vllm.entrypoints.openai.api_server"]`
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ENV_LOOKUPS and len(node.args) > 1:
        return value_of(node.args[1], constants)  # os.getenv("X", default): the environment is unknown, its default runs
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and len(node.args) == 1:
        inner = value_of(node.args[0], constants)
        return str(inner) if inner is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = []
        for part in node.values:
            inner = value_of(part.value if isinstance(part, ast.FormattedValue) else part, constants)
            if inner is None:
                return None
            parts.append(str(inner))
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div, ast.Add, ast.Sub, ast.FloorDiv)):
        left, right = value_of(node.left, constants), value_of(node.right, constants)
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (left, right))
        if isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str):
            return left + right  # MODELS_DIR + "/" + MODEL_NAME
        if not numbers:
            return None
        if isinstance(node.op, ast.Mult):
            return left * right if isinstance(left, int) and isinstance(right, int) else None
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.FloorDiv):
            return left // right if right else None
        return left / right if right else None
    if isinstance(node, ast.Call) and ast.unparse(node.func) in ("os.path.join", "posixpath.join") and node.args:
        parts = [value_of(arg, constants) for arg in node.args]
        return posixpath.join(*parts) if all(isinstance(part, str) for part in parts) else None
    return None


def _word(node: ast.AST, constants: dict[str, object]) -> Token:
    value = value_of(node, constants)
    return Token(str(value) if value is not None else f"${{{ast.unparse(node)}}}", getattr(node, "lineno", None))


def _launch_text(node: ast.AST, constants: dict[str, object]) -> str | None:
    """A string's text; an f-string's part that is not a constant stands as one unknown word (`${run_dummy}`)."""
    if not isinstance(node, ast.JoinedStr):
        return value_of(node, constants)
    parts = []
    for part in node.values:
        value = value_of(part.value if isinstance(part, ast.FormattedValue) else part, constants)
        if value is None:
            named = isinstance(part, ast.FormattedValue) and isinstance(part.value, (ast.Name, ast.Attribute))
            value = f"${{{ast.unparse(part.value).replace('.', '_') if named else 'VALUE'}}}"
        parts.append(str(value))
    return "".join(parts)


def _docker_run_string(source: SourceFile, tree: ast.Module, node: ast.AST, constants: dict[str, object]):
    """A string that is a `docker run` of vLLM (given to subprocess with shell=True), as a shell script's would be."""
    if not isinstance(node, (ast.Constant, ast.JoinedStr)):
        return None
    text = _launch_text(node, constants)
    if not isinstance(text, str) or not DOCKER_RUN.match(text):
        return None
    words = _shell_words(text, node.lineno)
    if not words:
        return None
    run = docker_run(source.path, app_name(tree, constants) or PurePosixPath(source.path).name, words)
    note = f"{words[0].text} run in a Python string (a shell command): the image's server with the words after the image"
    return replace(run, notes=(note,) + run.notes[1:]) if run is not None else None


SHEBANG = re.compile(r"\A\s*#!\s*\S*\b(?:ba|z|da)?sh\b")


def _script_string(source: SourceFile, node: ast.AST, constants: dict[str, object]) -> list[Workload]:
    """The vLLM workloads of a string that is a whole shell script (a `#!/bin/bash` boot script an AWS CDK or Pulumi
    program hands an instance as its user data): read as a script file's, on the Python file's own lines, a systemd
    unit it writes included (scripts.py); an f-string's part that is not a constant stays an unknown variable."""
    if not isinstance(node, (ast.Constant, ast.JoinedStr)):
        return []
    text = _launch_text(node, constants)
    if not isinstance(text, str) or "\n" not in text or not SHEBANG.match(text) or not RUNS_VLLM.search(text):
        return []
    note = f"a shell script in a Python string ({source.path}:{node.lineno}), read as a script run on the machine"
    written, _ = systemd_units.written_by_script(SourceFile(source.path, "\n" * (node.lineno - 1) + text))
    run = script_workloads(text, node.lineno, source.path, PurePosixPath(source.path).name)
    installed = installed_in(text, node.lineno)  # the unit runs the vLLM the script pip-installs before it
    found = [installed_before(w, installed) if installed and w.image is None and w.vllm_pin is None else w
             for w in run + written]
    return [replace(w, notes=w.notes + (note,)) for w in found]


def declared_machine(tree: ast.Module, constants: dict[str, object]) -> tuple[GpuSelector, ...]:
    """The one machine type the program's keywords name (`instance_type=ec2.InstanceType("g5.xlarge")`, Pulumi's
    `instance_type="g5.xlarge"`), as the instance-type label its GPU is looked up by; () for none or several."""
    named: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in INSTANCE_TYPE_KEYS - {"size"}:  # Modal's gpu(size="80GB")
            value = node.value.args[0] if isinstance(node.value, ast.Call) and len(node.value.args) == 1 \
                else node.value  # fmt: skip
            text = value_of(value, constants)
            if isinstance(text, str) and text:
                named.setdefault(text, node.value.lineno)
    if len(named) != 1:
        return ()
    ((machine, line),) = named.items()
    return (GpuSelector(INSTANCE_TYPE_LABEL, (machine,), line),)


def _shell_words(text: str, line: int) -> list[Token]:
    """The first command of a string a shell runs (os.system, shell=True): its words without the shell's own
    redirections and `&` (`vllm serve M ... > vllm.log 2>&1 &`), each on the string's first line."""
    commands = script_commands(text, line)
    return [Token(word.text, line) for word in commands[0]] if commands else []


SHELL_CALLS = {"system", "popen", "getoutput", "getstatusoutput"}  # os.system(s), subprocess.getoutput(s)...


def _joined_lists(tree: ast.Module) -> set[int]:
    """The list literals assigned to a name that the module joins with spaces (`" ".join(cmd)`) and hands to a shell
    (`subprocess.Popen(" ".join(cmd), shell=True)`, `os.system(...)`), which splits it into words: an item
    "--host 0.0.0.0" is two words there, one argument otherwise (a join only printed changes nothing)."""
    names = {arg.args[0].id for node in ast.walk(tree) if isinstance(node, ast.Call) and _runs_a_shell(node)
             for arg in node.args if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute)
             and arg.func.attr == "join" and isinstance(arg.func.value, ast.Constant) and arg.func.value.value == " "
             and len(arg.args) == 1 and isinstance(arg.args[0], ast.Name)}  # fmt: skip
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.List)
            and any(isinstance(t, ast.Name) and t.id in names for t in node.targets)}  # fmt: skip


def _runs_a_shell(call: ast.Call) -> bool:
    shell = any(k.arg == "shell" and isinstance(k.value, ast.Constant) and k.value.value is True for k in call.keywords)
    return shell or (isinstance(call.func, ast.Attribute) and call.func.attr in SHELL_CALLS)


def _split(text: str) -> list[str] | None:
    try:
        return shlex.split(text)
    except ValueError:
        return None


def _fstring_pieces(tree: ast.Module) -> set[int]:
    """The constant pieces of f-strings: part of a string, never a string of their own."""
    return {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}


def _launch_words(node: ast.AST, constants: dict[str, object]) -> list[Token] | None:
    """The words of a list literal or a string, when they start a vLLM launch."""
    if isinstance(node, ast.List) and node.elts:
        words = [_word(item, constants) for item in node.elts]
    elif isinstance(node, (ast.Constant, ast.JoinedStr)):
        text = _launch_text(node, constants)
        if not isinstance(text, str) or not re.match(r"\s*(?:vllm\s+serve|python3?\s+-m\s+vllm\.)", text):
            return None
        words = _shell_words(text, node.lineno)
        if not words:
            return None
    else:
        return None
    return words if after_launcher(words) is not None else None


def declared_gpu(tree: ast.Module, constants: dict[str, object]) -> tuple[str, int | None, int] | None:
    """(GPU name, count, line) of the first `gpu=` keyword whose value is a constant such as 'H100:2', or one of
    Modal's older GPU objects, `modal.gpu.A100(count=2, size="80GB")`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == GPU_KEYWORD:
            value_node = _assigned(tree, node.value.id) if isinstance(node.value, ast.Name) else None
            if (gpu_object := _modal_gpu_object(value_node or node.value, constants)) is not None:
                return gpu_object
            value = value_of(node.value, constants)
            found = GPU_SPEC.match(value) if isinstance(value, str) else None
            if found:
                return found.group(1), int(found.group(2)) if found.group(2) else 1, node.value.lineno
    return None


def _assigned(tree: ast.Module, name: str) -> ast.AST | None:
    """The value of the module's last top-level `name = ...` (GPU_CONFIG = modal.gpu.A100(count=2)), or None."""
    found = None
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in statement.targets):
            found = statement.value
    return found


def _modal_gpu_object(node: ast.AST, constants: dict[str, object]) -> tuple[str, int | None, int] | None:
    """`modal.gpu.H100(count=2)` / `gpu.A100(size="80GB")`: the class names the GPU, `size` its memory, `count`
    how many (1 when not given; None when given but not a constant here)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and ast.unparse(node.func.value).split(".")[-1] == GPU_KEYWORD):
        return None
    keywords = {keyword.arg: value_of(keyword.value, constants) for keyword in node.keywords}
    count = keywords.get("count", 1)
    size = keywords.get("size") or (f"{keywords['memory']}GB" if isinstance(keywords.get("memory"), int) else None)
    name = node.func.attr + (f"-{size}" if isinstance(size, str) and size else "")
    return name, count if isinstance(count, int) and not isinstance(count, bool) else None, node.lineno


REGISTRY_IMAGE = "from_registry"
"""Modal's `Image.from_registry("vllm/vllm-openai:v0.10.1.1")`: the container image the app's functions run."""


def registry_image(tree: ast.Module, constants: dict[str, object]) -> tuple[str, int] | None:
    """The image and line of the first `Image.from_registry(...)` whose name is a constant here."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == REGISTRY_IMAGE
                and node.args and isinstance(value := value_of(node.args[0], constants), str) and value.strip()):
            return value.strip(), node.args[0].lineno
    return None


def vllm_pin(tree: ast.Module, constants: dict[str, object]) -> tuple[str, int] | None:
    """The release of a 'vllm==X' argument (an image's pip install), and its line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for arg in node.args:
                value = value_of(arg, constants)
                if isinstance(value, str) and (found := VLLM_PIN.match(value)):
                    return found.group(1), arg.lineno
    return None


def app_name(tree: ast.Module, constants: dict[str, object]) -> str | None:
    """The name given to Modal's `App("name")` / `Stub("name")` or BentoML's `@bentoml.service(name="name")`, if any."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if func in ("App", "Stub") and node.args and isinstance(value := value_of(node.args[0], constants), str):
            return value
        if func == "service" and isinstance(node.func, ast.Attribute) and getattr(node.func.value, "id", "") == "bentoml":
            named = next((k.value for k in node.keywords if k.arg == "name"), None)
            if named is not None and isinstance(value := value_of(named, constants), str):
                return value
            # no name: BentoML names the service after the class it decorates
            decorated = next((c for c in ast.walk(tree) if isinstance(c, ast.ClassDef) and node in c.decorator_list), None)
            if decorated is not None:
                return decorated.name
    return None


def _enclosing_function(tree: ast.Module, target: ast.AST) -> str | None:
    """The outermost function or class the launch is written in: a Modal `@app.cls` class (its container), else the
    function (`@app.function`)."""
    for node in ast.walk(tree):  # breadth first: the outermost first
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and any(
                n is target for n in ast.walk(node)):
            return node.name
    return None
