"""Prometheus node-exporter textfile metrics: verdict, findings by severity, dry-run seconds, one series per rule, and
the KV-cache fit vLLM will log (available KV memory, its band, KV cache tokens, maximum concurrency, the weights)."""

from __future__ import annotations

from kvdoctor.model.dry_run import Status
from kvdoctor.model.report import SEVERITY_ORDER, Report
from kvdoctor.report.check.fit import FIT_STATES, GIB, FitSummary, fit_summary
from kvdoctor.report.wording import deployment_labels, kernels, rules_checked, state

VERDICTS = ("PASS", "WARN", "FAIL")


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{_label_value(v)}"' for k, v in labels.items()) + "}"


def _number(value: float) -> str:
    """Exact: bytes and token counts as integers (':g' would round 71139092070 to 7.11391e+10)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def render(report: Report, verbose: bool = False) -> str:
    base = deployment_labels(report)
    out: list[str] = []

    def metric(name: str, help_text: str, samples: list[tuple[dict[str, str], float]]) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} gauge")
        for labels, value in samples:
            out.append(f"{name}{_labels(**base, **labels)} {_number(value)}")

    metric("kvdoctor_verdict", "1 for the verdict of the last check (PASS, WARN, FAIL), 0 for the others.",
           [({"verdict": v}, 1.0 if v == report.verdict else 0.0) for v in VERDICTS])  # fmt: skip
    metric("kvdoctor_findings", "Findings that count towards the exit code, by severity.",
           [({"severity": s}, float(sum(1 for f in report.findings if f.gates and f.severity == s)))
            for s in sorted(SEVERITY_ORDER, key=SEVERITY_ORDER.get)])  # fmt: skip
    metric("kvdoctor_findings_not_gating", "Findings that do not gate (undecided or ignored by config), by severity.",
           [({"severity": s}, float(sum(1 for f in report.findings if not f.gates and f.severity == s)))
            for s in sorted(SEVERITY_ORDER, key=SEVERITY_ORDER.get)])  # fmt: skip
    dry = report.dry_run
    metric("kvdoctor_dry_run_seconds", "Wall seconds of the dry-run compile (0 when skipped; cached runs are fast).",
           [({"status": str(dry.status) if dry else "none"}, float(dry.seconds) if dry else 0.0)])
    compiled = kernels(report)
    if compiled:
        metric("kvdoctor_kernel_compile_ok", "1 when the kernel compiled for the target GPU, 0 when it did not.",
               [({"kernel": k.kernel, "role": k.role, "status": str(k.status)},
                 1.0 if k.status == Status.PASSED else 0.0) for k in compiled])  # fmt: skip
    samples = []
    by_rule = {f.rule_id: f for f in report.findings}
    for rule_id in sorted(set(rules_checked(report)) | set(by_rule)):
        finding = by_rule.get(rule_id)
        how = state(finding) if finding else "passed"
        severity = finding.severity if finding else ""
        samples.append(({"rule_id": rule_id, "severity": severity, "state": how}, 1.0 if finding and finding.gates else 0.0))
    metric("kvdoctor_rule", "1 when the rule fired and gates; 0 when undecided, ignored or passed (state label).", samples)
    fit = fit_summary(report)
    if fit is not None:
        _fit_metrics(metric, fit)
    return "\n".join(out) + "\n"


def _fit_metrics(metric, fit: FitSummary) -> None:
    """The fit's series; a figure check did not decide has no sample (absent, not 0)."""
    metric("kvdoctor_kv_cache_fit", "1 for the KV-cache fit state check judged (fits, within_band, does_not_fit, "
           "no_memory, not_modelled), 0 for the others; all 0 when the judged releases disagree.",
           [({"state": s}, 1.0 if s == fit.state else 0.0) for s in FIT_STATES])  # fmt: skip
    known = lambda value, labels=None: [(labels or {}, float(value))] if value is not None else []  # noqa: E731
    band = round(fit.band_gib * GIB) if fit.band_gib is not None else None
    metric("kvdoctor_kv_cache_available_bytes", "KV-cache memory vLLM will have per rank (its 'Available KV cache "
           "memory'), bytes.", known(fit.available_kv_bytes))  # fmt: skip
    metric("kvdoctor_kv_cache_band_bytes", "+- error band of the available KV-cache memory, bytes (from GiB rounded "
           "to 0.01).", known(band))  # fmt: skip
    metric("kvdoctor_kv_cache_tokens", "vLLM's 'GPU KV cache size: N tokens'.", known(fit.kv_cache_tokens))
    metric("kvdoctor_kv_cache_max_concurrency", "vLLM's 'Maximum concurrency for M tokens per request: X' "
           "(max_model_len label = M).",
           known(fit.max_concurrency, {"max_model_len": str(fit.max_model_len or "")}))  # fmt: skip
    metric("kvdoctor_model_weights_bytes", "Weights one rank holds, as the KV-cache budget subtracts them (source "
           "label: the checkpoint's files or an estimate).",
           known(fit.weights_bytes, {"source": fit.weights_source or "", "estimated": str(bool(fit.weights_estimated)).lower()}))  # fmt: skip
