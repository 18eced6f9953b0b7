"""On this machine: kvdoctor's predictions for fit_grid.py's cases (made BEFORE the GPU run), and their comparison
with what real vLLM logged there.

    python -m gpu_verify.startups.fit_compare predict --version 0.25.1 [--parts cd] [--gpu H100] --out docs/real-startup-results/fit-predictions.json
    python -m gpu_verify.startups.fit_compare compare --predictions P.json --results R.json [R2.json ...] --out MD

A prediction is `kvdoctor check --no-compile --gpu GPU (H200 unless --gpu) --vllm-version V --format json -- vllm serve DIR FLAGS`
on the case's config (weights estimated from config.json, as for any checkpoint kvdoctor cannot read). A tiny
model's config exists only on the GPU machine: it is predicted afterwards from the config the run sent back, and
marked so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gpu_verify.startups.fit_grid import CONFIGS, grid

REPO = Path(__file__).resolve().parents[2]
KEEP = ("memory.", "context.", "quant.", "model.weights")


def predict_one(case: dict, version: str, config: dict | None = None, gpu: str = "H200") -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / case["id"]
        d.mkdir()
        if config is not None:
            (d / "config.json").write_text(json.dumps(config))
        else:
            shutil.copy(REPO / CONFIGS[case["model"]], d / "config.json")
        dummy = [] if case["model"].startswith("tiny:") else ["--load-format", "dummy"]
        argv = [sys.executable, "-m", "kvdoctor", "check", "--no-compile", "--gpu", gpu, "--vllm-version", version,
                "--format", "json", "--", "vllm", "serve", str(d), *dummy, *case["flags"]]
        env = dict(os.environ, HF_HUB_OFFLINE="1")
        p = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, timeout=300)
    try:
        report = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"exit": p.returncode, "error": (p.stderr or p.stdout)[-500:]}
    facts = {k: v for k, v in report["facts"].items() if k.startswith(KEEP)}
    rules = sorted({f.get("rule_id") or f.get("id") for f in report["findings"] if f.get("severity") in ("error", "warning")})
    return {"exit": p.returncode, "verdict": report["verdict"], "rules": rules, "facts": facts}


def predict(version: str, out: Path, parts: str = "ab", gpu: str = "H200") -> None:
    doc = {"version": version, "gpu": gpu, "cases": {}}
    for part in parts:
        for case in grid(part):
            if case["model"].startswith("tiny:"):
                doc["cases"][case["id"]] = {"predicted_after": "tiny model: config made on the GPU machine"}
                continue
            doc["cases"][case["id"]] = predict_one(case, version, gpu=gpu)
            print(case["id"], doc["cases"][case["id"]].get("verdict"), doc["cases"][case["id"]].get("rules"), flush=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=True))


def pct(pred: float | None, real: float | None) -> str:
    if pred is None or real is None or real == 0:
        return "-"
    return f"{100 * (pred - real) / real:+.1f}%"


def merged(results: list[Path]) -> tuple[list[dict], dict | None]:
    """Every case once: a later run's record replaces an earlier one unless the later was cut or not run."""
    by_id: dict[str, dict] = {}
    machine = None
    for path in results:
        doc = json.loads(path.read_text())
        machine = machine or doc.get("machine")
        for r in doc["results"]:
            if r["id"] not in by_id or r.get("outcome") not in ("cut", "not_run"):
                by_id[r["id"]] = r
    return list(by_id.values()), machine


def fit_outcome(r: dict) -> str | None:
    """What vLLM's own fit check said: `fits` once it logged the KV cache size (it raises before that line when one
    request does not fit), `does_not_fit` when it stopped with its KV-cache or max_model_len error, else None."""
    if r.get("kv_tokens") is not None:
        return "fits"
    text = " ".join(r.get("error_lines") or []) + " ".join(r.get("log_tail") or [])
    if "To serve at least one request" in text or "No available memory for the cache blocks" in text \
            or "greater than the derived max_model_len" in text or "max_model_len" in text and r["outcome"] == "stopped":
        return "does_not_fit"
    return None


def compare(predictions: Path, results: list[Path], out: Path) -> None:
    pred = json.loads(predictions.read_text())
    rows, machine = merged(results)
    gpu = f"{machine.get('gpu')} ({machine.get('gpu_memory')})" if machine else pred.get("gpu", "H200")
    lines = [f"# kvdoctor's fit and quantization verdicts against real vLLM {pred['version']} start-ups on {gpu}",
             "", f"Machine: {json.dumps(machine)}", f"Predicted for: {pred.get('gpu', 'H200')}", "",
             "Predictions were written before the GPU run (`fit_compare predict`, committed first); weights are",
             "estimated from config.json (the servers ran `--load-format dummy`: random weights of the real size).",
             "`sized` = vLLM logged its KV cache size (its fit check passed) but the server was not ready within the",
             "case's time limit (compilation / warm-up), so only the fit part of the verdict is judged.",
             "", "| case | vLLM | kvdoctor | fit right? | start right? | KV GiB real / predicted (err) | band GiB |"
             " tokens real / predicted (err) | weights GiB real / predicted |", "|---|---|---|---|---|---|---|---|---|"]
    fit_right = fit_judged = start_right = start_judged = outside_band_wrong = 0
    errs = []
    for r in rows:
        p = pred["cases"].get(r["id"], {})
        if r.get("outcome") in ("cut", "not_run") or "verdict" not in p:
            lines.append(f"| {r['id']} | {r.get('outcome')} | {p.get('verdict', p.get('predicted_after', '-'))} "
                         "| - | - | | | | |")
            continue
        f = p["facts"]
        real_fit = fit_outcome(r)
        pred_fit = f.get("memory.fit") or ("does_not_fit" if f.get("context.error") not in (None, "none") else None)
        fit_ok = None
        if real_fit is not None and pred_fit in ("fits", "does_not_fit"):
            fit_ok = pred_fit == real_fit
        elif real_fit is not None and pred_fit == "within_band":
            fit_ok = None  # WARN: inside the stated band, either outcome is allowed
        if fit_ok is not None:
            fit_judged += 1
            fit_right += fit_ok
        start_ok = None
        if r["outcome"] in ("served", "stopped"):
            start_ok = (p["verdict"] in ("PASS", "WARN")) == (r["outcome"] == "served")
            start_judged += 1
            start_right += start_ok
        kv_p, kv_r = f.get("memory.kv_budget_gib"), r.get("available_kv_gib")
        band = f.get("memory.band_gib")
        if kv_p is not None and kv_r is not None:
            errs.append(abs(kv_p - kv_r) / kv_r if kv_r else 0)
            if fit_ok is False and band is not None and abs(kv_p - kv_r) > band:
                outside_band_wrong += 1
        w_p = f.get("memory.weights_bytes")
        shown = "sized" if r["outcome"] == "timeout" and real_fit == "fits" else r["outcome"]
        mark = {True: "yes", False: "NO", None: "-"}
        lines.append(
            f"| {r['id']} | {shown} | {p['verdict']} {','.join(p['rules'])} | {mark[fit_ok]} | {mark[start_ok]} | "
            f"{kv_r} / {kv_p} ({pct(kv_p, kv_r)}) | {band} | {r.get('kv_tokens')} / {f.get('memory.kv_tokens')} "
            f"({pct(f.get('memory.kv_tokens'), r.get('kv_tokens'))}) | {r.get('weights_gib')} / "
            f"{round(w_p / 2**30, 2) if w_p else '-'} |")
    lines += ["", f"Fit verdicts right: {fit_right} of {fit_judged} (WARN inside the band not counted); start verdicts "
              f"right: {start_right} of {start_judged}; wrong outside the stated band: {outside_band_wrong}.",
              f"Available-KV error: median {sorted(errs)[len(errs) // 2] * 100:.1f}%, max {max(errs) * 100:.1f}% "
              f"over {len(errs)} start-ups that logged it." if errs else "No start-up logged its available KV memory."]
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-3:]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("predict")
    p.add_argument("--version", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--parts", default="ab", help="fit_grid parts to predict, e.g. cd")
    p.add_argument("--gpu", default="H200", help="the GPU kvdoctor predicts for (a name or alias in gpus.yaml)")
    c = sub.add_parser("compare")
    c.add_argument("--predictions", type=Path, required=True)
    c.add_argument("--results", type=Path, nargs="+", required=True)
    c.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.cmd == "predict":
        predict(args.version, args.out, args.parts, args.gpu)
    else:
        compare(args.predictions, args.results, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
