"""Read rules files: kvdoctor's own folder (kvdoctor/data/rules/*.yaml) and the user's --rules files.

One loader for every rule kvdoctor has. Each bundled file names the command whose rules it holds (`stage:
check | scan | explain`); a rule id is unique across every bundled file and every user file, and a duplicate
is refused naming both files (kube-linter's registry does the same).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

from kvdoctor.base.errors import RulesFileError
from kvdoctor.base.yaml_safe import YAMLError, load_yaml, load_yaml_cached
from kvdoctor.data import DATA_DIR
from kvdoctor.rules.rule import EXPLAIN_ROLES, SEVERITIES, FixSpec, Rule, Signature, parse_rule

__all__ = [
    "EXPLAIN_ROLES", "SEVERITIES", "FixSpec", "Rule", "Signature", "RuleFile", "RULES_DIR", "STAGES",
    "bundled_files", "bundled_ids", "bundled_rules", "bundled_stamps", "file_stamp", "load_rules", "read_rule_file",
]

RULES_DIR = DATA_DIR / "rules"
STAGES = ("check", "scan", "explain")
MAX_RULES_BYTES = 2 * 1024 * 1024

Stamp = tuple[int, int] | None


@dataclass(frozen=True)
class RuleFile:
    """One rules file as written: its rules are parsed by whoever judges them (each stage has its own facts)."""

    path: Path
    stage: str
    """Which command's rules: `check` (its rules also explain logs), `scan` or `explain`."""
    data: dict[str, Any] = field(compare=False)
    """The parsed YAML: `rules:` plus the stage's own top-level keys (explain's families, selector reasons)."""

    def raw_rules(self) -> list[Any]:
        """The file's rule entries as written."""
        return self.data["rules"]


def file_stamp(path: Path) -> Stamp:
    """(mtime, size) of a file, None when it cannot be read (the loader then reports why)."""
    try:
        stat = path.stat()
        return stat.st_mtime_ns, stat.st_size
    except OSError:
        return None


def read_rule_file(path: Path, bundled: bool = False) -> RuleFile:
    """The file's YAML, checked to be a mapping with a `rules:` list; RulesFileError naming the file otherwise.
    A bundled file's parsed form is cached across runs (base.yaml_safe) and must name its stage."""
    try:
        if path.stat().st_size > MAX_RULES_BYTES:
            raise RulesFileError(f"{path}: rules file is over {MAX_RULES_BYTES // 1024} KiB", "split or trim it")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RulesFileError(f"rules file not found: {path}", "check the --rules path") from None
    except IsADirectoryError:
        raise RulesFileError(f"rules path is a directory: {path}", "pass a YAML file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RulesFileError(f"cannot read rules file {path}: {exc}") from None
    try:
        data = load_yaml_cached(text, f"rules-{path.stem}.yaml") if bundled else load_yaml(text)
    except YAMLError as exc:
        where = f" at line {exc.line}" if exc.line else ""
        raise RulesFileError(f"{path}: not valid YAML{where}", "check indentation and quoting") from None
    except RecursionError:
        raise RulesFileError(f"{path}: YAML nested too deeply", "flatten the file") from None
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        raise RulesFileError(f"{path}: expected a mapping with a 'rules:' list at the top")
    stage = data.get("stage", "check") if bundled else "check"  # a user's file adds rules to `check`
    if stage not in STAGES:
        raise RulesFileError(f"{path}: 'stage' must be one of {', '.join(STAGES)}")
    return RuleFile(path, stage, data)


def load_rules(paths: list[Path], is_fact_name: Callable[[str], bool],
               taken: dict[str, str] | None = None) -> list[Rule]:
    """The rules of each file in order (the user's --rules files); an id used twice, or already in `taken`
    (id -> the file that defines it), is refused naming both files."""
    rules: list[Rule] = []
    seen = dict(taken or {})
    for path in paths:
        raw_rules = read_rule_file(path).raw_rules()
        for index, raw in enumerate(raw_rules):
            rule = parse_rule(path, index, raw, is_fact_name)
            _claim(seen, rule.id, path)
            rules.append(rule)
    return rules


def bundled_files() -> tuple[RuleFile, ...]:
    """kvdoctor's own rules files in name order, ids checked unique across all of them; re-read when one changes."""
    return _bundled_files(bundled_stamps())


def bundled_ids() -> dict[str, str]:
    """Every bundled rule id -> the file that defines it (any stage)."""
    return dict(_ids(bundled_files()))


def bundled_rules(stage: str, is_fact_name: Callable[[str], bool], *, stage_keys: frozenset[str] = frozenset(),
                  pattern_rewrite: Callable[[str], str] | None = None) -> tuple[Rule, ...]:
    """The parsed rules of every bundled file of `stage`, in file then entry order. `stage_keys`: extra fields the
    stage reads from each entry itself (explain's `family`, ...), left out of the rule; `pattern_rewrite`: how the
    stage writes its log patterns. Log patterns compile on first use (the test suite compiles them all)."""
    return _bundled_rules(bundled_stamps(), stage, is_fact_name, stage_keys, pattern_rewrite)


def bundled_stamps() -> tuple[tuple[Path, Stamp], ...]:
    """The bundled files with their (mtime, size): the key of every cache here (an edited file is re-read)."""
    return tuple((path, file_stamp(path)) for path in sorted(RULES_DIR.glob("*.yaml")))


@lru_cache(maxsize=4)
def _bundled_files(stamped: tuple[tuple[Path, Stamp], ...]) -> tuple[RuleFile, ...]:
    files = tuple(read_rule_file(path, bundled=True) for path, _ in stamped)
    _ids(files)  # refuses a duplicate id now, whichever stage asks first
    return files


def _ids(files: tuple[RuleFile, ...]) -> dict[str, str]:
    seen: dict[str, str] = {}
    for rule_file in files:
        for raw in rule_file.raw_rules():
            if isinstance(raw, dict) and isinstance(raw.get("id"), str):
                _claim(seen, raw["id"], rule_file.path)
    return seen


def _claim(seen: dict[str, str], rule_id: str, path: Path) -> None:
    if rule_id in seen:
        raise RulesFileError(
            f"{path}: rule id '{rule_id}' is defined twice (first in {seen[rule_id]})",
            "give each rule a unique id",
        )
    seen[rule_id] = str(path)


@lru_cache(maxsize=8)
def _bundled_rules(stamped: tuple[tuple[Path, Stamp], ...], stage: str, is_fact_name, stage_keys: frozenset[str],
                   pattern_rewrite) -> tuple[Rule, ...]:
    rules = []
    for rule_file in (f for f in _bundled_files(stamped) if f.stage == stage):
        for index, raw in enumerate(rule_file.raw_rules()):
            entry = {k: v for k, v in raw.items() if k not in stage_keys} if isinstance(raw, dict) else raw
            rules.append(parse_rule(rule_file.path, index, entry, is_fact_name, check_patterns=False, stage=stage,
                                    pattern_rewrite=pattern_rewrite))  # fmt: skip
    return tuple(rules)
