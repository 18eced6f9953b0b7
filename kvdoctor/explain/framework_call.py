"""Where a framework built on vLLM meets it: a failure no rule knows whose traceback runs through a framework that
drives vLLM (an RL trainer, an evaluation harness, a serving platform: explain.yaml `frameworks_on_vllm`) is given
that meeting as its likely cause. Such a framework and the vLLM release it runs on disagree there most often (an
argument, a config field, a method or an internal that changed between releases), so the failure's family becomes
wrapper_api_mismatch, the frames that show it are cited, and the fixes pair the two releases.

Applied after the rules, raise sites, named flags and similar reports: any of them naming a family wins."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

from kvdoctor.explain.tracebacks import ExceptionChain, Frame, LoggedException
from kvdoctor.model.report import Fix, Report

FAMILY = "wrapper_api_mismatch"
_VLLM_FRAME = re.compile(r"(?:^|[/\\])vllm[/\\]")
_INSTALLED = re.compile(r"/(?:site|dist)-packages/")
_VLLM_TREE = re.compile(r"/vllm/(?:v1|engine|entrypoints|model_executor|worker|config|distributed|attention)/")
# a framework raising again what it caught (unsloth's load_vllm: `raise RuntimeError(error)`): not its own check
_PASSES_ON = re.compile(r"\braise\s+[\w.]+\(\s*(?:str\(|repr\()?\s*(?:e|err|error|exc|ex|exception)\s*\)?\s*\)")


@dataclass(frozen=True)
class FrameworkCall:
    framework: str
    """What a report calls the framework ('verl')."""
    frame: Frame
    """Its innermost frame in the failing traceback."""
    into_vllm: Frame | None
    """vLLM's frame it called, when the traceback goes on into vLLM."""


def framework_call(exception: LoggedException, frameworks: dict[str, str]) -> FrameworkCall | None:
    """The innermost frame of a framework (package -> name) in the exception's traceback, when the traceback goes on
    from it into vLLM or the framework raised it itself; and vLLM's frame after it."""
    if not frameworks:
        return None
    pattern = _folder_pattern(tuple(frameworks))
    frames = exception.frames
    for index in range(len(frames) - 1, -1, -1):  # printed outermost first: the innermost framework frame
        package, installed = _package_of(frames[index].file)
        found = pattern.search(package)
        if found is None or (installed and found.start() != 0) or \
                (not installed and _VLLM_TREE.search(package[found.end():])):  # vLLM's checkout in a framework's folder
            continue
        into = next((f for f in frames[index + 1:] if _VLLM_FRAME.search(f.file)), None)
        if into is None and (index != len(frames) - 1 or _PASSES_ON.search(frames[index].code or "")):
            return None  # raised further in by neither (a Triton compile, Ray's dead actor), or passed on as caught
        return FrameworkCall(frameworks[found.group(1)], frames[index], into)
    return None


@lru_cache(maxsize=4)
def _folder_pattern(packages: tuple[str, ...]) -> re.Pattern[str]:
    """A path folder named for one of the packages."""
    return re.compile(r"(?:^|/)(" + "|".join(map(re.escape, packages)) + r")/")


def _package_of(file: str) -> tuple[str, bool]:
    """(path, installed): an installed frame's path from its package on ('.../site-packages/trl/x.py' -> '/trl/x.py':
    only its first folder is its package), a source checkout's path as it is ('/work/verl/verl/x.py')."""
    path = file.replace("\\", "/")
    parts = _INSTALLED.split(path)
    return ("/" + parts[-1], True) if len(parts) > 1 else (path, False)


def _where(frame: Frame) -> str:
    return f"{frame.file}:{frame.line}" + (f" in {frame.function}" if frame.function else "")


def with_framework_call(report: Report, chains: list[ExceptionChain], rule_id: str,
                        frameworks: dict[str, str]) -> Report:
    """The unknown-failure finding (``rule_id``) of a traceback through a framework on vLLM names where they meet;
    the family becomes wrapper_api_mismatch when nothing else gave one."""
    if not report.findings or report.findings[0].rule_id != rule_id or \
            report.extra.get("family") not in (None, "other"):
        return report
    at = (report.extra.get("primary") or {}).get("line")
    failing = [e for chain in chains for e in chain.exceptions if e.line == at]
    call = next((c for e in failing if (c := framework_call(e, frameworks)) is not None), None)
    if call is None:
        return report
    name = call.framework
    meets = f"{name}'s {_where(call.frame)}" + (f" calls vLLM's {_where(call.into_vllm)}" if call.into_vllm else "")
    first = report.findings[0]
    cause = (f"{first.cause} It is raised where {name}, a framework built on vLLM, meets vLLM: {meets}. A framework "
             "and the vLLM release it runs on disagree there most often (an argument, a config field, a method or an "
             "internal that changed between releases).")
    fixes = (Fix(f"Install the vLLM release {name}'s version pins (its requirements or compatibility notes), or the "
                 f"{name} release made for this vLLM"),
             Fix(f"If the two are the pair {name} pins, report it to {name} with the innermost exception"))
    evidence = first.evidence + (f"{name} meets vLLM: {meets}",)
    first = replace(first, cause=cause, fixes=fixes + first.fixes, evidence=evidence)
    note = (f"Failure family: {FAMILY} (likely: no rule knows the message; it is raised where {name} meets vLLM).")
    notes = tuple(note if n.startswith("Failure family:") else n for n in report.notes)
    if not any(n.startswith("Failure family:") for n in notes):
        notes += (note,)
    extra = dict(report.extra, family=FAMILY, family_by_rules=report.extra.get("family_by_rules", "other"),
                 framework_call={"framework": name, "frame": _where(call.frame),
                                 "into_vllm": _where(call.into_vllm) if call.into_vllm else None})
    return replace(report, findings=(first,) + report.findings[1:], extra=extra, notes=notes)
