"""NixOS modules that run vLLM's container: `virtualisation.oci-containers.containers.NAME = { image; cmd;
entrypoint; environment; extraOptions; }` (docker or podman), read as a Compose service's keys: `cmd` is the
command after the image, `extraOptions`' `--gpus` / `--device nvidia.com/gpu=...` (CDI) the GPUs it gets. Values
come from the file's own `let` bindings and its module's option defaults (scan/nix_expr.py); a value of the host's
configuration elsewhere is unknown, shown as `${...}`."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import yaml

from kvdoctor.scan import compose
from kvdoctor.scan.documents import SourceFile
from kvdoctor.scan.nix_expr import Evaluator, Lambda, Located, NixError, Unknown, parse
from kvdoctor.scan.workload import Workload

CONTAINERS_PATH = ("virtualisation", "oci-containers", "containers")
AS_COMPOSE = {"image": "image", "cmd": "command", "entrypoint": "entrypoint", "environment": "environment"}
GPU_OPTION = re.compile(r"^--gpus[= ](?P<gpus>.+)$|^--device[= ](?:nvidia\.com/gpu|cdi\.k8s\.io/gpu)=(?P<ids>.+)$")
MAX_WALK = 5_000


def is_nix(source: SourceFile) -> bool:
    return source.path.endswith(".nix")


def read(source: SourceFile, others: list[SourceFile] = ()) -> tuple[list[Workload], list[str]]:
    """The file's vLLM containers, and a note when it mentions vLLM but none is read; ``others``: the scan's other
    Nix files, whose settings (services.vllm.model = ...) a module's `config.X` reads, as NixOS merges modules."""
    try:
        root = parse(source.text)
    except NixError as exc:
        return [], [f"{source.path}: a Nix file that mentions vLLM, not read ({exc})"]
    except RecursionError:
        return [], [f"{source.path}: a Nix file that mentions vLLM, not read (nested too deeply)"]
    settings = _settings(others)
    evaluator = Evaluator(root, settings)
    found: list[Workload] = []
    for name, line, container in _containers(evaluator, _entered(evaluator, evaluator.eval(root, {}))):
        service = _service(evaluator, container, line)
        workload = compose.service_workload(source.path, name, service, service, source.text)
        if workload is not None:
            found.append(replace(workload, platform="nixos", kind="NixOS oci-container",
                                 notes=workload.notes + (NOTE,)))  # fmt: skip
    found += _systemd_services(evaluator, _entered(evaluator, evaluator.eval(root, {})), source)
    if found:
        return found, []
    return [], [f"{source.path}: a Nix file that mentions vLLM but defines no virtualisation.oci-containers container "
                 "that runs it (settings such as services.vllm = {...} are read by the module that declares them, when "
                 "it is scanned with this file): nothing checked here"]


def same_configuration(source: SourceFile, sources: list, scanned: list[str]) -> list[SourceFile]:
    """The scan's other Nix files of the same configuration: under the same checkout (the nearest folder up with
    .git or flake.nix), or, without one, under the same folder right below the scanned one."""
    root = _configuration_root(Path(source.path), scanned)
    return [s for s in sources if isinstance(s, SourceFile) and s is not source and is_nix(s)
            and root in Path(s.path).resolve().parents]  # fmt: skip


def _configuration_root(path: Path, scanned: list[str]) -> Path:
    path = path.resolve()
    tops = {Path(p).resolve() for p in scanned if Path(p).is_dir()}
    marked = next((f for f in path.parents if (f / ".git").exists() or (f / "flake.nix").is_file()), None)
    if marked is not None:
        return marked
    return next((f for f in path.parents if f.parent in tops or f in tops), path.parent)


def _settings(others: list[SourceFile]) -> dict:
    """The configuration the other files set (their top level, or their `config`), options and imports left out."""
    merged: dict = {}
    for other in others:
        try:
            evaluator = Evaluator(parse(other.text))
            value = _entered(evaluator, evaluator.eval(parse(other.text), {}))
        except (NixError, RecursionError):
            continue
        if not isinstance(value, dict):
            continue
        if "options" in value:  # a module that declares options: what it sets is under `config`
            value = evaluator.force(value.get("config"))
            value = value if isinstance(value, dict) else {}
        for key in value:
            if key not in ("imports", "options"):
                merged[key] = _deep(evaluator, value[key], merged.get(key))
    return merged


def _deep(evaluator: Evaluator, value, into):
    value = _entered(evaluator, value)
    if isinstance(value, dict) and isinstance(into, dict):
        return {**into, **{k: _deep(evaluator, v, into.get(k)) for k, v in value.items()}}
    if isinstance(value, dict):
        return {k: _deep(evaluator, v, None) for k, v in value.items()}
    return value


NOTE = ("NixOS virtualisation.oci-containers: its attributes read as a container's (cmd after the image, extraOptions' "
        "GPUs); values from the file's let bindings, its options' defaults and what the configuration's other scanned "
        "Nix files set; anything else (the host's other modules, Nixpkgs functions) unknown")


def _entered(evaluator: Evaluator, value):
    """A module function's body, its arguments ({ config, lib, pkgs, ... }) unknown."""
    for _ in range(5):
        value = evaluator.force(value)
        if not isinstance(value, Lambda) or value.builtin is not None:
            return value
        scope = dict(value.env) | {name: Unknown(name) for name in value.names}
        value = evaluator.eval(value.body, scope)
    return value


def _containers(evaluator: Evaluator, value):
    """(name, line, attributes) of each container under virtualisation.oci-containers.containers, anywhere."""
    stack, seen = [value], 0
    while stack and seen < MAX_WALK:
        node = _entered(evaluator, stack.pop())
        seen += 1
        if not isinstance(node, dict):
            continue
        containers = node
        for key in CONTAINERS_PATH:
            containers = _entered(evaluator, containers.get(key)) if isinstance(containers, dict) else None
        if isinstance(containers, dict):
            for name in sorted(containers):
                attributes = _entered(evaluator, containers[name])
                if isinstance(attributes, dict) and "image" in attributes:
                    yield name, _line(evaluator, attributes), attributes
        stack += [v for k, v in node.items() if k != "virtualisation"]


SERVICES_PATH = ("systemd", "services")


def _systemd_services(evaluator: Evaluator, value, source: SourceFile) -> list[Workload]:
    """`systemd.services.NAME` whose serviceConfig.ExecStart (or `script`) runs vLLM: read as a unit's ExecStart,
    with the service's `environment`, each word on its Nix line (a `concatStringsSep " " [...]` keeps its items')."""
    from kvdoctor.scan.scripts import script_findings

    found: list[Workload] = []
    stack, seen = [value], 0
    while stack and seen < MAX_WALK:
        node = _entered(evaluator, stack.pop())
        seen += 1
        if not isinstance(node, dict):
            continue
        services = node
        for key in SERVICES_PATH:
            services = _entered(evaluator, services.get(key)) if isinstance(services, dict) else None
        for name in sorted(services) if isinstance(services, dict) else ():
            service = _entered(evaluator, services[name])
            if not isinstance(service, dict):
                continue
            config = _entered(evaluator, service.get("serviceConfig"))
            start = config.get("ExecStart") if isinstance(config, dict) else None
            script = _placed_script(evaluator, start if start is not None else service.get("script"))
            if script is None or "vllm" not in script[0]:
                continue
            environment = _entered(evaluator, service.get("environment"))
            known = {key: text for key, value in (environment if isinstance(environment, dict) else {}).items()
                     if (text := evaluator.as_text(value)) is not None}  # fmt: skip
            workloads, _ = script_findings(script[0], script[1], source.path, name, known)
            found += [replace(w, platform="nixos", kind="NixOS systemd service", notes=w.notes + (SERVICE_NOTE,))
                      for w in workloads]
        stack += [v for k, v in node.items() if k != "systemd"]
    return found


SERVICE_NOTE = ("NixOS systemd.services: its ExecStart (or script) read as a unit's, with the service's environment; "
                "a Nix store path (${pkgs.vllm}) stays a variable, the program's name decides")


def _placed_script(evaluator: Evaluator, start) -> tuple[str, int] | None:
    """(a shell script with each piece on its own Nix line, its first line) of an ExecStart / script value."""
    pieces: list[tuple[str, int]] = []
    node = getattr(start, "node", None)
    if isinstance(node, tuple) and node[0] == "apply" and isinstance(node[2], tuple) and node[2][0] == "apply" \
            and "concatStringsSep" in str(node[2][2]):  # concatStringsSep SEP [ pieces ]: each piece keeps its line
        items = evaluator.force(evaluator.eval(node[3], start.env))
        for item in items if isinstance(items, list) else []:
            text = evaluator.as_text(item)
            located = evaluator.force(item)
            if text is not None:
                pieces.append((text, located.line if isinstance(located, Located) else 1))
    else:
        value = evaluator.force(start)
        text = evaluator.as_text(value)
        if text is None:
            return None
        pieces.append((text, value.line if isinstance(value, Located) else 1))
    if not pieces:
        return None
    first = pieces[0][1]
    lines, current = [""], first
    for text, line in pieces:
        while current < line:
            lines[-1] += " \\"
            lines.append("")
            current += 1
        lines[-1] += (" " if lines[-1] else "") + text
    return "\n".join(lines), first


def _line(evaluator: Evaluator, attributes: dict) -> int:
    image = evaluator.force(attributes.get("image"))
    return image.line if isinstance(image, Located) else 1


def _service(evaluator: Evaluator, container: dict, line: int) -> yaml.MappingNode:
    pairs = []
    for nix_key, compose_key in AS_COMPOSE.items():
        if nix_key in container:
            node = _node(evaluator, container[nix_key], line)
            if node is not None:
                pairs.append((_scalar(compose_key, node.start_mark.line + 1), node))
    gpus = _gpus(evaluator, container.get("extraOptions"), line)
    if gpus is not None:
        pairs.append((_scalar("gpus", gpus.start_mark.line + 1), gpus))
    mark = _mark(line)
    return yaml.MappingNode("tag:yaml.org,2002:map", pairs, mark, mark)


def _node(evaluator: Evaluator, value, line: int) -> yaml.Node | None:
    value = evaluator.force(value)
    if isinstance(value, list):
        items = [_node(evaluator, item, line) for item in value]
        return yaml.SequenceNode("tag:yaml.org,2002:seq", [i for i in items if i is not None], _mark(line), _mark(line))
    if isinstance(value, dict):
        pairs = [(_scalar(k, line), n) for k in sorted(value) if (n := _node(evaluator, value[k], line)) is not None]
        return yaml.MappingNode("tag:yaml.org,2002:map", pairs, _mark(line), _mark(line))
    if isinstance(value, Located) and value.value is not None:
        text = str(value.value).lower() if isinstance(value.value, bool) else str(value.value)
        return _scalar(text, value.line)
    if isinstance(value, Unknown):
        return _scalar("${" + value.text + "}", line)
    return None


def _gpus(evaluator: Evaluator, options, line: int) -> yaml.Node | None:
    """extraOptions' GPU request as Compose's `gpus:` device requests: a count, the device ids, or none for all."""
    words = [evaluator.force(o) for o in (evaluator.force(options) or [])] if isinstance(evaluator.force(options), list) else []
    for word in words:
        if not isinstance(word, Located) or not isinstance(word.value, str):
            continue
        match = GPU_OPTION.match(word.value.strip().strip("'\""))
        if match is None:
            continue
        given = (match.group("gpus") or match.group("ids") or "").strip("'\"")
        given = given.removeprefix("device=")
        if given == "all":
            return None
        request = [(_scalar("driver", word.line), _scalar("nvidia", word.line))]
        if given.isdigit() and match.group("gpus"):
            request.append((_scalar("count", word.line), _scalar(given, word.line)))
        else:
            ids = [_scalar(i, word.line) for i in given.split(",") if i]
            request.append((_scalar("device_ids", word.line),
                            yaml.SequenceNode("tag:yaml.org,2002:seq", ids, _mark(word.line), _mark(word.line))))
        device = yaml.MappingNode("tag:yaml.org,2002:map", request, _mark(word.line), _mark(word.line))
        return yaml.SequenceNode("tag:yaml.org,2002:seq", [device], _mark(word.line), _mark(word.line))
    return None


def _scalar(text: str, line: int) -> yaml.ScalarNode:
    return yaml.ScalarNode("tag:yaml.org,2002:str", text, _mark(line), _mark(line))


def _mark(line: int) -> yaml.Mark:
    return yaml.Mark("nix", 0, max(line, 1) - 1, 0, None, None)
