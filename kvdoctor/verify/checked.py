"""What was checked: the facts of a `kvdoctor check` report, from its JSON file or from running check on the same
flags (no compile). verify compares the server with these facts and nothing else."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvdoctor.base.errors import UsageError
from kvdoctor.inputs.flags import option_name


@dataclass(frozen=True)
class CheckedConfig:
    """The deployment as check judged it."""

    facts: dict[str, Any]
    """The check report's flat facts (serve.kv_cache_dtype, vllm.version, ...)."""
    source: str
    """Where they came from, in words: 'check report check.json' or 'kvdoctor check on the given flags'."""
    verdict: str | None
    """The check's own verdict (PASS/WARN/FAIL), when known."""
    given_flags: frozenset[str]
    """vLLM serve flags the user gave at check (--max-model-len, ...), by their canonical spelling; a fact whose flag
    was not given holds kvdoctor's idea of vLLM's default."""

    def fact(self, name: str) -> Any:
        return self.facts.get(name)

    def gave(self, flag: str) -> bool:
        return flag in self.given_flags


def from_facts(facts: dict[str, Any], source: str, verdict: str | None) -> CheckedConfig:
    argv = facts.get("serve.argv") or []
    given = frozenset(n for n in (option_name(str(t)) for t in argv) if n is not None)
    return CheckedConfig(dict(facts), source, verdict, given)


def read_check_report(path: Path) -> CheckedConfig:
    """A `kvdoctor check --format json` report; anything else is a user error (exit 2)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--report {path}: {exc.strerror or exc}", "give the file `kvdoctor check --format json -o FILE` wrote") from None
    try:
        report = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--report {path}: not JSON ({exc.msg} at line {exc.lineno})",
                         "give the file `kvdoctor check --format json -o FILE` wrote") from None  # fmt: skip
    if not isinstance(report, dict) or report.get("command") != "check" or not isinstance(report.get("facts"), dict):
        what = report.get("command") if isinstance(report, dict) else type(report).__name__
        raise UsageError(f"--report {path}: not a kvdoctor check report (command: {what!r})",
                         "give the file `kvdoctor check --format json -o FILE` wrote") from None  # fmt: skip
    return from_facts(report["facts"], f"check report {path}", report.get("verdict"))
