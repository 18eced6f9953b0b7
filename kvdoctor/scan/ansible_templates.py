"""An Ansible role's Jinja2 template of a file scan reads (`roles/vllm/templates/vllm.service.j2`, a Deployment's or
a Compose file's `.yaml.j2`, a script's `.sh.j2`): rendered with the role's own variables (defaults/main.yml, the
group_vars of the playbook and of each inventory it keeps, a host's host_vars, then vars/main.yml, as Ansible orders
them; once per inventory when there are several, and once per host whose host_vars set the role's variables), then read
as the file it becomes (`vllm.service`). A variable none of those sets (a play's) renders as a shell variable `${name}`:
unknown here, so what it decides stays undecided. Lines keep their numbers: a comment `{# ... #}` becomes as
many blank lines, and a block tag alone on its line leaves that line blank."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from kvdoctor.scan.documents import JINJA_SUFFIXES, JINJA_TEMPLATES, SCRIPT_SUFFIXES, ManifestError, SourceFile

COMMENT = re.compile(r"\{#.*?#\}", re.DOTALL)
BLOCK_LINE = re.compile(r"^[ \t]*\{%-?\s*(?:extends|block|if|for|set|include|macro|import)\b", re.MULTILINE)
EXTENDS = re.compile(r"\{%-?\s*extends\b[^%]*-?%\}")
"""A child template's parent (a job template's base_slurm.sh) is not rendered: its blocks render in place, on their
own lines."""
ROLE_VARIABLE_FILES = ("defaults/main.yml", "defaults/main.yaml", "vars/main.yml", "vars/main.yaml")


def is_template(source: SourceFile) -> bool:
    """A Jinja2 template whose rendered name scan reads (`vllm.service.j2`, `deploy.yaml.j2`, `serve.sh.j2`), or a
    script that is one under a script's name (a job template whose lines open with `{% block %}`, `{% if %}`)."""
    name = PurePosixPath(source.path).name
    return name.endswith(JINJA_TEMPLATES) or (name.endswith(SCRIPT_SUFFIXES) and BLOCK_LINE.search(source.text) is not None)


def rendered_name(path: str) -> str:
    """The path without its template suffix."""
    for suffix in JINJA_SUFFIXES:
        if path.endswith(suffix):
            return path[: -len(suffix)]
    return path


@dataclass(frozen=True)
class Rendering:
    source: SourceFile | ManifestError
    notes: list[str]
    inventory: str | None
    """The inventory whose group_vars it was rendered with, when the playbook keeps several (inventories/<env>/)."""
    host: str | None = None
    """The host whose host_vars it was rendered with (host_vars/<host>.yml sets the role's variables)."""


def renderings(source: SourceFile) -> list[Rendering]:
    """The template rendered once per inventory of its playbook (`inventories/<env>/group_vars`: each environment sets
    its own values, none is the default), or once when there is at most one."""
    inventories = _inventories(Path(source.path)) or [None]
    out = []
    for inventory in inventories:
        for host in _hosts(source, inventory) or [None]:
            try:
                rendered, why = render(source, inventory, host)
            except ManifestError as exc:
                rendered, why = exc, []
            out.append(Rendering(rendered, why, inventory.name if inventory is not None and len(inventories) > 1
                                 else None, _host_name(host) if host is not None else None))  # fmt: skip
    return out


def named_for(workload, rendering: Rendering):
    """A workload read from the rendering with one inventory's or host's values, named for them (each is its own)."""
    named = [(kind, value, files) for kind, value, files in (("inventory", rendering.inventory, "group_vars"),
                                                            ("host", rendering.host, "host_vars")) if value]
    if not named:
        return workload
    parts = ", ".join(f"{kind} {value}" for kind, value, _ in named)
    notes = tuple(f"rendered with {kind} {value}'s {files}" for kind, value, files in named)
    return replace(workload, name=f"{workload.name} ({parts})", notes=workload.notes + notes)


def render(source: SourceFile, inventory: Path | None = None, host: Path | None = None) -> tuple[SourceFile, list[str]]:
    """The template rendered as Ansible would with its role's variables (and ``inventory``'s group_vars; same path,
    so findings point into the template), and notes on where the values came from; raises ManifestError when
    Jinja2 refuses it."""
    import jinja2

    variables, read_from = _role_variables(Path(source.path), inventory, host)
    text = EXTENDS.sub("", COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), source.text))
    try:
        environment, variables = _ansible_environment(text, variables)
        try:  # each line marked with its number, so that a branch not taken does not move the lines after it
            rendered = _placed(environment.from_string(_marked(text)).render(variables), text.count("\n") + 1)
        except jinja2.TemplateSyntaxError:  # a tag that spans lines took a mark: rendered unmarked
            rendered = environment.from_string(text).render(variables)
    except jinja2.TemplateError as exc:
        raise ManifestError(f"{source.path}:{getattr(exc, 'lineno', None) or 1}: Jinja2 template not rendered "
                            f"({exc})") from None  # fmt: skip
    where = ", ".join(read_from) if read_from else "no role variables found beside it"
    unknown = ", ".join(kind for kind, given in (("inventory", inventory), ("play", None), ("host", host)) if given is None)
    return (SourceFile(source.path, rendered, source.data_of),
            [f"{source.path}: a Jinja2 template, rendered with its role's variables ({where}); variables set "
             f"elsewhere ({unknown}, the program that renders it) are unknown here"])


def render_values(node, path: Path, play_vars: dict[str, Any] | None = None) -> list[str]:
    """Each string value under `node` holding Jinja2 rendered in place with the role's variables (an Ansible task's
    parameters) and its play's `vars:` over them, so its line stays; the variable files read. A value Jinja2 refuses
    stays as written."""
    import jinja2

    strings = [n for n in _scalars(node) if "{{" in str(n.value) or "{%" in str(n.value)]
    if not strings:
        return []
    variables, read_from = _role_variables(path)
    variables.update(play_vars or {})
    try:
        environment, variables = _ansible_environment("\n".join(str(n.value) for n in strings), variables)
    except jinja2.TemplateError:
        return read_from
    for scalar in strings:
        try:
            scalar.value = environment.from_string(str(scalar.value)).render(variables)
        except jinja2.TemplateError:
            continue
    return read_from


def _ansible_environment(text: str, variables: dict[str, Any]):
    """A Jinja2 environment as Ansible renders `text` with (its filters and lookups; those it lacks passed through),
    and the variables templated against each other; raises jinja2.TemplateError."""
    import jinja2

    environment = jinja2.Environment(undefined=_shell_variable_class(), keep_trailing_newline=True, autoescape=False)
    environment.filters.update(bool=_ansible_bool, to_json=_to_json, quote=_quote, mandatory=lambda value: value)
    # Ansible's lookups read the controller (env, files, vault): unknown here
    environment.globals.update(lookup=_unknown_lookup, query=_unknown_lookup, q=_unknown_lookup)
    _stand_ins(environment, text, variables)
    return environment, _templated(environment, variables)


def _scalars(node):
    import yaml

    if isinstance(node, yaml.ScalarNode):
        yield node
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _scalars(item)
    elif isinstance(node, yaml.MappingNode):
        for _, value in node.value:
            yield from _scalars(value)


def _marked(text: str) -> str:
    return "\n".join(f"\x00{number}\x00{line}" for number, line in enumerate(text.split("\n")))


def _placed(rendered: str, count: int) -> str:
    """The rendered lines in their order, each on its template line while the template's order holds (blank lines
    where a branch was not taken); a loop's second pass and after follow on lines of their own (later lines move
    down). The parts of one rendered line stay one line (a loop within a line)."""
    out: list[str] = []
    for line in rendered.split("\n"):
        parts = re.findall(r"\x00(\d+)\x00([^\x00]*)", line)
        if not parts:
            continue
        at = min(int(parts[0][0]), count)
        out += [""] * max(0, at - len(out))
        out.append("".join(part for _, part in parts))
    return "\n".join(out)


MAX_PASSES = 5
"""Ansible templates a variable's value when it is used (`venv: "{{ home }}/venv"`); five passes settle any real chain."""


def _stand_ins(environment, text: str, variables: dict[str, Any]) -> None:
    """A filter or test Jinja2 lacks (Ansible's own: `comment`, `regex_replace`, `is version`) passes its value through
    (a test answers False), so that a template using one still renders; the values it would change stay as written."""
    import jinja2

    sources = [text] + [v for v in _strings(variables) if "{{" in v or "{%" in v]
    for source in sources:
        try:
            tree = environment.parse(source)
        except jinja2.TemplateSyntaxError:
            continue
        for node in tree.find_all(jinja2.nodes.Filter):
            environment.filters.setdefault(node.name, lambda value, *args, **kwargs: value)
        for node in tree.find_all(jinja2.nodes.Test):
            environment.tests.setdefault(node.name, lambda *args, **kwargs: False)


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _templated(environment, variables: dict[str, Any]) -> dict[str, Any]:
    """The variables with the templates in their values rendered against each other, as Ansible does when it uses
    them."""
    def render(value: Any, context: dict[str, Any]) -> Any:
        if isinstance(value, str) and ("{{" in value or "{%" in value):
            return environment.from_string(value).render(context)
        if isinstance(value, dict):
            return {key: render(item, context) for key, item in value.items()}
        if isinstance(value, list):
            return [render(item, context) for item in value]
        return value

    for _ in range(MAX_PASSES):
        rendered = {name: render(value, variables) for name, value in variables.items()}
        if rendered == variables:
            break
        variables = rendered
    return variables


def _role_of(template: Path) -> tuple[Path | None, Path | None]:
    """The role folder of a file in a role's templates/ or tasks/ folder, and the playbook folder holding roles/."""
    role = next((parent.parent for parent in template.parents if parent.name in ("templates", "tasks")), None)
    if role is None:
        return None, None
    return role, (role.parent.parent if role.parent.name == "roles" else None)


INVENTORY_FOLDERS = ("inventories", "inventory", "environments")
"""Where a playbook keeps one inventory per environment, each with its own group_vars (Ansible's documented layout)."""


def _inventories(template: Path) -> list[Path]:
    """The playbook's inventory folders that hold group_vars (`inventories/prod/group_vars/all.yml`), by name."""
    _, playbook = _role_of(template)
    if playbook is None:
        return []
    return sorted(folder for name in INVENTORY_FOLDERS if (playbook / name).is_dir()
                  for folder in (playbook / name).iterdir() if (folder / "group_vars").is_dir())


def _hosts(source: SourceFile, inventory: Path | None) -> list[Path]:
    """The host_vars of the playbook (or of ``inventory``) that set a variable the template or its role's defaults
    name (`host_vars/core.yml` with `vllm_instances: [...]`): each host renders its own file. A file per host or a
    folder per host (host_vars/<host>/*.yml), by host name."""
    role, playbook = _role_of(Path(source.path))
    if role is None:
        return []
    folders = [f / "host_vars" for f in (inventory, playbook) if f is not None and (f / "host_vars").is_dir()]
    if not folders:
        return []
    named = set(re.findall(r"[A-Za-z_]\w*", source.text))
    for defaults in (role / n for n in ROLE_VARIABLE_FILES[:2]):
        named |= set(_mapping(defaults) or {})
    hosts = {}
    for folder in folders:
        for entry in sorted(folder.iterdir()):
            if _host_name(entry) not in hosts and named & set(_host_variables(entry)):
                hosts[_host_name(entry)] = entry
    return [hosts[name] for name in sorted(hosts)]


def _host_name(entry: Path) -> str:
    """host_vars/gpu01.lab.yml -> gpu01.lab; a folder host_vars/gpu01.lab/ -> gpu01.lab."""
    return entry.name if entry.is_dir() else entry.stem


def _host_files(entry: Path) -> list[Path]:
    """A host's variables files: host_vars/<host>.yml, or the files of a folder host_vars/<host>/."""
    return _group_files(entry) if entry.is_dir() else [entry] if entry.suffix in (".yml", ".yaml") else []


def _host_variables(entry: Path) -> dict[str, Any]:
    variables: dict[str, Any] = {}
    for path in _host_files(entry):
        variables.update(_mapping(path) or {})
    return variables


def _mapping(path: Path) -> dict[str, Any] | None:
    """A variables file's mapping, or None when it cannot be read or holds no mapping."""
    from kvdoctor.base.yaml_safe import load_yaml

    try:
        loaded = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None


def _group_files(folder: Path) -> list[Path]:
    """A group_vars folder's files, group `all` first, then the other groups by name."""
    if not folder.is_dir():
        return []
    found = sorted(p for p in folder.rglob("*") if p.suffix in (".yml", ".yaml") and p.is_file())
    return sorted(found, key=lambda p: (p.relative_to(folder).parts[0].split(".")[0] != "all", str(p)))


def _role_variables(template: Path, inventory: Path | None = None, host: Path | None = None
                    ) -> tuple[dict[str, Any], list[str]]:
    """The role's defaults, the inventory's group_vars and then the playbook's over them (group `all` first, then the
    other groups by name), the host's host_vars, then the role's vars over those, as Ansible orders them, when the file
    lies in a role's templates/ or tasks/ folder."""
    role, playbook = _role_of(template)
    if role is None:
        return {}, []
    group_files = _group_files(inventory / "group_vars") if inventory is not None else []
    if playbook is not None:
        group_files += _group_files(playbook / "group_vars")
    host_files = _host_files(host) if host is not None else []
    paths = ([role / n for n in ROLE_VARIABLE_FILES[:2]] + group_files + host_files
             + [role / n for n in ROLE_VARIABLE_FILES[2:]])
    variables: dict[str, Any] = {}
    read_from = []
    for path in paths:
        loaded = _mapping(path)
        if loaded is not None:
            variables.update(loaded)
            read_from.append(str(path))
    return variables, read_from


def _unknown_lookup(plugin: str = "lookup", *terms: Any, **options: Any) -> str:
    return "${" + f"lookup_{plugin}_" + "_".join(str(t) for t in terms) + "}"


def _ansible_bool(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on", "y")


def _to_json(value: Any) -> str:
    import json

    return json.dumps(value)


def _quote(value: Any) -> str:
    import shlex

    return shlex.quote(str(value))


def _shell_variable_class():
    """jinja2's ChainableUndefined that renders as `${name}` (`| default(x)` still gives x; iterating it gives
    nothing; an order comparison is false, so a branch on a value set elsewhere is not taken), made on first use so
    that importing scan costs no jinja2 import."""
    import jinja2

    class ShellVariable(jinja2.ChainableUndefined):
        def __str__(self) -> str:
            return "${" + (self._undefined_name or "unknown") + "}"

        def __getattr__(self, name: str):  # job_config.gres stays named so: `${job_config.gres}`
            if name.startswith("__"):
                raise AttributeError(name)
            return ShellVariable(name=f"{self._undefined_name}.{name}")

        def __getitem__(self, key):
            return ShellVariable(name=f"{self._undefined_name}.{key}")

        def __call__(self, *args, **kwargs):  # `unknown.items()` in a loop: nothing to iterate
            return ShellVariable(name=f"{self._undefined_name}()")

        def _unknown_order(self, other) -> bool:  # `{% if TP > 1 %}` on a value set elsewhere: the branch not taken
            return False

        __lt__ = __le__ = __gt__ = __ge__ = _unknown_order

    return ShellVariable
