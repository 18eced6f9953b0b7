"""Interface drift: the exceptions Python raises where a caller and a callee written for different releases meet
(an unexpected keyword, a missing or extra argument, a missing attribute, name or submodule), read as
wrapper_api_mismatch when the interface is vLLM's or a vLLM plugin's.

Whose interface it is comes from what the log gives, in this order: the traceback's frames (raised inside another
library's code: not vLLM's; vLLM's code throughout reading its own object: a value, not an interface), then vLLM's
API history (a class or function vLLM releases define; for a missing member, one the history shows that class
having in other releases), then a name that carries vllm (a plugin, a framework's subclass of vLLM's engine). A
traceback that runs between vLLM's frames and a vLLM plugin's is their interface whatever the class.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from kvdoctor.explain.tracebacks import INSTALLED_PREFIX, PYTHON_OWN, Frame

# Python's wordings (3.8-3.13); `callee` is 'Cls.__init__', 'Cls.method', 'function' or a closure
# ('outer.<locals>.inner', a wrapper patched over the function the caller names)
_CALLEE = r"(?P<callee>[\w.]+(?:<locals>\.[\w.]+)*)\(\) "
SHAPES = (
    ("keyword", re.compile(_CALLEE + r"got (?:an unexpected keyword argument|multiple values for "
                           r"argument|some positional-only arguments passed as keyword arguments:) "
                           r"'(?P<member>\w[\w-]*)'")),  # a dashed key too: **{'tool-call-parser': ...}
    ("missing", re.compile(_CALLEE + r"missing \d+ required (?:positional |keyword-only )?arguments?: "
                           r"'(?P<member>\w+)'")),
    ("positional", re.compile(_CALLEE + r"takes (?:from \d+ to )?\d+ positional arguments? but \d+ "
                              r"(?:were|was) given")),
    ("attribute", re.compile(r"(?:type object '|')(?P<owner>[A-Za-z_]\w*)'(?: object)? has no attribute "
                             r"'(?P<member>\w+)'")),
    ("import", re.compile(r"cannot import name '(?P<member>\w+)' from '(?P<module>[\w.]+)'")),
    ("module_attribute", re.compile(r"module '(?P<module>[\w.]+)' has no attribute '(?P<member>\w+)'")),
    ("submodule", re.compile(r"No module named '(?P<module>[A-Za-z]\w*(?:\.\w+)+)'")),
    # a subclass (a plugin's platform, worker or attention backend) lacking a method a newer base class declares
    ("abstract", re.compile(r"Can't instantiate abstract class (?P<owner>\w+) with(?:out an implementation for)? "
                            r"abstract methods? '?(?P<member>\w+)'?")),
)
# a value that is missing or of another type, not an interface
_BUILTIN_OWNERS = frozenset({
    "NoneType", "str", "int", "float", "bool", "bytes", "dict", "list", "tuple", "set", "frozenset", "object", "type",
    "function", "method", "builtin_function_or_method", "property", "generator", "coroutine", "module", "cell",
})
# methods every framework's abstract classes declare: one of them missing says nothing about vLLM's interface
_GENERIC_METHODS = frozenset({"forward", "run", "main", "build", "__call__", "__iter__", "__len__", "__getitem__"})
_CARRIES_VLLM = re.compile(r"vllm", re.IGNORECASE)
_PLUGIN_CHECKOUT = re.compile(r"vllm_[a-z]\w*")  # a plugin's package in a source checkout (vllm-ascend/vllm_ascend/)
_LAYERS = "vllm.model_executor.layers."
_VENDORED = "vllm.third_party."  # other projects' code vLLM ships: not vLLM's interface
MAX_ALSO = 3


@dataclass(frozen=True)
class Drift:
    """One interface mismatch the log shows, and why the interface is vLLM's."""

    shape: str
    detail: str
    """The exception's own words."""
    values: dict[str, str]
    """owner / callee / member / module / plugin: the names the log gave."""
    caller: str
    """The caller's frame ('file:line in function') outside vLLM, '' when the log shows none."""


def read_drift(message: str, frames: tuple[Frame, ...], other_packages: frozenset[str]) -> Drift | None:
    """The interface mismatch a message states, when the interface is vLLM's or a vLLM plugin's; else None."""
    for shape, pattern in SHAPES:
        found = pattern.search(message)
        if found is None:
            continue
        values = {k: v for k, v in found.groupdict().items() if v}
        if "<locals>" in values.get("callee", ""):
            values.update(_closure(values["callee"], frames, other_packages))
        if values.get("callee", "").startswith("__") and "owner" not in values:
            values.update(_constructed(frames))  # Python < 3.10 names no class: '__init__() got ...'
        caller = _vllm_side(shape, values, frames, other_packages)
        return Drift(shape, found.group(0), values, caller) if caller is not None else None
    return None


def _vllm_side(shape: str, values: dict[str, str], frames: tuple[Frame, ...], other_packages: frozenset[str]
               ) -> str | None:
    """The caller's place ('' when the log shows none) when the interface is vLLM's or a vLLM plugin's, else None."""
    owner = values.get("owner") or _owner_of(values.get("callee", ""))
    if owner in _BUILTIN_OWNERS:
        return None
    sides = [(_side(f.file, other_packages), f) for f in frames if f.file and not f.file.startswith("<")]
    if sides and sides[-1][0] == "library":
        return None  # raised in another library's own code: its interface
    caller = next((_place(f) for side, f in reversed(sides) if side in ("program", "plugin")), "")
    if shape in ("import", "module_attribute", "submodule"):
        package = values["module"].split(".")[0]
        # vLLM's own modules: the API-history rules (cannot import name, module has no attribute) judge them,
        # with the release checks they need
        return caller if _CARRIES_VLLM.search(package) and package != "vllm" else None
    if shape == "abstract":  # the base class declaring the method is vLLM's when one of its classes has it
        vllms = values["member"] not in _GENERIC_METHODS and _vllm_classes_with(values["member"])
        return caller if vllms or _CARRIES_VLLM.search(owner) else None
    plugins = [_top(f.file) for side, f in sides if side == "plugin"]
    if plugins and any(side == "vllm" for side, _ in sides):
        values["plugin"] = plugins[-1]  # the traceback crosses between vLLM and a plugin: their interface
        return caller
    only_vllm = bool(sides) and all(side == "vllm" for side, _ in sides)
    known = _vllm_defines(owner)
    if shape in ("missing", "positional", "keyword") and sides and sides[-1][0] == "vllm" and not caller and known:
        return None  # vLLM's own code calling its own class, one release on both sides: what it was given, not drift
    if shape == "attribute":
        if known and not caller and not _member_came_or_went(known, values["member"]):
            return None  # a member no release of the class has (or every one has), read by vLLM's own code: a value
        if only_vllm and not _CARRIES_VLLM.search(owner):
            return None
    elif only_vllm and "." not in values.get("callee", "."):
        return None  # vLLM calling a bare function: torch's or another library's of the same name as well as its own
    return caller if known or _CARRIES_VLLM.search(owner or "") else None


def _closure(callee: str, frames: tuple[Frame, ...], other_packages: frozenset[str]) -> dict[str, str]:
    """A callee that is a closure ('wrapper_weights_iterator.<locals>._safetensors_weights_iterator') stands in for
    the function the innermost frame's code calls: a wrapper another package patched over vLLM's own (a decorator's
    inner function). {'callee': the name called there, 'wrapper': the closure, 'patcher': the packages outside vLLM
    and its plugins the traceback passes through}, the callee its last part when the code line names none."""
    code = (frames[-1].code if frames else None) or ""
    called = re.findall(r"([A-Za-z_][\w.]*)\($", code.rstrip())
    patchers = list(dict.fromkeys(_top(f.file) for f in frames if f.file and _side(f.file, other_packages) == "program"
                                  and _top(f.file)))  # fmt: skip
    out = {"callee": called[-1].split(".")[-1] if called else callee.split("<locals>.")[-1], "wrapper": callee}
    if patchers:
        out["patcher"] = ", ".join(patchers)
    return out


def _constructed(frames: tuple[Frame, ...]) -> dict[str, str]:
    """{'owner': the class the innermost frame's code line constructs} ('self.experts = FusedMoE(' -> FusedMoE), or {}."""
    code = frames[-1].code if frames else None
    called = re.findall(r"\b([A-Z]\w*)\(", code or "")
    return {"owner": called[-1]} if called else {}


def _owner_of(callee: str) -> str:
    """'FusedMoE.__init__' -> 'FusedMoE', 'Scheduler.schedule' -> 'Scheduler', 'init_app_state' -> itself."""
    parts = callee.split(".")
    return parts[-2] if len(parts) >= 2 else parts[0]


def _top(file: str, other_packages: frozenset[str] = frozenset()) -> str:
    """The installed package a frame's file belongs to ('' for a script or a checkout of another name)."""
    path = file.replace("\\", "/")
    installed = INSTALLED_PREFIX.sub("", path)
    if installed != path:
        return installed.split("/")[0]
    return next((part for part in path.split("/") if part == "vllm" or part in other_packages
                 or _PLUGIN_CHECKOUT.fullmatch(part)), "")


def _side(file: str, other_packages: frozenset[str]) -> str:
    """'vllm', 'plugin' (a package carrying vllm's name), 'library' (another library, the standard library) or
    'program' (anything else: a framework, a script, a plugin of another name)."""
    if PYTHON_OWN.search(file.replace("\\", "/")):
        return "library"
    top = _top(file, other_packages)
    if top == "vllm":
        return "vllm"
    if top in other_packages:
        return "library"
    return "plugin" if _CARRIES_VLLM.search(top) else "program"


def _place(frame: Frame) -> str:
    return f"{frame.file}:{frame.line}" + (f" in {frame.function}" if frame.function else "")


def _vllm_defines(name: str) -> str:
    """Where vLLM releases define the class or function `name` ('vllm.config.CacheConfig'), or ''. Public classes and
    functions have their own tables in the history; a layer class (whose members it does not keep) is one named after
    its vllm.model_executor.layers module (FusedMoE in fused_moe); a name vLLM only imports is neither."""
    from kvdoctor.explain.api_history import load_history

    if not name or not name[0].isalpha():
        return ""
    history = load_history()
    for section in ("members", "params"):
        owned = [q for q in history.owners_named(name, section) if not q.startswith(_VENDORED)]
        if owned:
            return f"`{owned[-1]}`"
    lowered = name.lower()
    for module in history.modules_with(name):
        last = module.rpartition(".")[2].replace("_", "")
        if module.startswith(_LAYERS) and len(last) >= 4 and last in lowered:
            return f"a layer class of `{module}`"
    return ""


def _vllm_classes_with(member: str) -> list[str]:
    """vLLM's classes (not its vendored code) that have the member `member` in some release."""
    from kvdoctor.explain.api_history import load_history

    return [q for q in load_history().owners_with("members", member) if not q.startswith(_VENDORED)]


def _member_came_or_went(known: str, member: str) -> bool:
    """Whether the history shows the class having `member` in some releases but not all."""
    from kvdoctor.explain.api_history import changed_member_owners, load_history

    if not known.startswith("`"):
        return True  # a layer class: the history keeps no members to check
    qualified = known.strip("`")
    short = qualified.rpartition(".")[2]
    owners = changed_member_owners(member)
    if any(q.rpartition(".")[2] == short for q in owners):
        return True
    return False if load_history().table("members", qualified) else True


def api_shape(drift: Drift) -> dict[str, str]:
    """The values in the shape explain/api_history.api_values reads: {cls, arg}, {cls, needed}, {module: class,
    name}, {module, name}, {module}; {} where it would say nothing true (a method's parameters are not kept)."""
    values = drift.values
    callee = values.get("callee", "")
    constructor = callee.endswith(".__init__") or "." not in callee
    cls = values["owner"] if callee == "__init__" and values.get("owner") else callee.removesuffix(".__init__")
    if drift.shape == "keyword" and constructor and not cls.startswith("__"):
        return {"cls": cls, "arg": values["member"]}
    if drift.shape == "missing" and constructor and not cls.startswith("__"):
        return {"cls": cls, "needed": values["member"]}
    if drift.shape == "attribute":
        return {"module": values["owner"], "name": values["member"]}
    if drift.shape in ("import", "module_attribute"):
        return {"module": values["module"], "name": values["member"]}
    if drift.shape == "submodule":
        return {"module": values["module"]}
    return {}


def _elsewhere(member: str, owner: str) -> str:
    """For a class that is not vLLM's: the vLLM classes that have `member` in some releases ('' when none)."""
    from kvdoctor.explain.api_history import changed_member_owners, describe, detail_ranges

    owners = [q for q in changed_member_owners(member) if q.rpartition(".")[2] != owner][-2:]
    return "; ".join(f"`{q}` has `{member}` {describe(detail_ranges('members', q, member))}" for q in owners)


def all_drifts(texts: Iterable[tuple[str, tuple[Frame, ...]]], other_packages: frozenset[str]) -> list[Drift]:
    """Every distinct interface mismatch among the messages, in log order."""
    found: dict[str, Drift] = {}
    for message, frames in texts:
        drift = read_drift(message, frames, other_packages)
        if drift is not None and drift.detail not in found:
            found[drift.detail] = drift
    return list(found.values())


def match_values(first: Drift, others: list[Drift]) -> tuple[tuple[str, str], ...]:
    """What the log gave, as the rule's match values: the mismatch's words and names, the caller's frame, the other
    mismatches it shows."""
    values = {"detail": first.detail, **first.values}
    if first.caller:
        values["caller"] = first.caller
    rest = [d.detail for d in others if d.detail != first.detail][:MAX_ALSO]
    if rest:
        values["also_seen"] = "; ".join(f"`{d}`" for d in rest)
    return tuple(values.items())


def drift_texts(values: dict[str, Any], facts: dict[str, Any]) -> dict[str, str]:
    """`sides` (which side of the interface is whose), `api_text` / `api_fix` (the releases that have the name, from
    the API history) and `also` for the interface-drift rule's cause, from its match values; {} for another rule's."""
    from kvdoctor.explain.api_history import api_values

    detail = str(values.get("detail") or "")
    shape = next((name for name, pattern in SHAPES if pattern.fullmatch(detail)), None)
    if shape is None:
        return {}
    drift = Drift(shape, detail, {k: str(v) for k, v in values.items()
                                  if k in ("owner", "callee", "member", "module", "plugin", "wrapper", "patcher")},
                  str(values.get("caller") or ""))
    out = {"sides": _sides(drift)}
    owner = drift.values.get("owner") or _owner_of(drift.values.get("callee", ""))
    known = _vllm_defines(owner) if shape not in ("import", "module_attribute", "submodule") else ""
    if shape == "abstract":
        from kvdoctor.explain.api_history import describe, detail_ranges

        member = drift.values["member"]
        having = _vllm_classes_with(member)[-2:]
        if having:
            out["api_text"] = " In the vLLM releases read, " + "; ".join(
                f"`{q}` has `{member}` {describe(detail_ranges('members', q, member))}" for q in having) + "."
    elif known and not known.startswith("`"):
        out["api_text"] = (f" kvdoctor's API history keeps vLLM's layer classes by name only, not their parameters "
                           f"or members: it cannot say which releases have `{drift.values.get('member', '')}`.")
    else:
        api = api_values(api_shape(drift), facts)
        if shape == "attribute" and not known:
            found = _elsewhere(drift.values["member"], owner)
            api["api_text"] = f" `{owner}` is not a class of vLLM's own" + (
                f"; in the vLLM releases read, {found}." if found else ".")
        out.update({k: v for k, v in api.items() if k in ("api_text", "api_fix")})
    if values.get("also_seen"):
        out["also"] = f" The log shows more of the same: {values['also_seen']}."
    return out


def _sides(drift: Drift) -> str:
    """Which side of the interface is vLLM's and which the caller's, in the log's names."""
    values = drift.values
    caller = f" The caller is {drift.caller}, outside vLLM." if drift.caller else ""
    if drift.shape in ("import", "module_attribute", "submodule"):
        return f" `{values['module']}` is a module of the vLLM plugin `{values['module'].split('.')[0]}`.{caller}"
    if values.get("wrapper"):
        by = f" (the traceback passes through `{values['patcher']}`)" if values.get("patcher") else ""
        return (f" vLLM's code calls `{values['callee']}`, but what ran is `{values['wrapper']}`: a wrapper another "
                f"package put in place of vLLM's function{by}, written for another release's signature.")
    owner = values.get("owner") or _owner_of(values.get("callee", ""))
    known = _vllm_defines(owner)
    if values.get("plugin") and not known and not _CARRIES_VLLM.search(owner):
        return (f" The traceback runs between vLLM's code and the vLLM plugin `{values['plugin']}`: `{owner}` is on "
                f"their interface.{caller}")
    if drift.shape == "abstract":
        return (f" `{owner}` (a subclass the program or a plugin defines) lacks `{values['member']}`, a method its base "
                f"class in vLLM declares abstract in the installed release.{caller}")
    role = "The object's class" if drift.shape == "attribute" else "The callee's class" if "." in values.get(
        "callee", "") else "The callee"
    whose = (f"is vLLM's ({known} in kvdoctor's API history)" if known else
             "carries vLLM's name (a plugin's or a framework's class built on vLLM's)")
    return f" {role}, `{owner}`, {whose}.{caller}"
