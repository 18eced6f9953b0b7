"""Masterminds/semver constraints as Sprig's semverCompare reads them (`>=1.21-0`, `^1.2`, `~1.2.3`, `1.x`,
`>=1.19 <1.30`, `a || b`): enough for the Kubernetes-version gates charts write."""

from __future__ import annotations

import re

VERSION = re.compile(r"^v?(\d+)(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")
TERM = re.compile(r"^(>=|<=|!=|=>|=<|==|=|>|<|~>|~|\^)?\s*(.+)$")


def semver_compare(constraint: str, version: str) -> bool:
    """Whether `version` meets `constraint`; ValueError for one that does not parse (as Sprig's error)."""
    target = _parse(version)
    if target is None:
        raise ValueError(f"Invalid Semantic Version: {version}")
    for alternative in constraint.split("||"):
        terms = [t for t in re.split(r"[,\s]+", re.sub(r"(>=|<=|!=|==|=|>|<|~|\^)\s+", r"\1", alternative.strip()))
                 if t]  # fmt: skip
        if terms and all(_meets(term, target) for term in terms):
            return True
    return False


def semver(text: str) -> dict:
    """Sprig's `semver`: the version's parts by the names templates read (`$v.Major`, `$v.Minor`); ValueError as
    Sprig's error for one that does not parse."""
    parsed = _parse(str(text))
    if parsed is None or None in parsed[0]:
        raise ValueError(f"Invalid Semantic Version: {text}")
    (major, minor, patch), pre = parsed
    metadata = str(text).partition("+")[2]
    return {"Major": major, "Minor": minor, "Patch": patch, "Prerelease": pre or "", "Metadata": metadata,
            "Original": str(text)}  # fmt: skip


def _parse(text: str):
    match = VERSION.match(text.strip())
    if match is None:
        return None
    parts = [None if p is None or p in "xX*" else int(p) for p in match.groups()[:3]]
    return parts, match.group(4)


def _key(parts, pre) -> tuple:
    numbers = tuple(p or 0 for p in parts)
    return numbers + ((0, pre) if pre else (1, ""),)


def _meets(term: str, target) -> bool:
    operator, text = TERM.match(term).groups()
    parsed = _parse(text)
    if parsed is None:
        raise ValueError(f"improper constraint: {term}")
    parts, pre = parsed
    (t_parts, t_pre) = target
    if t_pre and not pre:
        return False  # a prerelease meets only constraints that name one (`>=1.21-0`)
    version = _key(t_parts, t_pre)
    low = _key(parts, pre)
    operator = {"=>": ">=", "=<": "<=", "==": "="}.get(operator or "=", operator or "=")
    wildcard = next((i for i, p in enumerate(parts) if p is None), None)
    if operator == "=" and wildcard is not None:
        operator = "~" if wildcard > 0 else ">="
    if operator in ("~", "~>"):
        keep = 2 if parts[1] is not None and wildcard != 1 else 1
        upper = list(p or 0 for p in parts[:keep])
        upper[-1] += 1
        return low <= version < tuple(upper + [0] * (3 - keep)) + ((0, ""),)
    if operator == "^":
        numbers = [p or 0 for p in parts]
        head = next((i for i, p in enumerate(numbers) if p != 0), 2)
        upper = numbers[: head + 1]
        upper[-1] += 1
        return low <= version < tuple(upper + [0] * (3 - len(upper))) + ((0, ""),)
    return {">=": version >= low, ">": version > low, "<=": version <= low, "<": version < low,
            "!=": version != low, "=": version[:3] == low[:3] and version[3:] == low[3:]}[operator]  # fmt: skip
