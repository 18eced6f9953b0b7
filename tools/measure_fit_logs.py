"""kvdoctor's fit prediction against what real vLLM start-ups logged (issue 24).

For every entry of tests/fixtures/startup_logs/index.yaml (public start-up logs with vLLM's memory lines), run check's
own fact collection on the entry's inputs (its config.json, --gpu, the release, the serve flags it logged) and compare:

- KV bytes per token: check's KV planner given the logged "Available KV cache memory" (as --kv-cache-memory-bytes, at
  both ends of the logged figure's 2-decimal rounding) must land on the logged "GPU KV cache size" tokens. That part
  is exact arithmetic: a mismatch is a bug (or a layer kind kvdoctor does not model) and is listed with the entry.
- available KV memory: predicted budget vs logged, relative error, and whether the logged figure lies inside the band
  kvdoctor states;
- KV tokens: predicted vs logged, relative error;
- each term of the budget: weights (predicted, from what check knows: config shapes, never the log's "Model loading
  took") vs logged, and the rest (activation peak + non-torch + CUDA graphs as modelled) vs what the log implies
  (utilization x device memory - logged weights - logged available KV).

Seen entries get a table; held-back ones (heldout: true) only aggregates (median / 90th percentile of |error|, how many
within the band), per batch (`batch:` in the index, 1 when absent; each batch's held-back quarter was drawn on its own)
and for the whole set. `--budget FILE` replaces kv_memory.yaml's `budget:` numbers (a YAML mapping of the same keys)
for a what-if, without editing the data file.

    .venv-ci/bin/python tools/measure_fit_logs.py [--budget FILE] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "fixtures" / "startup_logs"
GIB = 2**30
ROUNDING_GIB = 0.005  # vLLM prints available memory with 2 decimals (format_gib / "%.2f GiB")


def load_index(path: Path = LOGS / "index.yaml") -> list[dict]:
    return yaml.safe_load(path.read_text())["entries"]


def use_budget(overrides: dict | None) -> None:
    """Replace kv_memory.yaml's budget numbers for this process (what-if); None restores the data file's."""
    from kvdoctor.facts import memory_budget

    if not hasattr(memory_budget, "_data_budget_table"):
        memory_budget._data_budget_table = memory_budget.budget_table
    base = memory_budget._data_budget_table
    memory_budget.budget_table = base if overrides is None else (lambda: {**base(), **overrides})


def fit_facts(entry: dict, extra_flags: tuple[str, ...] = ()) -> dict:
    """check's context.* / memory.* facts for this entry, or {'error': one line} when check refuses the input."""
    from kvdoctor.base.errors import KvdoctorError
    from kvdoctor.facts.collect import CheckOptions, collect_facts
    from kvdoctor.facts.derive import derive_kv_facts

    config = str(LOGS / entry["config"])
    argv = ("vllm", "serve", config, *entry["flags"], *extra_flags)
    try:
        facts = collect_facts(CheckOptions(model=config, gpu=entry.get("gpu"), vllm_version=entry["judged_as"],
                                           serve_argv=argv, offline=True, resolve_kernels=False, environ={}))  # fmt: skip
    except KvdoctorError as exc:
        return {"error": str(exc).splitlines()[0]}
    flat = facts.flat() | derive_kv_facts(facts)
    return {k: v for k, v in flat.items() if k.startswith(("memory.", "context.", "gpu.", "serve.args"))}


def _logged_settings(entry: dict) -> tuple[str, ...]:
    """What the log states that the flags may not: the model dtype its engine line prints (else config.json's; bf16 and
    fp16 pages are the same size) and the max_num_batched_tokens it chose, as flags, unless the flags set them."""
    extra: list[str] = []
    dtype = entry["logged"].get("model_dtype") or json.loads((LOGS / entry["config"]).read_text()).get("torch_dtype")
    if dtype and "--dtype" not in entry["flags"]:
        extra += ["--dtype", dtype]
    batched = entry["logged"].get("max_num_batched_tokens")
    if batched and "--max-num-batched-tokens" not in entry["flags"]:
        extra += ["--max-num-batched-tokens", str(batched)]
    return (*extra, *_directory_settings(entry))


def _directory_settings(entry: dict) -> tuple[str, ...]:
    """What the model's directory decided and the entry's lone config.json cannot say, as flags: the pooling runner
    (a Sentence Transformers modules.json), which the engine's config line shows as pooler_config=PoolerConfig(...)
    (None for the generate runner). Used for the prediction too: check reads modules.json beside a real model."""
    if {"--runner", "--convert", "--task"} & set(entry["flags"]):
        return ()
    logged = (LOGS / f"{entry['name']}.log").read_text(errors="replace")
    return ("--runner", "pooling") if "pooler_config=PoolerConfig(" in logged else ()


def capacity_for_memory(entry: dict, available_gib: float) -> tuple[list[dict] | None, str | None]:
    """check's tokens and concurrency for the two ends of a logged available-memory figure (the model dtype as the
    log states it: the arithmetic is checked, not the GPU's dtype choice), or a reason it cannot say."""
    out = []
    for gib in (available_gib - ROUNDING_GIB, available_gib + ROUNDING_GIB):
        facts = fit_facts(entry, ("--kv-cache-memory-bytes", str(int(gib * GIB)), *_logged_settings(entry)))
        if "error" in facts:
            return None, facts["error"]
        if facts.get("memory.kv_tokens") is None:
            reasons = [facts.get("context.error"), facts.get("memory.why_not")]
            return None, next((r for r in reasons if r and r != "none"), "memory facts undecided")
        out.append({"tokens": facts["memory.kv_tokens"], "concurrency": facts["memory.max_concurrency"]})
    return out, None


def _pairs(logged: dict) -> list[tuple[float, int]]:
    """(available GiB, tokens) per distinct rank figure: ranks print their own, smallest with smallest."""
    avail, tokens = logged.get("available_kv_gib") or [], logged.get("kv_tokens") or []
    return list(zip(sorted(avail), sorted(tokens))) if avail and tokens and len(avail) == len(tokens) else []


def _budget_terms(source: str) -> dict:
    """The modelled terms check's kv_budget_source names (GiB)."""
    m = re.search(r"x gpu_memory_utilization ([\d.]+) - weights ([\d.]+) GiB.*?activation peak ([\d.]+) GiB, "
                  r"non-torch ([\d.]+) GiB, CUDA graphs ([\d.]+) GiB", source or "")  # fmt: skip
    if not m:
        return {}
    util, weights, act, non_torch, graphs = map(float, m.groups())
    return {"util": util, "weights": weights, "activation": act, "non_torch": non_torch, "graphs": graphs}


def measure(entry: dict) -> dict:
    """One entry's comparison (all GiB figures in GiB, errors relative to the logged figure)."""
    logged = entry["logged"]
    facts = fit_facts(entry, _directory_settings(entry))
    row: dict = {"name": entry["name"], "batch": entry.get("batch", 1), "heldout": bool(entry.get("heldout")),
                 "judged_as": entry["judged_as"], "gpu": entry.get("gpu"),
                 "known_miss": entry.get("known_miss")}  # fmt: skip
    if "error" in facts:
        row["error"] = facts["error"]
    row["bpt"] = facts.get("memory.kv_bytes_per_token")
    row["why_not"] = facts.get("memory.why_not") if facts.get("memory.why_not") not in (None, "none") else None
    # exact part: tokens from the logged memory
    checks = []
    concurrency = min(logged["concurrency"]) if logged.get("concurrency") else None
    for gib, tokens in _pairs(logged):
        ends, why = capacity_for_memory(entry, gib)
        check = {"available_gib": gib, "tokens": tokens, "why": why, "ok": None}
        if ends:
            lo, hi = ends
            check.update(lo=lo["tokens"], hi=hi["tokens"], ok=lo["tokens"] <= tokens <= hi["tokens"])
            if concurrency is not None and len(logged.get("available_kv_gib") or []) == 1:
                # vLLM prints the concurrency with 2 decimals
                check["concurrency"] = concurrency
                check["concurrency_ok"] = lo["concurrency"] - 0.005 <= concurrency <= hi["concurrency"] + 0.005
            if not check["ok"] and check.get("concurrency_ok"):
                # the pages and groups agree (same concurrency); releases up to at least 0.13 print "GPU KV cache
                # size" as num_blocks x block_size rather than int(concurrency x max_model_len) (read in 0.23+)
                check.update(ok=True, old_print=True)
        checks.append(check)
    row["exact"] = checks
    row["exact_ok"] = None if not checks or any(c["ok"] is None for c in checks) else all(c["ok"] for c in checks)
    # the prediction
    budget, band = facts.get("memory.kv_budget_bytes"), facts.get("memory.band_gib")
    avail = min(logged["available_kv_gib"]) if logged.get("available_kv_gib") else None
    tokens = min(logged["kv_tokens"]) if logged.get("kv_tokens") else None
    row["pred_avail_gib"] = None if budget is None or band is None or not entry.get("gpu") else budget / GIB
    row["band_gib"] = band
    row["logged_avail_gib"] = avail
    if row["pred_avail_gib"] is not None and avail:
        row["avail_err"] = (row["pred_avail_gib"] - avail) / avail
        row["in_band"] = abs(row["pred_avail_gib"] - avail) <= band + ROUNDING_GIB
    row["pred_tokens"] = facts.get("memory.kv_tokens") if row["pred_avail_gib"] is not None else None
    row["logged_tokens"] = tokens
    if row["pred_tokens"] is not None and tokens:
        row["tokens_err"] = (row["pred_tokens"] - tokens) / tokens
    # per term
    terms = _budget_terms(facts.get("memory.kv_budget_source"))
    weights_logged = max(logged["weights_gib"]) if logged.get("weights_gib") else None
    if facts.get("memory.weights_bytes"):
        row["pred_weights_gib"] = facts["memory.weights_bytes"] / GIB
    row["logged_weights_gib"] = weights_logged
    if row.get("pred_weights_gib") and weights_logged:
        row["weights_err"] = (row["pred_weights_gib"] - weights_logged) / weights_logged
    if terms and entry.get("gpu") and weights_logged is not None and avail is not None:
        total = logged.get("device_total_gib") or facts.get("gpu.memory_gib")
        row["device_total_gib"] = total
        row["table_total_gib"] = facts.get("gpu.memory_gib")
        row["logged_rest_gib"] = terms["util"] * total - weights_logged - avail
        row["pred_rest_gib"] = terms["activation"] + terms["non_torch"] + terms["graphs"]
        row["terms"] = terms
        # the breakdown vLLM prints from 0.10.2 on ("Free memory on device ... Actual usage is ..."), term by term
        parts = {"activation": logged.get("peak_activation_gib"), "non_torch": logged.get("non_torch_gib"),
                 "graphs": logged.get("cudagraph_estimate_gib")}  # fmt: skip
        row["term_vs_log"] = {k: (terms[k], v) for k, v in parts.items() if v is not None}
    return row


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def _num(x, fmt="{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _quantiles(values: list[float]) -> str:
    if not values:
        return "n=0"
    values = sorted(abs(v) for v in values)
    p90 = values[min(len(values) - 1, math.ceil(0.9 * len(values)) - 1)]
    return f"n={len(values)} median {100 * statistics.median(values):.1f}% p90 {100 * p90:.1f}%"


def aggregate(rows: list[dict]) -> dict:
    """Counts and error quantiles of a set of rows (no per-entry figures)."""
    exact = [r["exact_ok"] for r in rows if r["exact_ok"] is not None]
    banded = [r for r in rows if "in_band" in r]
    return {
        "entries": len(rows),
        "kv_bytes_per_token_exact": f"{sum(exact)}/{len(exact)} match ({len(rows) - len(exact)} not checkable)",
        "available_kv": _quantiles([r["avail_err"] for r in rows if "avail_err" in r]),
        "within_band": f"{sum(r['in_band'] for r in banded)}/{len(banded)}",
        "kv_tokens": _quantiles([r["tokens_err"] for r in rows if "tokens_err" in r]),
        "weights": _quantiles([r["weights_err"] for r in rows if "weights_err" in r]),
        "rest_gib_abs_error": (lambda v: f"n={len(v)} median {statistics.median(v):.2f} GiB max {max(v):.2f} GiB"
                               if v else "n=0")(sorted(abs(r["pred_rest_gib"] - r["logged_rest_gib"])
                                                       for r in rows if "pred_rest_gib" in r)),  # fmt: skip
    }


def print_table(rows: list[dict]) -> None:
    head = (f"{'entry':44} {'vLLM':7} {'GPU':9} {'B/tok':>7} {'exact':5} {'W pred/log GiB':>15} {'rest pred/log':>14} "
            f"{'avail pred+-band / log':>24} {'err':>7} {'tokens pred / log':>21} {'err':>7}")  # fmt: skip
    print(head)
    for r in rows:
        exact = {True: "yes", False: "NO", None: "-"}[r["exact_ok"]]
        weights = f"{_num(r.get('pred_weights_gib'))}/{_num(r.get('logged_weights_gib'))}"
        rest = f"{_num(r.get('pred_rest_gib'))}/{_num(r.get('logged_rest_gib'))}"
        avail = (f"{_num(r['pred_avail_gib'])}+-{_num(r['band_gib'])} / {_num(r['logged_avail_gib'])}"
                 if r.get("pred_avail_gib") is not None else f"- / {_num(r['logged_avail_gib'])}")  # fmt: skip
        tokens = f"{_num(r.get('pred_tokens'), '{:,}')} / {_num(r['logged_tokens'], '{:,}')}"
        print(f"{r['name'][:44]:44} {r['judged_as']:7} {(r['gpu'] or '-')[:9]:9} {_num(r['bpt'], '{:,}'):>7} {exact:5} "
              f"{weights:>15} {rest:>14} {avail:>24} {_pct(r.get('avail_err')):>7} {tokens:>21} "
              f"{_pct(r.get('tokens_err')):>7}")  # fmt: skip
        for c in r["exact"]:
            if c["ok"] is False:
                also = ("" if "concurrency_ok" not in c else "; the logged concurrency "
                        f"{c['concurrency']:.2f}x {'matches' if c['concurrency_ok'] else 'does not match either'}")
                print(f"    KV tokens mismatch: {c['available_gib']} GiB gives {c['lo']:,}-{c['hi']:,} tokens, "
                      f"vLLM logged {c['tokens']:,}{also}")  # fmt: skip
            elif c.get("old_print"):
                print(f"    concurrency {c['concurrency']:.2f}x matches; the logged {c['tokens']:,} tokens are this release's "
                      f"print (num_blocks x block_size), kvdoctor's 0.23+ formula gives {c['lo']:,}-{c['hi']:,}")
            elif c["ok"] is None:
                print(f"    exact check not run: {c['why']}")
        if r.get("term_vs_log"):
            print("    terms pred/logged GiB: " + ", ".join(f"{k} {p:.2f}/{v:.2f}" for k, (p, v) in r["term_vs_log"].items())
                  + f"; device memory {r['table_total_gib']} GiB in gpus.yaml, {r['device_total_gib']} GiB logged")
        for key in ("error", "why_not", "known_miss"):
            if r.get(key):
                print(f"    {key}: {r[key]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=Path, help="YAML mapping replacing kv_memory.yaml's budget: numbers")
    parser.add_argument("--json", type=Path, help="write every row (seen entries in full, held-back aggregates)")
    args = parser.parse_args(argv)
    if args.budget:
        overrides = yaml.safe_load(args.budget.read_text())
        if not isinstance(overrides, dict):
            print(f"error: {args.budget}: not a YAML mapping of budget numbers", file=sys.stderr)
            return 2
        use_budget(overrides.get("budget", overrides))
    rows = [measure(e) for e in load_index()]
    print(f"budget: {args.budget or 'kvdoctor/data/kv_memory.yaml'}")
    report: dict = {}
    for batch in sorted({r["batch"] for r in rows}):  # each batch's held-back quarter was drawn on its own
        seen = [r for r in rows if r["batch"] == batch and not r["heldout"]]
        held = [r for r in rows if r["batch"] == batch and r["heldout"]]
        print(f"\n== batch {batch}")
        print_table(seen)
        print(f"\nbatch {batch} seen entries:", json.dumps(aggregate(seen), indent=1))
        print(f"batch {batch} held-back entries (aggregates only):", json.dumps(aggregate(held), indent=1))
        report[f"batch {batch}"] = {"seen": seen, "heldout": aggregate(held)}
    seen, held = [r for r in rows if not r["heldout"]], [r for r in rows if r["heldout"]]
    print("\nall seen entries:", json.dumps(aggregate(seen), indent=1))
    print("all held-back entries (aggregates only):", json.dumps(aggregate(held), indent=1))
    if args.json:
        report["all"] = {"seen": aggregate(seen), "heldout": aggregate(held)}
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
