"""kvdoctor's reading of real config.json files against vLLM's own ModelConfig (issues 24 and 25).

    .venv/bin/python tools/measure_config_oracle.py [--seen-only] [--verbose]

For every config in tests/fixtures/configs_public (index.yaml), vLLM's CPU build 0.32.0 (~/.cache/kvdoctor-vllmcpu,
or $KVDOCTOR_VLLMCPU_VENV) constructs `vllm.config.ModelConfig` (tools/config_oracle_child.py) and kvdoctor answers
`kvdoctor check --vllm-version 0.32.0 --gpu H100`'s facts for the same directory (in process). Compared, per config:
  - load       vLLM refuses the config: kvdoctor must quote the refusal (quant.error for a quantization method,
               vllm.arch_removed for an architecture the release dropped, vllm.arch_refusal for one it never
               registered) or at least not derive a length
  - default    max_model_len with no --max-model-len (vLLM's) = context.max_model_len (kvdoctor's)
  - plus_one   --max-model-len one above that default: vLLM's ValueError verbatim = context.error, or the same
  - double     --max-model-len twice the default      accepted length
  - quant      the quantization method ModelConfig resolves = quant.method ('none' for None)
  - dtype      ModelConfig's dtype = model.dtype
Prints counts for the seen configs (heldout: false) and, unless --seen-only, for the held-out ones; --verbose lists
each seen config's differences. Held-out configs are only counted, never printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "tests" / "fixtures" / "configs_public"
CHILD = Path(__file__).with_name("config_oracle_child.py")
VENV = Path(os.environ.get("KVDOCTOR_VLLMCPU_VENV", Path.home() / ".cache" / "kvdoctor-vllmcpu"))
VERSION = "0.32.0"
PROBES = ("plus_one", "double")
ASPECTS = ("load", "default", *PROBES, "quant", "dtype")


def load_index() -> list[dict]:
    """index.yaml's entries, each with its name and directory."""
    import yaml

    index = yaml.safe_load((CONFIGS / "index.yaml").read_text())["configs"]
    return [{"name": name, "dir": str(config_dir(name)), **entry} for name, entry in sorted(index.items())]


def config_dir(name: str) -> Path:
    """The config's directory; one whose files are stored gzipped (multi-MB per-layer quantization lists, kept out of
    git's plain files) is decompressed once into a directory of its own under the system's temp dir."""
    stored = CONFIGS / name
    packed = sorted(stored.glob("*.json.gz"))
    if not packed:
        return stored
    import gzip
    import tempfile

    target = Path(tempfile.gettempdir()) / "kvdoctor-configs-public" / name
    target.mkdir(parents=True, exist_ok=True)
    for path in packed:
        data = gzip.decompress(path.read_bytes())
        out = target / path.name[: -len(".gz")]
        if not out.is_file() or out.read_bytes() != data:
            out.write_bytes(data)
    return target


class OracleUnavailable(RuntimeError):
    """vLLM's CPU build is not installed (or does not run): no oracle."""


def vllm_answers(dirs: list[str], venv: Path = VENV) -> dict[str, dict]:
    """What vLLM's ModelConfig derives for each directory (one child process for all of them)."""
    python = venv / "bin" / "python"
    if not (venv / ".complete").is_file() or not python.is_file():
        raise OracleUnavailable(f"vLLM's CPU build is not installed at {venv} (.ci/run installs it)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KVDOCTOR_"))}
    run = subprocess.run([str(python), str(CHILD), json.dumps({"dirs": dirs, "probes": list(PROBES)})],
                         capture_output=True, text=True, timeout=3600, env=env)  # fmt: skip
    answers = {}
    for line in run.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[7:])
            answers[result["dir"]] = result
    if len(answers) != len(dirs):
        raise OracleUnavailable(f"vLLM's CPU build answered {len(answers)} of {len(dirs)} configs "
                                f"(exit {run.returncode}): {run.stderr[-2000:]}")  # fmt: skip
    return answers


def _check(directory: str, max_model_len: int | None) -> dict:
    """The facts `kvdoctor check -m DIR --gpu H100 --vllm-version 0.32.0 --offline --no-compile` reports."""
    from kvdoctor.base.errors import KvdoctorError
    from kvdoctor.check.run import derived_facts
    from kvdoctor.facts.collect import CheckOptions, collect_facts

    argv = ("vllm", "serve", directory, *(("--max-model-len", str(max_model_len)) if max_model_len is not None else ()))
    options = CheckOptions(serve_argv=argv, gpu="H100", vllm_version=VERSION, offline=True, resolve_kernels=False,
                           environ={})  # fmt: skip
    try:
        return derived_facts(collect_facts(options))
    except KvdoctorError as exc:
        return {"kvdoctor.failed": str(exc)}


def kvdoctor_answers(directory: str, vllm: dict) -> dict:
    """kvdoctor's facts for the directory: without --max-model-len and with each length vLLM was probed with."""
    answers = {"default": _check(directory, None)}
    for name, probe in (vllm.get("probes") or {}).items():
        answers[name] = _check(directory, probe["requested"])
    return answers


def _length_answer(facts: dict) -> str:
    if "kvdoctor.failed" in facts:
        return f"kvdoctor failed: {facts['kvdoctor.failed']}"
    error = facts.get("context.error")
    if error not in (None, "none"):
        return "ValueError: " + error
    return f"max_model_len={facts.get('context.max_model_len')}"


def compare(vllm: dict, kvdoctor: dict) -> dict[str, str | None]:
    """Per aspect: None when kvdoctor says what vLLM does, else 'vLLM ... | kvdoctor ...'."""
    default = kvdoctor["default"]
    if "error" in vllm or "crash" in vllm:
        refusal = vllm.get("error") or "crash"
        # vllm.arch_refusal shortens vLLM's list of supported architectures to its count: compare the words before it
        unsupported = (default.get("vllm.arch_refusal") or "none").split("[... the ")[0]
        quoted = [default.get("quant.error"), default.get("vllm.arch_removed"), unsupported]
        if any(q not in (None, "none") and q in refusal for q in quoted):  # a refusal kvdoctor quotes
            return {"load": None}
        derived = default.get("context.max_model_len")
        said = None if derived is None else f"vLLM refuses ({refusal}) | kvdoctor derives {derived}"
        return {"load": said}
    out: dict[str, str | None] = {"load": None}
    theirs = f"max_model_len={vllm['max_model_len']}"
    ours = _length_answer(default)
    out["default"] = None if ours == theirs else f"vLLM {theirs} | kvdoctor {ours}"
    for name, probe in vllm["probes"].items():
        theirs = probe.get("error") or f"max_model_len={probe['max_model_len']}"
        ours = _length_answer(kvdoctor[name])
        out[name] = None if ours == theirs else f"vLLM {theirs} | kvdoctor {ours}"
    theirs, ours = vllm["quantization"] or "none", default.get("quant.method")
    out["quant"] = None if ours == theirs else f"vLLM {theirs} | kvdoctor {ours}"
    theirs, ours = vllm["dtype"], default.get("model.dtype")
    out["dtype"] = None if ours == theirs else f"vLLM {theirs} | kvdoctor {ours}"
    return out


def measure(entries: list[dict]) -> dict[str, dict[str, str | None]]:
    """Each entry's comparison, by name."""
    answers = vllm_answers([e["dir"] for e in entries])
    ours = {e["name"]: kvdoctor_answers(e["dir"], answers[e["dir"]]) for e in entries}
    return {e["name"]: compare(answers[e["dir"]], ours[e["name"]]) for e in entries}


def summary(label: str, results: dict[str, dict[str, str | None]]) -> str:
    agree = Counter()
    asked = Counter()
    for outcome in results.values():
        for aspect, difference in outcome.items():
            asked[aspect] += 1
            agree[aspect] += difference is None
    whole = sum(all(d is None for d in outcome.values()) for outcome in results.values())
    refused = sum(set(outcome) == {"load"} for outcome in results.values())
    parts = ", ".join(f"{a} {agree[a]}/{asked[a]}" for a in ASPECTS if asked[a])
    return (f"{label}: {whole}/{len(results)} configs agree on every aspect ({refused} refused by vLLM's "
            f"ModelConfig); {parts}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seen-only", action="store_true", help="measure only the seen configs")
    parser.add_argument("--verbose", action="store_true", help="list each seen config's differences")
    args = parser.parse_args()
    entries = load_index()
    chosen = [e for e in entries if not (args.seen_only and e["heldout"])]
    try:
        results = measure(chosen)
    except OracleUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    seen = {e["name"]: results[e["name"]] for e in chosen if not e["heldout"]}
    held = {e["name"]: results[e["name"]] for e in chosen if e["heldout"]}
    if args.verbose:
        for name, outcome in seen.items():
            for aspect, difference in outcome.items():
                if difference is not None:
                    print(f"{name} [{aspect}]: {difference}")
    print(summary("seen", seen))
    if held:
        print(summary("held-out", held))
    return 0


if __name__ == "__main__":
    sys.exit(main())
