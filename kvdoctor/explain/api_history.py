"""Which vLLM releases have the module, name, class member or parameter a program on top of vLLM asked for
(data/api_history.json.gz, built by kvdoctor/builders/api_history), said as a cause clause and a fix.

Loaded only when a line of the wrapper_api_mismatch shapes is found: explain on other logs never reads it.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from kvdoctor.base.versions import pep440_order
from kvdoctor.data import DATA_DIR
from kvdoctor.explain.api_history_store import StoredHistory

HISTORY_FILE = DATA_DIR / "api_history.json.gz"
MAX_PLACES = 2  # a name in more modules than this: the newest ones are named
MAX_BASES = 3  # how far up a class's bases a field is looked for


@lru_cache(maxsize=1)
def load_history() -> StoredHistory:
    """The stored history (its tables parsed when asked for)."""
    return StoredHistory(HISTORY_FILE)


def _ranges(section: str, owner: str, name: str, owner_ranges: list | None) -> list | None:
    value = (load_history().table(section, owner) or {}).get(name)
    if value is None:
        return None
    return owner_ranges if value == 0 else value


def module_ranges(module: str) -> list | None:
    return load_history().modules.get(module)


def name_ranges(module: str, name: str) -> list | None:
    return _ranges("names", module, name, module_ranges(module))


def owner_ranges(qualified: str) -> list | None:
    module, _, short = qualified.rpartition(".")
    return name_ranges(module, short)


def detail_ranges(kind: str, qualified: str, name: str, depth: int = 0) -> list | None:
    """Ranges of a class member (kind 'members') or a callable's parameter (kind 'params'), a base class's
    counted while the class exists (AsyncEngineArgs takes EngineArgs' fields)."""
    own_class = owner_ranges(qualified)
    found = _ranges(kind, qualified, name, own_class)
    if depth < MAX_BASES:
        module = qualified.rpartition(".")[0]
        for base in load_history().table("bases", qualified) or ():
            places = qualified_names(base, kind)
            for place in [p for p in places if p.rpartition(".")[0] == module] or places:
                if place != qualified:
                    found = merge(found, _within(detail_ranges(kind, place, name, depth + 1), own_class))
    return found


def _within(ranges: list | None, limits: list | None) -> list | None:
    """The part of `ranges` inside `limits`."""
    if not ranges or not limits:
        return None
    inside = _releases_in(ranges) & _releases_in(limits)
    return merge([[r, r] for r in load_history().releases if r in inside], None)


def _releases_in(ranges: list) -> set[str]:
    order = load_history().releases
    return {r for low, high in ranges for r in order[order.index(low):order.index(high) + 1]}


def qualified_names(short: str, kind: str) -> list[str]:
    """The qualified classes or functions named `short` that the history keeps `kind` of, newest last."""
    return sorted(load_history().owners_named(short, kind), key=lambda q: (_last_index(owner_ranges(q)), q))


def changed_member_owners(name: str) -> list[str]:
    """vLLM's classes that have the member `name` in some releases but not in all (an API that came or went), newest
    last; none when no class has it or it never changed."""
    every = set(load_history().releases)
    owners = [q for q in load_history().owners_with("members", name)
              if (ranges := detail_ranges("members", q, name)) and _releases_in(ranges) != every]
    return sorted(owners, key=lambda q: (_last_index(detail_ranges("members", q, name)), q))


def modules_with(name: str, near: str = "") -> list[str]:
    """The modules that have a top-level `name` in some release, most likely home last: those sharing more of
    `near`'s package path (vllm.utils -> vllm.utils.argparse_utils), then those holding it latest."""
    def rank(module: str) -> tuple:
        shared = 0
        for mine, theirs in zip(near.split("."), module.split(".")):
            if mine != theirs:
                break
            shared += 1
        return shared, _last_index(name_ranges(module, name)), -module.count("."), module

    return sorted(load_history().modules_with(name), key=rank)


def merge(first: list | None, second: list | None) -> list | None:
    """The union of two range lists (over the history's releases), as runs."""
    if not first and not second:
        return None
    order = load_history().releases
    present = _releases_in((first or []) + (second or []))
    runs: list[list[str]] = []
    for i, release in enumerate(order):
        if release in present:
            if runs and runs[-1][1] == order[i - 1]:
                runs[-1][1] = release
            else:
                runs.append([release, release])
    return runs


def _last_index(ranges: list | None) -> int:
    return load_history().releases.index(ranges[-1][1]) if ranges else -1


def describe(ranges: list) -> str:
    """'0.4.3-0.11.2 (removed in 0.12.0)', 'from 0.8.3 on', 'in every release read (0.4.3-0.34.0)'."""
    history = load_history()
    order = history.releases
    first, last = order[0], order[-1]
    parts = []
    for low, high in ranges:
        if low == first and high == last:
            return f"in every release read ({first}-{last})"
        span = low if low == high else f"{low}-{high}"
        if high == last:
            parts.append(f"from {low} on")
        elif history.header.get("complete"):
            parts.append(f"in {span} (removed in {order[order.index(high) + 1]})")
        else:  # the releases between two wheels read were not: the change is somewhere between
            parts.append(f"in {span} (gone by {order[order.index(high) + 1]}, removed in a release between)")
    return ", ".join(parts)


def install_spec(ranges: list) -> str:
    """A pip requirement true to the newest range: 'vllm>=0.8.3', 'vllm>=0.4.3,<0.12.0', 'vllm==0.9.2'."""
    order = load_history().releases
    low, high = ranges[-1]
    if high == order[-1]:
        return f"vllm>={low}"
    if low == high:
        return f"vllm=={low}"
    if not load_history().header.get("complete"):  # the releases after `high` were not read: no claim about them
        return f"vllm>={low},<={high}"
    return f"vllm>={low},<{order[order.index(high) + 1]}"


def side_of(version: str | None, ranges: list) -> str:
    """Where the log's vLLM stands against the ranges: a clause, '' when the log names no release."""
    if not version:
        return ""
    release = version.split("+")[0]
    key = pep440_order(release)
    for low, high in ranges:
        if pep440_order(low) <= key <= pep440_order(high):
            return (f" The log's vLLM {release} is inside that range, so the name is there: the program reached "
                    f"another vLLM than the one it logged (a second install on the path) or a name it patched in.")
    if key < pep440_order(ranges[0][0]):
        return f" The log's vLLM {release} is older: upgrade vLLM, or use a program release made for {release}."
    if key > pep440_order(ranges[-1][1]):
        return f" The log's vLLM {release} is newer: the program was written for an older vLLM."
    return f" The log's vLLM {release} falls in a gap between those releases."


def api_values(values: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """`api_text` (a cause clause: the releases that have what the line asked for, and where the log's vLLM is)
    and `api_fix` (the vLLM to install, or that no release has it) for a wrapper_api_mismatch line:
    {module, name} (an import or module attribute), {module: a class, name} (an instance attribute),
    {cls, arg} (a keyword), {module} alone (an import of a whole module)."""
    module, name = values.get("module"), values.get("name")
    if "unrecognized arguments" in str(values.get("detail") or ""):
        return _flags(str(values["detail"]), facts)
    if values.get("cls") and values.get("arg"):
        return _detail("params", str(values["cls"]), str(values["arg"]), "takes", facts)
    if values.get("cls") and values.get("needed"):
        return _needed(str(values["cls"]), str(values["needed"]), facts)
    if module and str(module).split(".")[0] != "vllm" and str(module).startswith("vllm"):
        return {}  # a plugin's module (vllm_ascend.x): the history holds vLLM's own releases only
    if module and name and not str(module).startswith("vllm"):
        return _detail("members", str(module), str(name), "has", facts)
    if module and name:
        return _name(str(module), str(name), facts)
    if module:
        return _module(str(module), facts)
    return {}


def _found(subject: str, ranges: list, facts: dict[str, Any]) -> dict[str, Any]:
    spec = install_spec(ranges)
    return {"api_text": f" vLLM has {subject} {describe(ranges)}.{side_of(facts.get('vllm.version'), ranges)}",
            "api_fix": f"Install a vLLM release that has it: pip install '{spec}' (or the program's release made "
                       f"for the vLLM you have)",
            "api_spec": spec}


def _nowhere(subject: str, name: str) -> dict[str, Any]:
    order = load_history().releases
    return {"api_text": f" No vLLM release read ({order[0]}-{order[-1]}, {len(order)} releases) has {subject}: "
                        f"the program patches it in itself, misspells it, or needs a vLLM newer than {order[-1]}.",
            "api_fix": f"Check the program's own vLLM patches and its spelling of `{name}`: no vLLM release "
                       f"{order[0]}-{order[-1]} has it"}


def _name(module: str, name: str, facts: dict[str, Any]) -> dict[str, Any]:
    ranges = name_ranges(module, name)
    elsewhere = [m for m in modules_with(name, near=module) if m != module][-MAX_PLACES:]
    lazy = name_ranges(module, "__getattr__")
    lazy_text = (f" `{module}` also resolves names at run time (a module __getattr__) {describe(lazy)}, so those "
                 f"releases may still give `{name}` (often with a deprecation warning)." if lazy else "")
    if ranges:
        out = _found(f"`{name}` in `{module}`", ranges, facts)
        moved = [m for m in elsewhere if _last_index(name_ranges(m, name)) > _last_index(ranges)]
        if moved:
            newest = moved[-1]
            out["api_text"] += f" It moved: `{newest}` has it {describe(name_ranges(newest, name))}."
            out["api_fix"] = (f"Import {name} from {newest} (vLLM {describe(name_ranges(newest, name))}), or pin the "
                              f"vLLM the program was written for: pip install '{out['api_spec']}'")
        out["api_text"] += lazy_text
        return out
    if not elsewhere:
        out = _nowhere(f"`{name}`", name)
        if module_ranges(module) is None:
            out["api_text"] += f" Nor does any have a module `{module}`."
        return out
    newest = elsewhere[-1]
    where = "; ".join(f"`{m}` has it {describe(name_ranges(m, name))}" for m in reversed(elsewhere))
    held = module_ranges(module)
    own = f"`{module}` never has `{name}`" if held else f"no release has a module `{module}`"
    side = side_of(facts.get("vllm.version"), name_ranges(newest, name))
    return {"api_text": f" In the vLLM releases read, {own}; {where}.{side}{lazy_text}",
            "api_fix": f"Import {name} from {newest} (vLLM {describe(name_ranges(newest, name))}), or keep the "
                       f"import and run pip install '{install_spec(name_ranges(newest, name))}'",
            "api_spec": install_spec(name_ranges(newest, name))}


def _module(module: str, facts: dict[str, Any]) -> dict[str, Any]:
    ranges = module_ranges(module)
    order = load_history().releases
    if ranges == [[order[0], order[-1]]]:  # every release read has it: an older vLLM, or not vLLM's package
        out = _found(f"the module `{module}`", ranges, facts)
        out["api_text"] += (f" So the vLLM this program imports is older than {order[0]} (the oldest release read), "
                            "or is not the installed package (a directory or file named vllm on the path shadows it).")
        out["api_fix"] = ("Upgrade vLLM (pip install -U vllm, or the release the program pins), and check that "
                          "`python -c 'import vllm; print(vllm.__file__, vllm.__version__)'` is the installed package")
        return out
    if ranges:
        return _found(f"the module `{module}`", ranges, facts)
    last = module.rpartition(".")[2]
    similar = sorted(m for m in load_history().modules if m.rpartition(".")[2] == last)[-MAX_PLACES:]
    out = _nowhere(f"a module `{module}`", module)
    if similar:
        out["api_text"] += " Modules of that name: " + ", ".join(
            f"`{m}` {describe(module_ranges(m))}" for m in similar) + "."
    return out


def _detail(kind: str, short: str, name: str, verb: str, facts: dict[str, Any]) -> dict[str, Any]:
    """A member (kind 'members') or keyword (kind 'params') of the classes or functions named `short`."""
    owners = qualified_names(short.rpartition(".")[2], kind)
    if not owners:
        return {"api_text": f" kvdoctor's API history keeps no vLLM class or function named {short}: it is the "
                            f"program's own (or a model's or kernel's, whose members the history does not keep)."}
    having = [(q, detail_ranges(kind, q, name)) for q in owners]
    found = [(q, r) for q, r in having if r]
    if not found:
        listed = ", ".join(f"`{q}` ({describe(owner_ranges(q))})" for q in owners[-MAX_PLACES:])
        return _nowhere(f"`{name}` on {listed}", name)
    clauses = [f"`{q}` {verb} `{name}` {describe(r)}" for q, r in found[-MAX_PLACES:]]
    lacking = [q for q, r in having if not r][-1:]
    clauses += [f"`{q}` never does" for q in lacking]
    newest = found[-1][1]
    spec = install_spec(newest)
    return {"api_text": f" In the vLLM releases read, {'; '.join(clauses)}.{side_of(facts.get('vllm.version'), newest)}",
            "api_fix": f"Install a vLLM release that has it: pip install '{spec}' (or the program's release made "
                       f"for the vLLM you have)",
            "api_spec": spec}


def _needed(short: str, needed: str, facts: dict[str, Any]) -> dict[str, Any]:
    """A parameter the program did not pass: the releases whose callable takes it, and those that do not."""
    out = _detail("params", short, needed, "takes", facts)
    owners = [q for q in qualified_names(short.rpartition(".")[2], "params") if detail_ranges("params", q, needed)]
    if not owners:
        return out
    newest = owners[-1]
    having = _releases_in(detail_ranges("params", newest, needed))
    without = [r for r in load_history().releases if r in _releases_in(owner_ranges(newest) or []) - having]
    out.pop("api_spec", None)
    out["api_fix"] = (f"Install the program's release made for this vLLM (it passes `{needed}`)"
                      + (f", or a vLLM whose {newest.rpartition('.')[2]} does not need it: "
                         f"{_spans(merge([[r, r] for r in without], None))}" if without else ""))
    return out


def _spans(ranges: list) -> str:
    """'0.6.2-0.8.4, 0.11.1-0.34.0': the ranges plainly."""
    return ", ".join(low if low == high else f"{low}-{high}" for low, high in ranges)


def no_release_mismatch(values: dict[str, Any], facts: dict[str, Any], frame_files: tuple[str, ...] = ()) -> bool:
    """Whether a line that says a vLLM module (or a module's name) is missing has a cause other than the release:
    vLLM's own code made the failed import (its innermost frame is in vllm/: a broken or shadowed install), or the
    log's vLLM release has it, or every release read does (a circular import); wrapper_api_mismatch then does not
    claim it."""
    module, name = str(values.get("module") or ""), values.get("name")
    if not module.startswith("vllm") or values.get("cls"):
        return False
    own = [f for f in frame_files if not f.startswith("<")]
    if own and re.search(r"(?:^|[/\\])vllm[/\\]", own[-1]):
        return True
    ranges = name_ranges(module, str(name)) if name else module_ranges(module)
    if not ranges:
        return False
    order = load_history().releases
    if ranges == [[order[0], order[-1]]] and name:  # every release has the name: a circular import
        return True
    version = str(facts.get("vllm.version") or "").split("+")[0]
    return bool(version) and version in _releases_in(ranges)


# the dataclasses `vllm serve` makes its flags from (EngineArgs.add_cli_args, FrontendArgs): --x-y is field x_y
SERVE_ARGS_CLASSES = re.compile(r"\.(?:Async)?EngineArgs$|\.(?:Base)?FrontendArgs$")
MAX_FLAGS = 3


def _flags(detail: str, facts: dict[str, Any]) -> dict[str, Any]:
    """`unrecognized arguments: --a --b`: the releases whose serve arguments have each flag's field."""
    clauses, specs = [], []
    for flag in re.findall(r"(?<![\w-])--([a-z0-9][\w-]*)", detail)[:MAX_FLAGS]:
        field = flag.replace("-", "_")
        owners = [q for q in load_history().owners_with("params", field) if SERVE_ARGS_CLASSES.search(q)]
        found = merge(None, None)
        for owner in owners:
            found = merge(found, detail_ranges("params", owner, field))
        if found:
            clauses.append(f"`--{flag}` (the serve arguments' field {field}) exists {describe(found)}"
                           + side_of(facts.get("vllm.version"), found).replace(" The log's", "; the log's").rstrip("."))
            specs.append(install_spec(found))
        else:
            clauses.append(f"no release read has a serve-argument field {field} for `--{flag}` (EngineArgs and "
                           f"FrontendArgs; flags older releases add by hand are not read)")
    if not clauses:
        return {}
    out: dict[str, Any] = {"api_text": " In the vLLM releases read, " + "; ".join(clauses) + "."}
    if len(set(specs)) == 1:
        out["api_fix"] = (f"Drop or rename the flag, or install a vLLM release that has it: pip install '{specs[0]}'")
    return out
