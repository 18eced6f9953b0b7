"""`when` conditions of a rules file, parsed once and evaluated with three-valued logic.

A leaf tests one fact: ``{fact: gpu.capability, lt: 8.9}``. Leaves combine with ``all``, ``any``
and ``not``. A leaf whose fact is unknown (None) evaluates to UNKNOWN, which ``all``/``any``/``not``
propagate as Kleene logic does, so a rule can say which missing fact would decide it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Union

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

UNKNOWN = None  # the third truth value; True and False are the other two
Truth = Union[bool, None]


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple, set)) else [value]


def _version_in(value: Any, spec: SpecifierSet) -> Truth:
    try:
        return Version(str(value)) in spec.__class__(str(spec), prereleases=True)
    except InvalidVersion:
        return UNKNOWN


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _compare(op: Callable[[float, float], bool]) -> Callable[[Any, Any], Truth]:
    def test(value: Any, operand: Any) -> Truth:
        number = _number(value)
        return UNKNOWN if number is None else op(number, float(operand))

    return test


# operator name -> (test(value, operand) -> Truth, check(operand) -> error message or None)
OPERATORS: dict[str, Callable[[Any, Any], Truth]] = {
    "eq": lambda v, o: v == o,
    "ne": lambda v, o: v != o,
    "in": lambda v, o: v in o,
    "not_in": lambda v, o: v not in o,
    "prefix": lambda v, o: isinstance(v, str) and any(v.startswith(p) for p in _as_list(o)),
    "contains": lambda v, o: o in v if isinstance(v, (list, tuple, str)) else False,
    "matches": lambda v, o: bool(o.search(str(v))),
    "lt": _compare(lambda a, b: a < b),
    "le": _compare(lambda a, b: a <= b),
    "gt": _compare(lambda a, b: a > b),
    "ge": _compare(lambda a, b: a >= b),
    "version": _version_in,
}


@dataclass(frozen=True)
class Leaf:
    fact: str
    op: str
    operand: Any

    def evaluate(self, facts: dict[str, Any]) -> Truth:
        if self.op == "known":
            return (facts.get(self.fact) is not None) == bool(self.operand)
        value = facts.get(self.fact)
        if value is None:
            return UNKNOWN
        return OPERATORS[self.op](value, self.operand)

    def facts_used(self) -> set[str]:
        return {self.fact}


@dataclass(frozen=True)
class All:
    parts: tuple["Condition", ...]

    def evaluate(self, facts: dict[str, Any]) -> Truth:
        results = [p.evaluate(facts) for p in self.parts]
        if False in results:
            return False
        return UNKNOWN if UNKNOWN in results else True

    def facts_used(self) -> set[str]:
        return set().union(*(p.facts_used() for p in self.parts))


@dataclass(frozen=True)
class Any_:
    parts: tuple["Condition", ...]

    def evaluate(self, facts: dict[str, Any]) -> Truth:
        results = [p.evaluate(facts) for p in self.parts]
        if True in results:
            return True
        return UNKNOWN if UNKNOWN in results else False

    def facts_used(self) -> set[str]:
        return set().union(*(p.facts_used() for p in self.parts))


@dataclass(frozen=True)
class Not:
    part: "Condition"

    def evaluate(self, facts: dict[str, Any]) -> Truth:
        result = self.part.evaluate(facts)
        return UNKNOWN if result is UNKNOWN else not result

    def facts_used(self) -> set[str]:
        return self.part.facts_used()


Condition = Union[Leaf, All, Any_, Not]


class ConditionError(ValueError):
    """A malformed condition; the message names the offending part."""


def parse_condition(raw: Any, is_fact_name: Callable[[str], bool]) -> Condition:
    """Parse a `when` tree; raises ConditionError naming the first problem."""
    if not isinstance(raw, dict) or not raw:
        raise ConditionError(f"a condition must be a mapping, got {raw!r}")
    if "fact" not in raw:
        if len(raw) != 1:
            raise ConditionError(f"use one of all/any/not or a fact test, got keys {sorted(raw)}")
        (key, body), = raw.items()
        if key in ("all", "any"):
            if not isinstance(body, list) or not body:
                raise ConditionError(f"'{key}' needs a non-empty list")
            parts = tuple(parse_condition(p, is_fact_name) for p in body)
            return All(parts) if key == "all" else Any_(parts)
        if key == "not":
            return Not(parse_condition(body, is_fact_name))
        raise ConditionError(f"unknown condition key '{key}'")
    fact = raw["fact"]
    if not isinstance(fact, str) or not is_fact_name(fact):
        raise ConditionError(f"unknown fact name '{fact}'")
    ops = [k for k in raw if k != "fact"]
    if len(ops) != 1:
        raise ConditionError(f"fact '{fact}' needs exactly one operator, got {ops or 'none'}")
    op = ops[0]
    return Leaf(fact, op, _parse_operand(fact, op, raw[op]))


def _parse_operand(fact: str, op: str, operand: Any) -> Any:
    if op == "known":
        if not isinstance(operand, bool):
            raise ConditionError(f"'known' on '{fact}' takes true or false")
        return operand
    if op not in OPERATORS:
        raise ConditionError(f"unknown operator '{op}' on fact '{fact}'")
    if op in ("in", "not_in") and not isinstance(operand, list):
        raise ConditionError(f"'{op}' on '{fact}' needs a list")
    if op in ("lt", "le", "gt", "ge") and _number(operand) is None:
        raise ConditionError(f"'{op}' on '{fact}' needs a number, got {operand!r}")
    if op == "version":
        try:
            return SpecifierSet(str(operand))
        except InvalidSpecifier:
            raise ConditionError(f"bad version specifier {operand!r} on '{fact}'") from None
    if op == "matches":
        try:
            return re.compile(str(operand))
        except re.error as exc:
            raise ConditionError(f"bad regex {operand!r} on '{fact}': {exc}") from None
    return operand


def holding_leaves(condition: Condition, facts: dict[str, Any]) -> list[Leaf]:
    """Leaves that hold outside any `not`: the known part of a rule that already points at a problem."""
    if isinstance(condition, Leaf):
        return [condition] if condition.evaluate(facts) is True else []
    if isinstance(condition, Not):
        return []
    return [leaf for part in condition.parts for leaf in holding_leaves(part, facts)]


def unknown_facts(condition: Condition, facts: dict[str, Any]) -> list[str]:
    """Facts used by ``condition`` that are unknown: what would decide an UNKNOWN result."""
    return sorted(f for f in condition.facts_used() if facts.get(f) is None)
