"""`kvdoctor check`: facts -> dry run -> rules -> report."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kvdoctor.facts.collect import CheckOptions, collect_facts
from kvdoctor.facts.derive import derive_dryrun_facts, derive_kv_facts
from kvdoctor.model.dry_run import DryRunReport, DryRunRequest, Status
from kvdoctor.model.facts import Facts
from kvdoctor.check.reconcile import reconcile_with_dry_run
from kvdoctor.model.report import Report
from kvdoctor.rules import load_all_rules
from kvdoctor.rules.engine import evaluate_rules
from kvdoctor.check.fix_verify import attach_verifications, fix_candidates
from kvdoctor.check.kv_dtype_fixes import with_working_kv_dtypes
from kvdoctor.vllm_pack.candidates import candidates


@dataclass(frozen=True)
class CheckSettings:
    """How to judge: extra rules, the dry run and its cache."""

    rules_files: tuple[Path, ...] = ()
    compile: bool = True
    compile_timeout_s: float = 60.0
    use_cache: bool = True
    fix_sources: tuple[str, ...] = ()
    """vLLM wheels or trees a version fix may be verified with (--fix-source)."""
    ignored: dict[str, str] = field(default_factory=dict)
    """rule id -> reason, from a config file."""


def run_check(options: CheckOptions, settings: CheckSettings) -> Report:
    """The check in its phases: facts, the dry run (with its fixes' recompiles), rules, report."""
    if settings.compile:  # compiler children import Triton while the facts are gathered
        from kvdoctor.dryrun.runner import prestart_compilers

        prestart_compilers(options.cache_dir, use_cache=settings.use_cache)
    rules = load_all_rules(list(settings.rules_files))
    facts = collect_facts(options)
    flat = with_working_kv_dtypes(facts, derived_facts(facts), rules, derived_facts,
                                  lambda judged: with_dry_run_facts(judged, None, rules))
    request, why_not = _plan_dry_run(facts, flat, options, settings)
    dry_run, fix_runs = None, {}
    if request is not None:
        static = evaluate_rules(rules, with_dry_run_facts(flat, None, rules))
        dry_run, fix_runs = _compile(request, static, rules, options, settings)
    flat = with_dry_run_facts(flat, dry_run, rules)
    findings = reconcile_with_dry_run(evaluate_rules(rules, flat), rules, flat, dry_run)
    if dry_run is not None and dry_run.status == Status.FAILED:
        fix_runs |= _compile_missing_fixes(request, findings, fix_runs, rules, options, settings)
        findings = attach_verifications(findings, fix_runs)
    findings = [_apply_ignore(f, settings.ignored) for f in findings]
    return Report(
        command="check", findings=tuple(findings), facts=flat, dry_run=dry_run,
        notes=tuple(_notes(facts, flat, why_not)), rules_checked=tuple(r.id for r in rules if r.when is not None),
    )


def derived_facts(facts: Facts) -> dict[str, Any]:
    """The check's facts phase after collection: the flat facts plus what the judged vLLM release(s) derive from
    them (KV dtype, serve arguments, attention selection, pins); the dry run is planned from these."""
    return facts.flat() | derive_kv_facts(facts)


def with_dry_run_facts(flat: dict[str, Any], dry_run: DryRunReport | None, rules) -> dict[str, Any]:
    """The facts the rules judge: flat plus the dry run's outcome (all unknown when None), a failure kind being
    'explained' when one of these rules names it."""
    return flat | derive_dryrun_facts(dry_run, {kind for r in rules for kind in r.compile_kinds})


def _plan_dry_run(facts: Facts, flat: dict[str, Any], options: CheckOptions,
                  settings: CheckSettings) -> tuple[DryRunRequest | None, str | None]:  # fmt: skip
    """The dry run these facts call for, or why there is none."""
    if not settings.compile:
        return None, "--no-compile"
    if facts.versions.vllm is None:
        # which kernels would run depends on the release: a compile of one guess must not decide the verdict
        return None, "the vLLM version is unknown, so are the kernels it would build (pass --vllm-version X)"
    judged = candidates(facts.versions.vllm).releases
    if not judged:  # a probe kernel's compile must not speak for an unread release
        return None, f"kvdoctor did not read vLLM {facts.versions.vllm}, so which kernels it builds is unknown"
    if not any(r.has("backend_replay") or r.has("backend_grid") for r in judged):  # 0.4-0.6: nor for its unread part
        return None, (f"kvdoctor did not read vLLM {facts.versions.vllm}'s attention backend choice, so which kernels "
                      "it builds is unknown")
    selected = flat.get("attention.backend") if flat.get("attention.backend") not in (None, "none") else None
    return dry_run_request(facts, selected, cache_dir=options.cache_dir, offline=options.offline)


def _notes(facts: Facts, flat: dict[str, Any], why_no_dry_run: str | None) -> list[str]:
    """What the user should know that is no finding: skipped steps, what could not be judged, where facts stop."""
    notes = list(facts.gpu.notes)
    if why_no_dry_run:
        notes.append(f"dry run skipped: {why_no_dry_run}")
    if flat.get("vllm.facts_note"):
        notes.append(flat["vllm.facts_note"])
    if flat.get("attention.backend") is None and facts.model is not None:
        why = flat.get("attention.picked_by") or "the GPU, the vLLM release or the model dtype is unknown"
        notes.append(f"which attention backend vLLM picks is undecided, so backend findings are not judged: {why}")
    if flat.get("attention.assumes") not in (None, "none"):  # kvdoctor/model/modelled.py
        notes.append(f"vLLM's attention backend choice here depends on the target image's packages: "
                     f"{flat['attention.assumes']}")
    if facts.serve.unknown_flags and flat.get("serve.args_accepted") is None:
        refused_by = flat.get("serve.args_rejected_by")
        accepted_by = flat.get("serve.args_accepted_by") or "none kvdoctor read in full"
        why = (f"the release decides: {refused_by} refuse them, {accepted_by} accept them"
               if refused_by not in (None, "none") else "no release's parser kvdoctor read could judge them")
        notes.append(f"serve flags kept, not judged ({why}): " + " ".join(facts.serve.unknown_flags))
    if facts.model and facts.model.dtype_note:
        notes.append(f"model dtype: {facts.model.dtype_note}")
    if flat.get("memory.fit") == "fits" and flat.get("memory.kv_budget_gib") is None:  # each release its own budget
        notes.append(f"KV cache {flat['memory.fit_by_release']}, each with its own defaults (the available "
                     "memory differs between them: pass --vllm-version for the figures vLLM will log)")
    elif flat.get("memory.fit") == "fits":
        band = f" +- {flat['memory.band_gib']} GiB" if flat.get("memory.band_gib") else ""
        log = (f"vLLM will log {flat['memory.vllm_log']}" if flat.get("memory.vllm_log") else
               "the releases log it differently (pass --vllm-version for vLLM's own lines)")
        notes.append(f"KV cache fits: {flat['memory.kv_budget_gib']} GiB{band} available per GPU; {log}")
        if flat.get("memory.auto_fit_max_model_len"):
            notes.append(f"--max-model-len auto: the model's {flat['context.max_model_len']:,} tokens do not fit, so vLLM "
                         f"shrinks max_model_len to about {flat['memory.auto_fit_max_model_len']:,} "
                         "(v1/core/kv_cache_utils.py _auto_fit_max_model_len)")
    elif flat.get("memory.fit") == "not_modelled" and flat.get("memory.why_not") not in (None, "none"):
        notes.append(f"whether the KV cache fits is not judged: {flat['memory.why_not']}")
    elif flat.get("memory.fit") is None and facts.model is not None:
        missing = [flag for flag, fact in (("--gpu", "gpu.memory_gib"), ("--vllm-version", "vllm.version"))
                   if flat.get(fact) is None]  # fmt: skip
        why = (f"it needs the GPU's memory and one vLLM release (the releases read differ in how they size the KV "
               f"cache): pass {' and '.join(missing)}" if missing else "the model's layers are not known well enough")
        if flat.get("memory.fit_by_release") and flat.get("gpu.memory_gib") is not None:
            why = f"the candidate releases disagree ({flat['memory.fit_by_release']}): pass --vllm-version"
        if flat.get("memory.why_not") not in (None, "none"):  # e.g. a release outside the pack
            why = flat["memory.why_not"]
        notes.append(f"whether the KV cache fits is not judged: {why}")
    return notes


def _compile(request, static, rules, options, settings) -> tuple[DryRunReport, dict[str, DryRunReport]]:
    """The check's dry run plus, speculatively, the fixes of statically fired rules: one compiler batch.
    A fix compiled for fewer kernel roles than actually failed is dropped here and compiled again in full."""
    from kvdoctor.dryrun import run_dry_runs

    fix_requests = fix_candidates(static, rules, request, options.cache_dir, settings.fix_sources,
                                  offline=_offline(options))  # fmt: skip
    reports = run_dry_runs(
        [request, *fix_requests.values()],
        cache_dir=options.cache_dir,
        use_cache=settings.use_cache,
        timeout_s=settings.compile_timeout_s,
    )
    failed_roles = {k.role for k in reports[0].kernels if k.status != Status.PASSED}
    outcomes = {
        key: report
        for key, report in zip(fix_requests, reports[1:])
        if report.request.roles is None or failed_roles <= set(report.request.roles) | {"probe"}
    }
    return reports[0], outcomes


def _offline(options) -> bool:
    from kvdoctor.facts.probes.model_source import offline_requested

    return offline_requested(options.offline)


def _compile_missing_fixes(request, findings, done: dict[str, DryRunReport], rules, options,
                           settings) -> dict[str, DryRunReport]:  # fmt: skip
    """Fixes of rules that fired only once the compile failed (or whose speculative compiles fell short)."""
    from kvdoctor.dryrun import run_dry_runs

    compiled_rules = {key.split(":")[0] for key in done}
    missing = [f for f in findings if f.status == "fired" and f.rule_id not in compiled_rules]
    if not missing:
        return {}
    fix_requests = fix_candidates(missing, rules, request, options.cache_dir, settings.fix_sources, all_roles=True,
                                  offline=_offline(options))  # fmt: skip
    if not fix_requests:
        return {}
    reports = run_dry_runs(
        list(fix_requests.values()),
        cache_dir=options.cache_dir,
        use_cache=settings.use_cache,
        timeout_s=settings.compile_timeout_s,
    )
    return dict(zip(fix_requests, reports))


def dry_run_request(facts: Facts, backend: str | None = None, *, cache_dir: Path | None = None,
                    offline: bool | None = None):  # fmt: skip
    """The DryRunRequest these facts call for, or (None, why not).

    backend: the attention backend vLLM would select (None: only a forced --attention-backend /
    VLLM_ATTENTION_BACKEND is known). A --vllm-version with no wheel or tree at hand gets that release's
    kernel files fetched from the package index into cache_dir (never when offline, or HF_HUB_OFFLINE set);
    failing that, kvdoctor's probe kernel stands in, and the request says why."""
    serve, model, gpu = facts.serve, facts.model, facts.gpu.weakest
    from kvdoctor.dryrun import dry_run_applies
    from kvdoctor.dryrun.runner import why_nothing_to_compile

    backend = backend or serve.attention_backend
    if not dry_run_applies(serve.kv_cache_dtype, backend):
        return None, why_nothing_to_compile(serve.kv_cache_dtype, backend)
    if gpu is None or gpu.capability is None:
        return None, "the target GPU is unknown (pass --gpu)"
    if model is None:
        # only scan gets here (check refuses a run without a model): the model was named but its config not read
        return None, "the model's config.json was not read, and the kernels need its dtype and head size"
    if model.dtype is None or model.head_dim is None or model.num_kv_heads is None:
        return None, "config.json lacks the dtype or head sizes the kernels need"
    if importlib.util.find_spec("triton") is None:
        return None, "triton is not installed (pip install triton)"
    tp = max(1, serve.tensor_parallel_size)
    kernels = facts.versions.vllm_kernels
    probe_reason = None
    if kernels is None and facts.versions.vllm_source == "--vllm-version" and facts.versions.vllm:
        from kvdoctor.base.cache_dir import default_cache_dir
        from kvdoctor.facts.probes.model_source import offline_requested
        from kvdoctor.dryrun.release_sources import fetch_source

        kernels, probe_reason = fetch_source(facts.versions.vllm, cache_dir or default_cache_dir(),
                                             offline=offline_requested(bool(offline)))  # fmt: skip
    request = DryRunRequest(
        kv_cache_dtype=serve.kv_cache_dtype,
        model_dtype=model.dtype,
        head_dim=model.head_dim,
        num_kv_heads=max(1, model.num_kv_heads // tp),
        capability=gpu.capability,
        block_size=serve.block_size or 16,
        vllm_source=None if kernels == "installed" else kernels,
        use_probe=kernels is None,
        vllm_version=facts.versions.vllm,
        backend=backend,
        num_q_heads=max(1, model.num_attention_heads // tp) if model.num_attention_heads else None,
        probe_reason=probe_reason,
        kv_lora_rank=model.kv_lora_rank,
    )
    return request, None


def _apply_ignore(finding, ignored: dict[str, str]):
    reason = ignored.get(finding.rule_id)
    return replace(finding, ignored_reason=reason) if reason else finding
