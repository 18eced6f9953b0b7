"""Compare recorded real vLLM start-ups with `kvdoctor check` for the same configurations; no GPU needed.

    python -m gpu_verify.startups.compare docs/real-startup-results/*.json [--no-compile] [--wheels DIR]
        [--jobs 2] [--markdown FILE] [--json FILE]

For each recorded case it runs `kvdoctor check --model <the case's config.json> --gpu <its GPU> --vllm-version V
--kv-cache-dtype K --dtype D [--attention-backend B] --enforce-eager --max-model-len 512 --format json` with the
case's VLLM_* variables in the environment. Cases on the forced SM<8.9 key path (`force_e4b15`) are judged as an
A100 (`--gpu A100`), the nearest GPU that takes that path; they are marked as such. kvdoctor FAIL against a
start-up that failed or crashed agrees; PASS/WARN against a start-up that generated tokens agrees; time-outs,
machine errors (a module not shipped, a library built for another torch) and cut cases are not comparable.
Everything comes from the results JSON (the models' config.json included), so it re-runs after kvdoctor changes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gpu_verify.startups.outcome import VERDICTS, is_env_error

REPO = Path(__file__).resolve().parents[2]
# The start-up's error that each kvdoctor rule predicts (a substring of the innermost error or the summary).
RULE_SIGNATURES = {
    "KVD101": ("CompilationError", "AssertionError", "fp8e4b15"),
    "KVD102": ("Unknown TurboQuant cache dtype: 'auto'",),
    "KVD005": ("No valid attention backend found",),
    "KVD006": ("is not valid for this configuration",),
    "KVD007": ("NotImplementedError",),
    "KVD106": ("No valid attention backend found", "is not valid for this configuration"),
    "KVD109": ("Unknown TurboQuant cache dtype", "page_size_bytes"),
    "KVD114": ("maybe_quant_query", "does not match the q_data_type"),
    "KVD115": ("output must have dtype BF16",),
    "KVD118": ("layers/attention/attention.py",),  # the e4m3-only query-quant assert in Attention.forward
    "KVD123": ("does not support float16",),
    "KVD124": ("FA2 does not support scheduler_metadata",),
}


def machine_gpu(doc: dict) -> str:
    """The GPU the start-ups ran on, as kvdoctor's --gpu names it (H200 when the results do not say)."""
    name = (doc.get("machine") or {}).get("gpu", "")
    return next((gpu for gpu in ("H100", "H200", "H20", "GH200") if gpu in name.split()), "H200")


def kvdoctor_argv(case: dict, version: str, model_dir: Path, compile_: bool, gpu: str = "H200") -> list[str]:
    if "drawn" in case:  # a drawn case: the serve command as a user pastes it (block size included)
        serve = ["vllm", "serve", str(model_dir), "--kv-cache-dtype", case["kv"], "--dtype", case["dtype"],
                 "--enforce-eager", "--max-model-len", "512"]
        serve += ["--attention-backend", case["backend"]] if case.get("backend") else []
        serve += ["--block-size", str(case["block_size"])] if case.get("block_size") else []
        return [sys.executable, "-m", "kvdoctor", "check", "--gpu", gpu, "--vllm-version", version, "--format",
                "json", "--fail-on", "error", *(() if compile_ else ("--no-compile",)), "--", *serve]
    argv = [sys.executable, "-m", "kvdoctor", "check", "--model", str(model_dir),
            "--gpu", "A100" if case.get("force_e4b15") else gpu, "--vllm-version", version,
            "--kv-cache-dtype", case["kv"], "--dtype", case["dtype"], "--enforce-eager", "--max-model-len", "512",
            "--format", "json", "--fail-on", "error"]
    if case.get("backend"):
        argv += ["--attention-backend", case["backend"]]
    if not compile_:
        argv.append("--no-compile")
    return argv


def kvdoctor_env(case: dict, wheels: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VLLM_")}
    if case.get("runner") is not None:
        env["VLLM_USE_V2_MODEL_RUNNER"] = case["runner"]
    if wheels:
        env["KVDOCTOR_VLLM_WHEELS"] = wheels
    return env


def run_kvdoctor(argv: list[str], env: dict) -> dict:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"verdict": "ERROR", "exit": proc.returncode, "stderr": proc.stderr.strip()[-300:]}
    fired = [f for f in report.get("findings", []) if f.get("status") == "fired"]
    return {"verdict": report.get("verdict"), "exit": proc.returncode,
            "errors": [f["rule_id"] for f in fired if f.get("severity") == "error"],
            "warnings": [f["rule_id"] for f in fired if f.get("severity") == "warning"],
            "titles": {f["rule_id"]: f.get("title", "") for f in fired if f.get("severity") == "error"},
            "dry_run": (report.get("dry_run") or {}).get("status")}


def judge(outcome: str, kvd: dict) -> str:
    """agree / disagree / not comparable, from the start-up outcome and kvdoctor's verdict."""
    if outcome not in VERDICTS or kvd.get("verdict") not in ("PASS", "WARN", "FAIL"):
        return "not comparable"
    predicted_fail = kvd["verdict"] == "FAIL"
    failed = outcome in ("failed", "crashed")
    return "agree" if predicted_fail == failed else "disagree"


def cause_match(record: dict, kvd: dict) -> str | None:
    """For a failure both saw: does a fired rule's signature appear in the start-up's innermost error?"""
    if record["outcome"] != "failed" or kvd.get("verdict") != "FAIL":
        return None
    text = json.dumps(record.get("result", {}).get("error", [])) + record.get("summary", "")
    known = [r for r in kvd.get("errors", []) if r in RULE_SIGNATURES]
    if not known:
        return "no signature for " + ",".join(kvd.get("errors", []))
    hits = [r for r in known if any(s in text for s in RULE_SIGNATURES[r])]
    return "same cause" if hits else f"other cause ({','.join(known)} not in the error)"


# Outcomes that say nothing about vLLM: the test model, not the configuration, decided them.
ARTEFACTS = (
    ("hybrid", "KeyError: 'linear_attention'",
     "the random Granite-4.0-H model from this transformers names its layers in a way this vLLM does not read"),
)


def artefact(record: dict) -> str | None:
    """Why a recorded outcome is not a verdict on the configuration, if it is not."""
    result = record.get("result") or {}
    backends = result.get("attention_backends")
    if (record["kv"].startswith("turboquant") and record["outcome"] == "started" and backends is not None
            and "TURBOQUANT" not in backends):
        return "no layer used TurboQuant (the model's layers all stayed in the native dtype)"
    for model, text, why in ARTEFACTS:
        if record["model"] == model and text in record.get("summary", ""):
            return why
    return None


def load(paths: list[Path]) -> list[tuple[dict, dict]]:
    """Every recorded case once: a later file's record replaces an earlier one unless only the earlier is a verdict."""
    kept: dict[tuple[str, str], tuple[dict, dict]] = {}
    for path in paths:
        doc = json.loads(path.read_text())
        for record in doc["results"]:
            chain = (record.get("result") or {}).get("error")
            if chain and record["outcome"] == "failed" and is_env_error(chain):  # re-read with today's rules
                record = dict(record, outcome="env_error")
            elif record["outcome"] == "failed" and "stack_at_limit" in record:  # the limit's signal raised it
                record = dict(record, outcome="timeout", summary="stopped at the limit: " + record.get("summary", ""))
            key = (doc["release"]["vllm"], record["id"])
            old = kept.get(key)
            if old is None or record["outcome"] in VERDICTS or old[1]["outcome"] not in VERDICTS:
                kept[key] = (doc, record)
    return sorted(kept.values(), key=lambda pair: (pair[0]["release"]["vllm"], pair[1]["id"]))


def compare(paths: list[Path], compile_: bool = True, wheels: str | None = None, jobs: int = 2) -> list[dict]:
    pairs = load(paths)
    with tempfile.TemporaryDirectory() as tmp:
        model_dirs: dict[tuple[str, str], Path] = {}
        for doc, _ in pairs:
            for name, cfg in (doc.get("models") or {}).items():
                key = (doc["release"]["vllm"], name)
                if key not in model_dirs and isinstance(cfg, dict):
                    d = Path(tmp) / f"{key[0]}-{name}"
                    d.mkdir()
                    (d / "config.json").write_text(json.dumps(cfg))
                    model_dirs[key] = d

        def one(pair: tuple[dict, dict]) -> dict:
            doc, record = pair
            version = doc["release"]["vllm"]
            row = {"vllm": version, "id": record["id"], "outcome": record["outcome"],
                   "summary": record.get("summary", record.get("reason", "")), "proxy": bool(record.get("force_e4b15"))}
            model_dir = model_dirs.get((version, record["model"]))
            why = artefact(record)
            if why:
                row["summary"] += f" [{why}]"
            if model_dir is None or record["outcome"] in ("not_run", "cut") or why:
                row.update(kvdoctor={"verdict": "-"}, judgement="not comparable")
                return row
            argv = kvdoctor_argv(record, version, model_dir, compile_, machine_gpu(doc))
            kvd = run_kvdoctor(argv, kvdoctor_env(record, wheels))
            row.update(kvdoctor=kvd, judgement=judge(record["outcome"], kvd), cause=cause_match(record, kvd))
            return row

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(one, pairs))


def markdown(rows: list[dict]) -> str:
    lines = ["| vLLM | case | start-up | kvdoctor | judgement |", "|---|---|---|---|---|"]
    for r in rows:
        kvd = r["kvdoctor"]
        rules = ",".join(kvd.get("errors", []) + [f"({w})" for w in kvd.get("warnings", [])])
        verdict = f"{kvd.get('verdict')} {rules}".strip()
        judgement = r["judgement"] + (f"; {r['cause']}" if r.get("cause") else "") + (" (A100 proxy)" if r["proxy"] else "")
        summary = r["summary"].replace("|", "\\|")[:160]
        lines.append(f"| {r['vllm']} | {r['id']} | {r['outcome']}: {summary} | {verdict} | {judgement} |")
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["judgement"]] = counts.get(r["judgement"], 0) + 1
    lines.append("")
    lines.append(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", type=Path)
    ap.add_argument("--no-compile", action="store_true", help="pass --no-compile to kvdoctor check")
    ap.add_argument("--wheels", help="vLLM wheels for kvdoctor's dry run ($KVDOCTOR_VLLM_WHEELS)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    missing = [p for p in args.results if not p.exists()]
    if missing:
        print(f"compare: error: no such results file: {missing[0]}", file=sys.stderr)
        return 2
    rows = compare(args.results, compile_=not args.no_compile, wheels=args.wheels, jobs=args.jobs)
    table = markdown(rows)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
