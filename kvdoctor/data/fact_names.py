"""The fact-name registry (data/fact_names.yaml): every fact a rule may test, what produces it, what it is derived
from, and how a user supplies it when it is unknown."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data


@dataclass(frozen=True)
class FactName:
    """One declared fact."""

    name: str
    """Dotted name, as rules write it: 'attention.backend'."""
    about: str
    """One-line description."""
    produced_by: str
    """The step that produces it: 'probes', 'release', 'kv_dtypes', 'serve_args', 'attention', 'runner', 'dryrun',
    'deploy'."""
    scope: str
    """'check' (any rules file may test it) or 'scan' (only the scan rules, which judge manifests)."""
    derived_from: tuple[str, ...] = ()
    """Facts it is computed from: an unknown one is supplied by supplying its unknown inputs."""
    unknown_why: str | None = None
    """A fact whose value says why this one is unknown for the judged release (what kvdoctor did not read of it)."""


@dataclass(frozen=True)
class OpenNamespace:
    """A namespace whose names are open-ended (env.<VLLM_* variable>)."""

    prefix: str
    about: str
    listed_as: str


@dataclass(frozen=True)
class FactRegistry:
    """data/fact_names.yaml, read."""

    facts: Mapping[str, FactName]
    """name -> its declaration, in declaration order."""
    open_namespaces: tuple[OpenNamespace, ...]
    hints: Mapping[str, str]
    """namespace -> how a user supplies an unknown fact of it."""
    hints_once_read: Mapping[str, tuple[str, str]]
    """namespace -> (the fact naming its source, the hint once that source was read and did not say)."""
    default_hint: str

    def get(self, name: str) -> FactName | None:
        """The declared fact of that name, or None (open names included)."""
        return self.facts.get(name)

    def names(self, *, produced_by: str | None = None, scope: str = "check") -> tuple[str, ...]:
        """Declared names in declaration order: those a `scope` rules file may test, or those one step produces."""
        if produced_by is not None:
            return tuple(f.name for f in self.facts.values() if f.produced_by == produced_by)
        scopes = ("check", "scan") if scope == "scan" else ("check",)
        return tuple(f.name for f in self.facts.values() if f.scope in scopes)

    def is_declared(self, name: str, scope: str = "check") -> bool:
        """Whether a rules file of `scope` may test `name` (open namespaces take any name after their dot)."""
        declared = self.get(name)
        if declared is not None:
            return declared.scope == "check" or scope == "scan"
        return any(name.startswith(f"{o.prefix}.") and len(name) > len(o.prefix) + 1 for o in self.open_namespaces)

    def namespace_hint(self, name: str, facts: Mapping[str, Any]) -> str:
        """How to supply `name` by its namespace; once its source was read, why that source did not say."""
        namespace = name.split(".", 1)[0]
        once_read = self.hints_once_read.get(namespace)
        if once_read and name.startswith(f"{namespace}.") and facts.get(once_read[0]) not in (None, "none"):
            return once_read[1]
        if "." in name and namespace in self.hints:
            return self.hints[namespace]
        return self.default_hint


@lru_cache(maxsize=1)
def fact_registry() -> FactRegistry:
    """The bundled registry, read once."""
    raw = load_yaml_cached(read_data("fact_names.yaml"), "fact_names.yaml")
    facts = []
    for group_name, group in raw["groups"].items():
        for name, entry in group["facts"].items():
            entry = entry if isinstance(entry, dict) else {"about": entry}
            facts.append(FactName(name=name, about=entry["about"], produced_by=group_name, scope=group["scope"],
                                  derived_from=tuple(entry.get("derived_from") or ()),
                                  unknown_why=entry.get("unknown_why")))  # fmt: skip
    return FactRegistry(
        facts={f.name: f for f in facts},
        open_namespaces=tuple(OpenNamespace(p, o["about"], o["listed_as"]) for p, o in raw["open"].items()),
        hints=dict(raw["hints"]),
        hints_once_read={ns: (e["source"], e["hint"]) for ns, e in raw["hints_once_read"].items()},
        default_hint=raw["default_hint"],
    )


def is_fact_name(name: str) -> bool:
    """Whether rules.yaml (and any --rules file) may test `name`."""
    return fact_registry().is_declared(name)

