"""Prove kvdoctor's dry-run verdicts on a real NVIDIA GPU; writes one JSON of everything it measured.

    python3 -m gpu_verify.run_on_gpu --trees .gpu-carry --out $OUT/gpu-verify.json
    python3 -m gpu_verify.run_on_gpu --dry-runs-only --trees .gpu-carry --out cpu-dry-runs.json

--trees holds one unpacked vLLM tree per version (vllm/v1/attention/ops/triton_*.py and the dist-info
METADATA, taken from the released wheels). --dry-runs-only needs no GPU: it is the CPU-side half of the
cross-target comparison.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MODEL = REPO / "examples" / "qwen2.5-3b-instruct"
HEAD_DIM, KV_HEADS, BLOCK_SIZE = 128, 2, 16  # Qwen2.5-3B-Instruct, as `kvdoctor check` sees it
PRESETS = ("turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc")
DTYPES = ("bfloat16", "float16")
CAPS = ((9, 0), (8, 0), (7, 5))
PROBE_KV = ("turboquant_k8v4", "fp8", "fp8_e5m2")
SCALES = (0.25, 0.5, 1.0, 2.0, 4.0)


def _trees(root: Path) -> dict[str, Path]:
    from gpu_verify.vllm_kernels import tree_version

    return {tree_version(p): p for p in sorted(root.iterdir()) if (p / "vllm").is_dir()}


def _requests(trees: dict[str, Path]) -> list[tuple[dict[str, Any], Any]]:
    from kvdoctor.dryrun import DryRunRequest

    out = []
    for cap in CAPS:
        for version, tree in trees.items():
            for preset in PRESETS:
                for dtype in DTYPES:
                    key = {"vllm": version, "kv_cache_dtype": preset, "dtype": dtype, "target": f"sm_{cap[0]}{cap[1]}"}
                    out.append((key, DryRunRequest(preset, dtype, HEAD_DIM, KV_HEADS, cap, BLOCK_SIZE, str(tree))))
        for kv in PROBE_KV:
            for dtype in DTYPES:
                key = {"vllm": "probe", "kv_cache_dtype": kv, "dtype": dtype, "target": f"sm_{cap[0]}{cap[1]}"}
                out.append((key, DryRunRequest(kv, dtype, HEAD_DIM, KV_HEADS, cap, BLOCK_SIZE, None, use_probe=True)))
    return out


def dry_runs(trees: dict[str, Path]) -> dict[str, Any]:
    """kvdoctor's own dry-run verdicts for every configuration, per kernel."""
    from kvdoctor.dryrun import run_dry_runs

    pairs = _requests(trees)
    started = time.perf_counter()
    reports = []
    for cap in CAPS:  # one batch per target, as `kvdoctor check` compiles (see mixed_target_batch)
        batch = [r for _, r in pairs if tuple(r.capability) == cap]
        with tempfile.TemporaryDirectory() as cache:
            reports += run_dry_runs(batch, cache_dir=Path(cache), use_cache=False)
    rows = []
    for (key, _), report in zip(pairs, reports):
        kernels = {k.kernel: {"status": k.status, "kind": k.failure.kind if k.failure else None}
                   for k in report.kernels}
        rows.append({**key, "status": report.status, "failure_kind": report.failure_kind, "kernels": kernels})
    return {"triton": _version("triton"), "seconds": round(time.perf_counter() - started, 2), "rows": rows}


def mixed_target_batch() -> dict[str, Any]:
    """The fp8e5 probe for sm_80 alone, and after an sm_90 compile in the same batch (one compiler child)."""
    from kvdoctor.dryrun import DryRunRequest, run_dry_runs

    def batch(caps: list[tuple[int, int]]) -> list[list[Any]]:
        requests = [DryRunRequest("fp8_e5m2", "float16", HEAD_DIM, KV_HEADS, c, BLOCK_SIZE, None, True) for c in caps]
        with tempfile.TemporaryDirectory() as cache:
            reports = run_dry_runs(requests, cache_dir=Path(cache), use_cache=False)
        return [[f"sm_{c[0]}{c[1]}", r.status, r.failure_kind] for c, r in zip(caps, reports)]

    return {"triton": _version("triton"), "sm_80_alone": batch([(8, 0)]), "sm_90_then_sm_80": batch([(9, 0), (8, 0)])}


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    import torch

    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap",
                          "--format=csv,noheader"], capture_output=True, text=True)  # fmt: skip
    props = torch.cuda.get_device_properties(0)
    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "nvidia_smi": smi.stdout.strip(),
        "torch_cuda": {"name": props.name, "capability": [props.major, props.minor],
                       "memory_gib": round(props.total_memory / 2**30, 1), "count": torch.cuda.device_count()},
        "torch": torch.__version__, "cuda_runtime": torch.version.cuda, "triton": _version("triton"),
        "nvidia_ml_py": _version("nvidia-ml-py"), "python": platform.python_version(),
        "platform": platform.platform(),
    }  # fmt: skip


def _check_cli(args: list[str], cache: Path, out_json: Path) -> tuple[float, int, dict[str, Any] | None]:
    env = {**os.environ, "KVDOCTOR_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "kvdoctor", "check", "--model", str(MODEL), "--offline", "-f", "json",
           "-o", str(out_json), *args]  # fmt: skip
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    seconds = time.perf_counter() - started
    doc = json.loads(out_json.read_text()) if out_json.is_file() else None
    if doc is None:
        print(proc.stdout[-2000:], proc.stderr[-3000:], file=sys.stderr)
    return seconds, proc.returncode, doc


def cli_checks(trees: dict[str, Path], env: dict[str, Any]) -> dict[str, Any]:
    """`kvdoctor check` with no --gpu (NVML probe) and with --gpu A100, cold and warm, as subprocesses."""
    cases = {
        f"probe-{v}": ["--kv-cache-dtype", "turboquant_k8v4", "--vllm-source", str(t)] for v, t in trees.items()
    }
    cases |= {f"A100-{v}": ["--kv-cache-dtype", "turboquant_k8v4", "--gpu", "A100", "--vllm-source", str(t)]
              for v, t in trees.items()}  # fmt: skip
    cases["probe-no-compile"] = ["--kv-cache-dtype", "turboquant_k8v4", "--no-compile"]
    cases["probe-torch-check"] = ["--kv-cache-dtype", "turboquant_k8v4", "--no-compile", "--torch-check"]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in cases.items():
            cache = Path(tmp) / name
            cold, code, doc = _check_cli(args, cache, Path(tmp) / f"{name}-cold.json")
            warm = [_check_cli(args, cache, Path(tmp) / f"{name}-warm.json")[0] for _ in range(3)]
            facts = (doc or {}).get("facts", {})
            results[name] = {
                "args": args, "exit_code": code, "verdict": (doc or {}).get("verdict"),
                "rule_ids": [f.get("rule_id") for f in (doc or {}).get("findings", [])],
                "gpu_facts": {k: v for k, v in facts.items() if k.startswith(("gpu.", "dryrun.", "torch.", "triton."))},
                "notes": (doc or {}).get("notes", []),
                "cold_s": round(cold, 2), "warm_s": [round(w, 2) for w in warm],
                "warm_median_s": round(statistics.median(warm), 2),
            }  # fmt: skip
    probe = results.get(next(iter(cases)), {}).get("gpu_facts", {})
    tc = env["torch_cuda"]
    smi_driver = env["nvidia_smi"].split(",")[1].strip() if env["nvidia_smi"] else None
    results["probe_agrees"] = {
        "name": probe.get("gpu.name") == tc["name"],
        "capability": probe.get("gpu.capability") == float(f"{tc['capability'][0]}.{tc['capability'][1]}"),
        "memory_gib": abs((probe.get("gpu.memory_gib") or 0) - tc["memory_gib"]) < 1.0,
        "driver": probe.get("gpu.driver_version") == smi_driver,
        "source_nvml": probe.get("gpu.source") == "nvml",
    }
    return results


def _plans(trees: dict[str, Path]):
    """(key, kernels-or-None, jobs) per configuration, as the dry run plans them."""
    from kvdoctor.dryrun.plans import TRITON_DTYPES, plan_probe, plan_turboquant

    for cap in ((9, 0), (8, 0)):
        target = f"sm_{cap[0]}{cap[1]}"
        for version in trees:
            for preset in PRESETS:
                for dtype in DTYPES:
                    jobs = plan_turboquant(preset, TRITON_DTYPES[dtype], HEAD_DIM, KV_HEADS, cap, BLOCK_SIZE)
                    yield {"vllm": version, "kv_cache_dtype": preset, "dtype": dtype, "target": target}, jobs
        for kv in PROBE_KV:
            for dtype in DTYPES:
                jobs = plan_probe(kv, TRITON_DTYPES[dtype], HEAD_DIM, cap)
                yield {"vllm": "probe", "kv_cache_dtype": kv, "dtype": dtype, "target": target}, jobs


def comparable(row: dict[str, Any]) -> bool:
    """Whether launching this dry-run job on an SM 9.0 GPU tests the dry run's verdict. sm_90 jobs: always.
    sm_80 jobs: only where Triton's code does not depend on the capability (e4b15 is software for every
    capability >= 8.0; the MSE and decode kernels use no fp8 instruction); not the fp8e4nv/fp8e5 probes,
    which Hopper converts in hardware and Ampere cannot (fp8e4nv) or emulates (fp8e5)."""
    return row["target"] == "sm_90" or not (row["vllm"] == "probe" and row["kv_cache_dtype"] in ("fp8", "fp8_e5m2"))


def launches(trees: dict[str, Path], verdicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every dry-run job for sm_90 and sm_80 launched on this GPU; sm_80 jobs carry FP8_E4B15=1, so they
    run Triton's Ampere e4b15 conversion on Hopper. Compared per kernel with the dry-run verdict."""
    import torch

    from gpu_verify.launch import job_args, launch, new_workspace
    from gpu_verify.vllm_kernels import load_kernels
    from kvdoctor.dryrun import probe_kernel

    loaded = {v: load_kernels(t) for v, t in trees.items()}
    by_key = {(r["vllm"], r["kv_cache_dtype"], r["dtype"], r["target"]): r for r in verdicts}
    rows = []
    for key, jobs in _plans(trees):
        torch.manual_seed(0)
        kernels = loaded.get(key["vllm"])
        ws = new_workspace(jobs[0]) if kernels else None
        dry = by_key[(key["vllm"], key["kv_cache_dtype"], key["dtype"], key["target"])]
        for job in jobs:
            module = probe_kernel if kernels is None else (kernels.store if job.role == "store" else kernels.decode)
            path = probe_kernel.__file__ if kernels is None else str(kernels.path(job.source_file))
            args, grid = job_args(job, ws)
            result = launch(getattr(module, job.kernel), job, args, grid, path)
            expected = dry["kernels"][job.kernel]
            rows.append({**key, "kernel": job.kernel, "fp8_e4b15": job.constexprs.get("FP8_E4B15"),
                         "dry_run": expected["status"], "dry_run_kind": expected["kind"],
                         "launch": result["status"], "launch_kind": (result["failure"] or {}).get("kind"),
                         "launch_innermost": (result["failure"] or {}).get("innermost_type"),
                         "launch_triton_function": (result["failure"] or {}).get("triton_function"),
                         "comparable": comparable(key),
                         "agree": expected["status"] == result["status"]
                         and expected["kind"] == (result["failure"] or {}).get("kind"),
                         "launch_s": result["seconds"]})  # fmt: skip
    return rows


def _attention_reference(q: Any, k: Any, v: Any, scale: float) -> Any:
    import torch

    scores = torch.einsum("bhd,nhd->bhn", q.float(), k.float()) * scale
    return torch.einsum("bhn,nhd->bhd", scores.softmax(-1), v.float())


def launchers(trees: dict[str, Path]) -> list[dict[str, Any]]:
    """vLLM's own launchers end to end (store, then decode attention) for k8v4, on vLLM's rule for this
    GPU (e4nv) and forced onto e4b15; attention error against a float32 reference."""
    import torch

    from gpu_verify.vllm_kernels import load_kernels

    rows = []
    tokens, heads, dim, bs = 256, KV_HEADS, HEAD_DIM, BLOCK_SIZE
    slot = dim + math.ceil(dim * 4 / 8) + 4
    for version, tree in trees.items():
        kernels = load_kernels(tree)
        for dtype in (torch.bfloat16, torch.float16):
            for forced in (None, 1):
                kernels.force_fp8_e4b15(forced)
                torch.manual_seed(0)
                key = torch.randn(tokens, heads, dim, device="cuda").to(dtype)
                value = torch.randn(tokens, heads, dim, device="cuda").to(dtype)
                cache = torch.zeros(tokens // bs + 1, bs, heads, slot + slot % 2, dtype=torch.uint8, device="cuda")
                slots = torch.arange(bs, bs + tokens, device="cuda", dtype=torch.int64)
                table = torch.arange(1, tokens // bs + 1, dtype=torch.int32, device="cuda").unsqueeze(0)
                row = {"vllm": version, "dtype": str(dtype).removeprefix("torch."),
                       "fp8_e4b15": forced if forced is not None else kernels.decode._use_fp8_e4b15(0)}  # fmt: skip
                try:
                    kernels.store.triton_turboquant_store(key, value, cache, slots, None, None, 0, dim, 4, key_fp8=True)
                    torch.cuda.synchronize()
                    row["store"] = "passed"
                except Exception as exc:
                    row["store"] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                    rows.append(row)
                    continue
                query = torch.randn(1, heads, dim, device="cuda").to(dtype)
                centroids = torch.zeros(1, device="cuda")
                out = kernels.decode.triton_turboquant_decode_attention(
                    query, cache, table, torch.tensor([tokens], dtype=torch.int32, device="cuda"), None, centroids,
                    1 / math.sqrt(dim), 0, dim, 4, key_fp8=True)  # fmt: skip
                torch.cuda.synchronize()
                ref = _attention_reference(query, key, value, 1 / math.sqrt(dim))
                row["decode"] = "passed"
                row["attention_rel_error"] = round(float((out.float() - ref).norm() / ref.norm()), 5)
                rows.append(row)
        kernels.force_fp8_e4b15(None)
    return rows


def round_trips(trees: dict[str, Path]) -> list[dict[str, Any]]:
    from gpu_verify.roundtrip import measure
    from gpu_verify.vllm_kernels import load_kernels

    rows = []
    for version, tree in trees.items():
        kernels = load_kernels(tree)
        for dtype in ("bf16", "fp16"):
            for flag in (0, 1):
                for r in measure(kernels, dtype, flag, list(SCALES)):
                    rows.append({"vllm": version, "dtype": dtype, "path": "e4b15" if flag else "e4nv", **r})
    return rows


def cross_target(gpu_rows: list[dict[str, Any]], cpu_files: list[Path]) -> list[dict[str, Any]]:
    """sm_80/sm_75 (and sm_90) verdicts here against each CPU-only machine's file."""
    out = []
    mine = {(r["vllm"], r["kv_cache_dtype"], r["dtype"], r["target"]): r for r in gpu_rows}
    for path in cpu_files:
        cpu = json.loads(path.read_text())
        diffs, same = [], 0
        for r in cpu["rows"]:
            key = (r["vllm"], r["kv_cache_dtype"], r["dtype"], r["target"])
            here = mine.get(key)
            summary = lambda x: (x["status"], {k: (v["status"], v["kind"]) for k, v in x["kernels"].items()})  # noqa: E731
            if here is not None and summary(here) == summary(r):
                same += 1
            else:
                diffs.append({"key": key, "cpu": summary(r), "gpu": summary(here) if here else None})
        out.append({"file": path.name, "cpu_triton": cpu.get("triton"), "cpu_machine": cpu.get("machine"),
                    "compared": len(cpu["rows"]), "same": same, "differ": diffs})  # fmt: skip
    return out


def _step(name: str, fn, *args) -> Any:
    started = time.perf_counter()
    print(f"== {name}", flush=True)
    try:
        value = fn(*args)
    except Exception as exc:  # keep the other steps' results
        import traceback

        traceback.print_exc()
        value = {"error": f"{type(exc).__name__}: {exc}"}
    print(f"   {name}: {time.perf_counter() - started:.1f} s", flush=True)
    return value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trees", type=Path, default=REPO / ".gpu-carry")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dry-runs-only", action="store_true")
    parser.add_argument("--cpu-results", type=Path, nargs="*", default=[])
    opts = parser.parse_args()
    trees = _trees(opts.trees)
    if opts.dry_runs_only:
        doc = {**dry_runs(trees), "machine": f"{platform.node()} {platform.machine()}, no GPU",
               "python": platform.python_version()}  # fmt: skip
        doc["mixed_target_batch"] = mixed_target_batch()
        opts.out.write_text(json.dumps(doc, indent=1))
        return 0
    doc: dict[str, Any] = {"environment": _step("environment", environment)}
    doc["cli"] = _step("kvdoctor check", cli_checks, trees, doc["environment"])
    doc["dry_runs"] = _step("dry runs", dry_runs, trees)
    doc["launches"] = _step("launches", launches, trees, doc["dry_runs"].get("rows", []))
    doc["launchers"] = _step("vLLM launchers", launchers, trees)
    doc["round_trip"] = _step("round trip", round_trips, trees)
    doc["mixed_target_batch"] = _step("mixed-target batch", mixed_target_batch)
    doc["cross_target"] = _step("cross target", cross_target, doc["dry_runs"].get("rows", []), opts.cpu_results)
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(doc, indent=1, default=str))
    rows = doc["launches"] if isinstance(doc["launches"], list) else []
    bad = [r for r in rows if r["comparable"] and not r["agree"]] if rows else ["error"]
    print(f"launches: {sum(r['comparable'] for r in rows)} comparable of {len(rows)}, {len(bad)} disagree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
