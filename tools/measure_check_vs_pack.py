"""kvdoctor check's verdict against vLLM's own selection, over deployments nobody tuned a rule to.

    python tools/measure_check_vs_pack.py [--cells 1500] [--seed 7] [--json out.json]

Draws cells at random (fixed seed) from releases x model configs x GPUs x KV dtypes x forced backends x --dtype
and runs `check --no-compile` in-process on each. The reference is the pack's replay of vLLM's own selector
(tested against vLLM's real `get_attn_backend_cls` in tests/vllm_pack). Per cell it reports:
- `agree`: vLLM's parser refuses the command line, or it raises at selection (or in its backend's constructor
  guard), and check FAILs; or vLLM picks a backend and check does not FAIL;
- `fail_beyond_selection`: vLLM picks a backend and check FAILs for a reason after selection (a kernel that
  cannot compile, a start-up bug, the model dtype); listed by rule so a person can judge each group;
- `missed`: vLLM raises and check does not FAIL (a PASS where vLLM fails to start: always a bug);
- `undecided`: the pack cannot decide the cell (said in the report, never guessed).
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kvdoctor.check.run import CheckSettings, run_check  # noqa: E402
from kvdoctor.facts.collect import CheckOptions  # noqa: E402
from kvdoctor.base.errors import KvdoctorError  # noqa: E402
from kvdoctor.vllm_pack import load_release, pack_releases  # noqa: E402

MODELS = sorted(str(p) for p in (REPO / "tests" / "fixtures" / "configs").glob("*.json")) + [
    str(REPO / "examples" / "qwen2.5-3b-instruct"), str(REPO / "examples" / "deepseek-v2-lite-chat")]
GPUS = ["V100", "T4", "A100", "A10G", "L4", "L40S", "H100", "H200", "B200", "RTX 5090"]
KV = ["auto", "fp8", "fp8_e5m2", "fp8_e4m3", "bfloat16", "float16", "turboquant_k8v4", "turboquant_4bit_nc"]
FORCED = [None, None, None, "FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "TRITON_MLA", "FLASHMLA"]
DTYPES = [None, None, "float16", "bfloat16"]
# rules that judge the attention selection itself (the pack's facts): the others fire after selection
SELECTION_ERRORS = ("attention.error",)


def cell_outcome(report, cell: dict) -> tuple[str, list[str]]:
    facts = report.facts
    errors = sorted(f.rule_id for f in report.findings if f.status == "fired" and f.severity == "error")
    backend, error = facts.get("attention.backend"), facts.get("attention.error")
    refused = cell["kv_cache_dtype"] not in load_release(cell["vllm_version"]).kv_cache_dtypes
    dtype_refused = facts.get("model.dtype_error") not in (None, "none")  # the release's own dtype resolution
    if facts.get("serve.args_accepted") is False or refused or dtype_refused:  # vLLM stops before selection
        return ("agree" if errors else "missed"), errors
    if backend is None and error is None:
        return "undecided", errors
    vllm_fails = error not in (None, "none")
    if vllm_fails:
        return ("agree" if errors else "missed"), errors
    return ("agree" if not errors else "fail_beyond_selection"), errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    releases = list(pack_releases())
    counts: collections.Counter = collections.Counter()
    by_rule: dict[str, list] = collections.defaultdict(list)
    missed, bad_input = [], 0
    undecided: collections.Counter = collections.Counter()
    for _ in range(args.cells):
        cell = {"vllm_version": rng.choice(releases), "model": rng.choice(MODELS), "gpu": rng.choice(GPUS),
                "kv_cache_dtype": rng.choice(KV), "attention_backend": rng.choice(FORCED), "dtype": rng.choice(DTYPES)}
        options = CheckOptions(offline=True, resolve_kernels=False, environ={}, **cell)
        try:
            report = run_check(options, CheckSettings(compile=False))
        except KvdoctorError as exc:  # e.g. a KV dtype the release does not accept: exit 2, said in one line
            bad_input += 1
            counts["usage_error"] += 1
            by_rule["usage_error:" + exc.one_line()[:60]].append(cell)
            continue
        outcome, errors = cell_outcome(report, cell)
        counts[outcome] += 1
        if outcome == "undecided":
            undecided[(report.facts.get("attention.picked_by") or "an input the selector needs is unknown")[:100]] += 1
        if outcome == "missed":
            missed.append({**cell, "error": report.facts.get("attention.error")})
        if outcome == "fail_beyond_selection":
            by_rule[",".join(errors)].append({**cell, "backend": report.facts.get("attention.backend")})
    total = sum(counts.values())
    print(f"{total} cells: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    print("\nFAIL after a valid selection, by the rules that fired (judge each group):")
    for rules, cells in sorted(by_rule.items(), key=lambda kv: -len(kv[1])):
        example = cells[0]
        print(f"  {len(cells):4d}  {rules}   e.g. {json.dumps(example)}")
    if undecided:
        print("\nUndecided (the pack does not hold vLLM's answer), by why:")
        for why, n in undecided.most_common(8):
            print(f"  {n:4d}  {why}")
    if missed:
        print(f"\nPASS where vLLM fails at selection ({len(missed)}):")
        for m in missed[:20]:
            print("  ", json.dumps(m))
    if args.json:
        args.json.write_text(json.dumps({"counts": counts, "by_rule": by_rule, "missed": missed}, indent=1))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
