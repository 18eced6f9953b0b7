"""Which smaller KV-cache dtypes are a fix when one request does not fit: those that hold it (the memory model) and
that the check itself does not refuse on this GPU and release (the same facts with --kv-cache-dtype swapped, judged
by the same rules: the attention selection of each release and the kernel rules; kernels are not compiled)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvdoctor.model.facts import Facts

FIT_NEEDS_A_FIX = ("does_not_fit", "within_band")


def with_working_kv_dtypes(facts: Facts, flat: dict[str, Any], rules, derive, as_judged) -> dict[str, Any]:
    """flat plus memory.kv_dtypes_working / _refused: of memory.kv_dtypes_fitting, those that add no error finding
    ('none' when none; unknown when the fit needs no fix). `derive(facts) -> flat` is the check's facts phase,
    `as_judged(flat)` the facts its rules see (no dry run)."""
    from kvdoctor.rules.engine import evaluate_rules

    fitting = flat.get("memory.kv_dtypes_fitting")
    if flat.get("memory.fit") not in FIT_NEEDS_A_FIX or fitting in (None, "none"):
        return flat

    def errors(judged_flat: dict[str, Any]) -> set[str]:
        return {f.rule_id for f in evaluate_rules(rules, judged_flat) if f.status == "fired" and f.severity == "error"}

    already = errors(as_judged(flat))  # what fails whatever the KV dtype (the fit itself, a flag) is not the dtype's
    working, refused = [], []
    for entry in fitting.split("; "):
        dtype = entry.split(":", 1)[0]
        swapped = replace(facts, serve=replace(facts.serve, kv_cache_dtype=dtype))
        new = sorted(errors(as_judged(derive(swapped))) - already)
        (refused if new else working).append(f"{dtype} ({', '.join(new)})" if new else entry)
    return flat | {"memory.kv_dtypes_working": "; ".join(working) or "none",
                   "memory.kv_dtypes_refused": "; ".join(refused) or "none"}
