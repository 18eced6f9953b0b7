"""One rule of a rules file, parsed and validated: what it says (title, cause, fixes), when it fires, and its cases.

Every problem names the file, the rule id and the field, so an engineer extending the rules can
fix them without reading Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from kvdoctor.base.errors import RulesFileError
from kvdoctor.rules.conditions import Condition, ConditionError, parse_condition

SEVERITIES = ("error", "warning", "info")
MAX_RULES_BYTES = 2 * 1024 * 1024
RULE_ID = re.compile(r"^[A-Z][A-Z0-9]*-?[0-9]{3,}$")
FIX_KEYS = {"title", "flag", "env", "version", "dry_run", "when"}
DRY_RUN_CHANGES = {"model_dtype", "kv_cache_dtype", "vllm", "backend", "capability"}
SIGNATURE_KEYS = {"pattern", "role", "note"}
SIGNATURE_ROLES = ("root", "wrapper", "last_root")
# What `kvdoctor explain` looks a rule up for, by role rather than by id.
EXPLAIN_ROLES = {
    "unknown_failure": "the finding for a failure no signature matched",
    "wrapper": "an error line that re-raises a failure from another process",
    "selector_error": "vLLM's attention-selector error, explained reason by reason",
    "start_up_not_shown": "the finding for a log that shows no failure and no start-up that finished either",
}
RULE_KEYS = {
    "id", "title", "severity", "when", "cause", "fixes", "references", "checked_against",
    "compile_kind", "signatures", "explain_only", "supersedes", "explain_role", "since", "examples",
}
EXAMPLE_KEYS = {"fires", "quiet", "no_firing_case"}
# kvdoctor's release, optionally with the day and commit that added the rule: "0.1.0 (2026-12-02, 6a8d8c0)".
SINCE = re.compile(r"^\d+\.\d+\.\d+(?: \(\d{4}-\d{2}-\d{2}, [0-9a-f]{7,40}\))?$")


@dataclass(frozen=True)
class FixSpec:
    title: str
    flag: str | None = None
    env: str | None = None
    version: str | None = None
    dry_run: tuple[tuple[str, str], ...] = ()
    """Changes to the dry-run inputs that apply this fix, so it can be compiled again."""
    when: Condition | None = None
    """Where the fix is offered: only when this holds over the facts (a recomputed fix that does not work, or whose
    value is unknown, is left out of the menu)."""


@dataclass(frozen=True)
class Signature:
    """A log pattern `kvdoctor explain` matches to this rule."""

    source: str
    """The regular expression as written."""
    role: str = "root"
    """'root' when the line is the real failure, 'wrapper' when it hides one, 'last_root' when it is the real failure
    only where no other rule's root matched (a native crash that often follows the error that caused it)."""
    note: str | None = None

    @cached_property
    def pattern(self) -> re.Pattern[str]:
        """Compiled on first use: `check` never matches logs (the bundled patterns compile in the tests)."""
        return re.compile(self.source)

    @cached_property
    def _gate(self) -> re.Pattern[str] | None:
        """For a pattern that opens with up to N characters of a line (`(?P<detail>[^\\n]{0,160}\\bnot ...`), the
        pattern without them: every match of the whole holds a match of the rest, which is found without trying
        N characters at each position of a long line."""
        opening = _ANY_OPENING.match(self.source)
        return re.compile(opening.group(1) + self.source[opening.end():]) if opening else None

    def search(self, text: str) -> re.Match[str] | None:
        """The pattern's first match in the text (its gate tried first)."""
        if self._gate is not None and self._gate.search(text) is None:
            return None
        return self.pattern.search(text)


_ANY_OPENING = re.compile(r"^((?:\(\?P<\w+>)?)\[\^\\n\]\{0,\d+\}")
"""A pattern's opening run of any characters of a line, bounded, after its first named group's start."""


@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    severity: str
    when: Condition | None
    cause: str
    fixes: tuple[FixSpec, ...]
    references: tuple[str, ...]
    checked_against: str | None
    compile_kinds: tuple[str, ...]
    """The dry-run failure kinds this rule explains (`compile_kind`: one kind or a list); links static and
    compiled verdicts."""
    signatures: tuple[Signature, ...]
    explain_only: bool
    """A rule used only to explain logs (no `when`)."""
    origin: str
    """The file the rule came from."""
    supersedes: tuple[str, ...] = ()
    """Generic rules this one explains in people's words: when it fires, their findings fold into its evidence."""
    explain_role: str | None = None
    """What `kvdoctor explain` uses this rule for (EXPLAIN_ROLES), if anything special."""
    vllm_range: tuple[str, str] | None = None
    """(oldest, newest) vLLM releases checked_against names; 'vllm pack' = the knowledge pack's releases."""
    stage: str = "check"
    """The kvdoctor command whose rules file holds it: check (and explain's log rules), scan or explain."""
    since: str | None = None
    """The kvdoctor release that added the rule (SINCE)."""
    examples: dict[str, Any] = field(default_factory=dict, compare=False)
    """The rule's own test cases: `fires` and `quiet` lists, or `no_firing_case` saying why it has none."""


def parse_rule(path: Path, index: int, raw: Any, is_fact_name: Callable[[str], bool], *, check_patterns: bool = True,
               stage: str = "check", pattern_rewrite: Callable[[str], str] | None = None) -> Rule:
    """Rule #index of the file at `path`; RulesFileError naming the file, rule and field of the first problem.
    `check_patterns`: compile the log patterns now (else on first use); `pattern_rewrite`: how the file's
    patterns are written (explain's: a space matches any whitespace run)."""
    if not isinstance(raw, dict):
        raise RulesFileError(f"{path}: rule #{index + 1} is not a mapping")
    rule_id = raw.get("id")
    where = f"{path}: rule '{rule_id}'" if isinstance(rule_id, str) else f"{path}: rule #{index + 1}"

    def fail(field: str, problem: str) -> RulesFileError:
        return RulesFileError(f"{where}, field '{field}': {problem}")

    if not isinstance(rule_id, str) or not RULE_ID.match(rule_id):
        raise fail("id", "needs an id of letters, then 3+ digits (ORG001)")
    unknown = set(raw) - RULE_KEYS
    if unknown:
        raise fail(sorted(unknown)[0], f"unknown field (allowed: {', '.join(sorted(RULE_KEYS))})")
    for key in ("title", "cause"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise fail(key, "must be a non-empty string")
    if raw.get("severity") not in SEVERITIES:
        raise fail("severity", f"must be one of {', '.join(SEVERITIES)}")
    explain_only = bool(raw.get("explain_only", False))
    when = None
    if "when" in raw:
        try:
            when = parse_condition(raw["when"], is_fact_name)
        except ConditionError as exc:
            raise fail("when", str(exc)) from None
        except RecursionError:
            raise fail("when", "nested too deeply") from None
    elif not explain_only:
        raise fail("when", "is required (or set explain_only: true for log-only rules)")
    references = raw.get("references", [])
    if not isinstance(references, list) or not all(isinstance(r, str) for r in references):
        raise fail("references", "must be a list of strings")
    checked = raw.get("checked_against")
    if checked is not None and not isinstance(checked, str):
        raise fail("checked_against", "must be a string such as 'vllm 0.20.0-0.33.0'")
    vllm_range = _vllm_range(checked, fail)
    supersedes = raw.get("supersedes", [])
    if not isinstance(supersedes, list) or not all(isinstance(r, str) and RULE_ID.match(r) for r in supersedes):
        raise fail("supersedes", "must be a list of rule ids")
    compile_kinds = _compile_kinds(raw.get("compile_kind"), fail)
    explain_role = raw.get("explain_role")
    if explain_role is not None and explain_role not in EXPLAIN_ROLES:
        raise fail("explain_role", f"must be one of {', '.join(EXPLAIN_ROLES)}")
    since = raw.get("since")
    if since is not None and not (isinstance(since, str) and SINCE.match(since)):
        raise fail("since", "must be a kvdoctor release such as '0.1.0' or '0.1.0 (2026-12-02, 6a8d8c0)'")
    signatures = _list(raw.get("signatures", []), "signatures", fail)
    if pattern_rewrite is not None:
        signatures = [dict(s, pattern=pattern_rewrite(s["pattern"])) if isinstance(s, dict)
                      and isinstance(s.get("pattern"), str) else s for s in signatures]  # fmt: skip
    return Rule(
        id=rule_id,
        title=raw["title"].strip(),
        severity=raw["severity"],
        when=when,
        cause=raw["cause"].strip(),
        fixes=_parse_fixes(raw, fail, is_fact_name),
        references=tuple(references),
        checked_against=checked,
        compile_kinds=compile_kinds,
        signatures=tuple(_parse_signature(s, fail, check_patterns) for s in signatures),
        explain_only=explain_only,
        origin=str(path),
        vllm_range=vllm_range,
        supersedes=tuple(supersedes),
        explain_role=explain_role,
        stage=stage,
        since=since,
        examples=_examples(raw.get("examples"), fail),
    )


CHECKED_VLLM = re.compile(r"\bvllm (?:(pack)( and between)?|(\d+(?:\.\d+)*)(?:-(\d+(?:\.\d+)*))?)")


def _vllm_range(checked: str | None, fail) -> tuple[str, str] | None:
    """'vllm 0.19.0-0.33.0, triton ...' -> ('0.19.0', '0.33.0'); 'vllm pack' -> ('pack', 'pack'); 'vllm pack and
    between' -> ('pack', 'between'): also a release the pack did not read between two it did, judged by both."""
    match = CHECKED_VLLM.search(checked or "")
    if match is None:
        if checked and "vllm" in checked:
            raise fail("checked_against", "name vLLM releases as 'vllm 0.20.0-0.33.0', 'vllm 0.33.0' or 'vllm pack'")
        return None
    if match.group(1):
        return ("pack", "between" if match.group(2) else "pack")
    return (match.group(3), match.group(4) or match.group(3))


def _list(value: Any, name: str, fail) -> list[Any]:
    if not isinstance(value, list):
        raise fail(name, "must be a list")
    return value


def _examples(raw: Any, fail) -> dict[str, Any]:
    """`examples: {fires: [...], quiet: [...]}` (or `no_firing_case: why`), kept as written for the test suite."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or set(raw) - EXAMPLE_KEYS:
        raise fail("examples", f"must be a mapping of {', '.join(sorted(EXAMPLE_KEYS))}")
    for key in ("fires", "quiet"):
        _list(raw.get(key, []), f"examples.{key}", fail)
    if not isinstance(raw.get("no_firing_case", ""), str):
        raise fail("examples.no_firing_case", "must say in words why the rule has no firing case")
    return dict(raw)


def _parse_fixes(raw: dict, fail, is_fact_name: Callable[[str], bool]) -> tuple[FixSpec, ...]:
    fixes = tuple(_parse_fix(f, fail, is_fact_name) for f in _list(raw.get("fixes", []), "fixes", fail))
    conditional = [i for i, fix in enumerate(fixes) if fix.when is not None]
    if conditional and any(fix.dry_run for fix in fixes[conditional[0]:]):
        raise fail("fixes", "a fix with a dry_run must come before every fix with a 'when' (fix keys index the list)")
    return fixes


def _parse_fix(raw: Any, fail, is_fact_name: Callable[[str], bool]) -> FixSpec:
    if not isinstance(raw, dict) or not isinstance(raw.get("title"), str):
        raise fail("fixes", "each fix needs a 'title'")
    unknown = set(raw) - FIX_KEYS
    if unknown:
        raise fail("fixes", f"unknown key '{sorted(unknown)[0]}' (allowed: {', '.join(sorted(FIX_KEYS))})")
    dry_run = raw.get("dry_run", {})
    if not isinstance(dry_run, dict) or set(dry_run) - DRY_RUN_CHANGES:
        raise fail("fixes", f"dry_run may change only {', '.join(sorted(DRY_RUN_CHANGES))}")
    for key in ("flag", "env", "version"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise fail("fixes", f"'{key}' must be a string")
    when = None
    if "when" in raw:
        try:
            when = parse_condition(raw["when"], is_fact_name)
        except ConditionError as exc:
            raise fail("fixes", f"when: {exc}") from None
    return FixSpec(
        title=raw["title"],
        flag=raw.get("flag"),
        env=raw.get("env"),
        version=raw.get("version"),
        dry_run=tuple(sorted((str(k), str(v)) for k, v in dry_run.items())),
        when=when,
    )


def _parse_signature(raw: Any, fail, check_pattern: bool = True) -> Signature:
    if not isinstance(raw, dict) or not isinstance(raw.get("pattern"), str):
        raise fail("signatures", "each signature needs a 'pattern' (a regular expression)")
    unknown = set(raw) - SIGNATURE_KEYS
    if unknown:
        raise fail("signatures", f"unknown key '{sorted(unknown)[0]}'")
    try:
        if check_pattern:
            re.compile(raw["pattern"])
    except re.error as exc:
        raise fail("signatures", f"bad regex {raw['pattern']!r}: {exc}") from None
    role = raw.get("role", "root")
    if role not in SIGNATURE_ROLES:
        raise fail("signatures", f"role must be one of {', '.join(SIGNATURE_ROLES)}")
    return Signature(source=raw["pattern"], role=role, note=raw.get("note"))


def _compile_kinds(value, fail) -> tuple[str, ...]:
    """A rule's `compile_kind` (one kind or a list), each checked against the failure-kind registry."""
    if value is None:
        return ()
    from kvdoctor.dryrun.kinds import failure_kinds

    kinds = value if isinstance(value, list) else [value]
    for kind in kinds:
        if not isinstance(kind, str) or kind not in failure_kinds():
            import difflib

            close = difflib.get_close_matches(str(kind), list(failure_kinds()), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise fail("compile_kind", f"{kind!r} is no dry-run failure kind ({hint}kinds: "
                                       "kvdoctor/data/failure_kinds.yaml)")  # fmt: skip
    return tuple(kinds)
