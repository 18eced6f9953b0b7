"""How a check report and its findings are said in every format of check and scan: the deployment line, a
finding's state, a fix in one line (not itself a format)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvdoctor.model.report import Finding, Fix, Report

if TYPE_CHECKING:
    from kvdoctor.model.dry_run import KernelResult


def deployment_labels(report: Report) -> dict[str, str]:
    """model, gpu, kv_cache_dtype, vllm_version: '' when unknown."""
    facts = report.facts
    return {
        "model": str(facts.get("model.model_id") or ""),
        "gpu": str(facts.get("gpu.name") or ""),
        "kv_cache_dtype": str(facts.get("serve.kv_cache_dtype") or ""),
        "vllm_version": str(facts.get("vllm.version") or ""),
    }


def deployment_line(report: Report) -> str:
    """'model | --kv-cache-dtype D | GPU | vLLM V', with what is unknown said so."""
    labels = deployment_labels(report)
    parts = [
        labels["model"] or "no model",
        f"--kv-cache-dtype {labels['kv_cache_dtype'] or '?'}",
        labels["gpu"] or "GPU unknown",
        f"vLLM {labels['vllm_version']}" if labels["vllm_version"] else "vLLM unknown",
    ]
    return " | ".join(parts)


def state(finding: Finding) -> str:
    """'fired', 'undecided' or 'ignored': how a finding counts."""
    if finding.ignored_reason is not None:
        return "ignored"
    return finding.status


def kernels(report: Report) -> list[KernelResult]:
    """The dry run's kernel results, [] when there was no dry run."""
    return list(report.dry_run.kernels) if report.dry_run else []


def rules_checked(report: Report) -> tuple[str, ...]:
    """Rule ids that were evaluated, when the report carries them (else only findings are known)."""
    return tuple(getattr(report, "rules_checked", ()) or ())


def fix_line(fix: Fix) -> str:
    """A fix in one line: its title, the flag, env or version to set, and whether a compile verified it."""
    action = " ".join(a for a in (fix.flag, fix.env, fix.version) if a)
    mark = {"verified": " (verified by compile)", "not_verified": " (not verified)"}.get(fix.verified or "", "")
    return f"{fix.title}{': ' + action if action else ''}{mark}"
