"""Pulumi programs in TypeScript or JavaScript that declare Kubernetes workloads with @pulumi/kubernetes:
`new k8s.apps.v1.Deployment("vllm", { spec: { template: { spec: { containers: [{ image, args }] } } } })` (the
import's name is the program's). The resource's arguments, an object literal, are the Kubernetes object's own fields:
read as data, each value on its line, with the program's `const NAME = "literal"` declarations put in (in a template
string too); a value computed by code is left out. The object is then read as the Kubernetes object Pulumi creates:
apiVersion and kind from the class, metadata.name the resource's name when the literal gives none (Pulumi adds a
random suffix to it)."""

from __future__ import annotations

import re

import yaml

from kvdoctor.scan.documents import Document, ReadDocument, SourceFile
from kvdoctor.scan.js_literals import OPENERS, expression_end, key_name, read_tokens, scalar
from kvdoctor.scan.workload import Workload

# @pulumi/kubernetes's classes of workload objects: <group>.<version>.<Kind>
RESOURCE = re.compile(r"(?:^|\.)(apps|core|batch)\.(v1)\.(Deployment|StatefulSet|DaemonSet|ReplicaSet|Pod|Job|CronJob)$")
_API = {"apps": "apps/v1", "core": "v1", "batch": "batch/v1"}
_STRING = "tag:yaml.org,2002:str"
_DECLARATION = ("const", "let", "var")
_TEMPLATE_VARIABLE = re.compile(r"\$\{\s*([A-Za-z_$][\w$]*)\s*\}")


def declares_kubernetes(source: SourceFile) -> bool:
    """A program that creates a @pulumi/kubernetes workload object (cheap test before the tokens)."""
    return "new " in source.text and re.search(r"\.v1\.(?:Deployment|StatefulSet|DaemonSet|ReplicaSet|Pod|Job|CronJob)"
                                               r"\s*\(", source.text) is not None  # fmt: skip


def workloads(source: SourceFile, read_document: ReadDocument) -> list[Workload]:
    """The vLLM workloads of the program's Kubernetes objects."""
    tokens = read_tokens(source.text)
    constants = _constants(tokens)
    found: list[Workload] = []
    for index in range(len(tokens) - 4):
        if tokens[index][0] != "new" or tokens[index + 2][0] != "(":
            continue
        resource = RESOURCE.search(tokens[index + 1][0])
        if resource is None:
            continue
        name, after = _node(tokens, index + 3, constants)
        if after + 1 >= len(tokens) or tokens[after][0] != "," or tokens[after + 1][0] != "{":
            continue  # a call cut short at the file's end, or arguments that are no literal
        fields, _ = _node(tokens, after + 1, constants)
        if not isinstance(fields, yaml.MappingNode):
            continue
        group, version, kind = resource.groups()
        at = tokens[index][1]
        head = [(_scalar("apiVersion", at), _scalar(_API[group] if group != "core" else version, at)),
                (_scalar("kind", at), _scalar(kind, at))]
        pairs = list(fields.value)
        if isinstance(name, yaml.ScalarNode) and not any(k.value == "metadata" for k, _ in pairs):
            pairs.insert(0, (_scalar("metadata", at), _mapping([(_scalar("name", at), name)], at)))
        found += read_document(Document(source.path, 0, _mapping(head + pairs, at)), source.text)
    return found


def _constants(tokens: list[tuple[str, int]]) -> dict[str, str]:
    """`const NAME = "literal"` (let, var; a number too) at any depth: the names whose value the program states."""
    found: dict[str, str] = {}
    for index in range(len(tokens) - 4):
        if tokens[index][0] in _DECLARATION and tokens[index + 2][0] == "=":
            value = tokens[index + 3][0]
            ends = tokens[index + 4][0] == ";" or tokens[index + 4][1] != tokens[index + 3][1]
            text = _literal(value, found)
            if ends and text is not None:
                found[tokens[index + 1][0]] = text
    return found


def _literal(text: str, constants: dict[str, str]) -> str | None:
    """A string or number literal's value (a template string's ${NAME} put in from ``constants``), else None."""
    if text[:1] == "`" and len(text) > 1:
        body = text[1:-1]
        missing = [n for n in _TEMPLATE_VARIABLE.findall(body) if n not in constants]
        return None if missing else _TEMPLATE_VARIABLE.sub(lambda m: constants[m.group(1)], body)
    value = scalar(text)
    return value if isinstance(value, str) else None


def _node(tokens: list[tuple[str, int]], index: int, constants: dict[str, str]) -> tuple[yaml.Node | None, int]:
    """The expression at ``index`` as a YAML node on its line (None for one that code computes), and the index
    after it."""
    text, line = tokens[index]
    if text == "{":
        pairs: list[tuple[yaml.Node, yaml.Node]] = []
        index += 1
        while index < len(tokens) and tokens[index][0] != "}":
            if index + 1 < len(tokens) and tokens[index + 1][0] == ":":
                key = _scalar(key_name(tokens[index][0]), tokens[index][1])
                value, index = _node(tokens, index + 2, constants)
                if value is not None:
                    pairs.append((key, value))
            else:
                index = expression_end(tokens, index)  # a spread, a shorthand or a method: not data
            if index < len(tokens) and tokens[index][0] == ",":
                index += 1
        return _mapping(pairs, line), index + 1
    if text == "[":
        items: list[yaml.Node] = []
        index += 1
        while index < len(tokens) and tokens[index][0] != "]":
            value, index = _node(tokens, index, constants)
            if value is not None:
                items.append(value)
            if index < len(tokens) and tokens[index][0] == ",":
                index += 1
        return yaml.SequenceNode("tag:yaml.org,2002:seq", items, _mark(line), _mark(line)), index + 1
    end = expression_end(tokens, index)
    if end != index + 1 or text in OPENERS:
        return None, end
    value = _literal(text, constants)
    if value is None and text in constants:
        value = constants[text]
    if value is None and text in ("true", "false"):
        return yaml.ScalarNode("tag:yaml.org,2002:bool", text, _mark(line), _mark(line)), end
    if re.fullmatch(r"-?\d+", text):
        return yaml.ScalarNode("tag:yaml.org,2002:int", text, _mark(line), _mark(line)), end
    return (_scalar(value, line) if value is not None else None), end


def _mark(line: int) -> yaml.Mark:
    return yaml.Mark("<pulumi>", 0, line - 1, 0, None, None)


def _scalar(text: str, line: int) -> yaml.ScalarNode:
    return yaml.ScalarNode(_STRING, text, _mark(line), _mark(line))


def _mapping(pairs: list[tuple[yaml.Node, yaml.Node]], line: int) -> yaml.MappingNode:
    return yaml.MappingNode("tag:yaml.org,2002:map", pairs, _mark(line), _mark(line))
