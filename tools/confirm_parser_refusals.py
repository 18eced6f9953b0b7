"""Ask real vLLM's own parser about scan's KVD004 findings on the public manifests (index.yaml) that the index does not
list as true: counts only, so it may run on the held-out files.

    python tools/confirm_parser_refusals.py --heldout     # or --seen (then --show prints the ones vLLM accepts)

The gatherers who wrote the index read each file's flags by hand; kvdoctor replays each release's parser. Where the
two disagree, the real parser decides: each finding whose refusing releases include the real vLLM installed in
$KVDOCTOR_VLLMCPU_VENV (~/.cache/kvdoctor-vllmcpu, vLLM 0.32.0's CPU build, installed by .ci/run) is parsed there by
`vllm serve`'s own argument parser, built as vLLM builds it (ServeSubcommand.subparser_init). Findings claimed only
for other releases are counted apart.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
VENV = Path(os.environ.get("KVDOCTOR_VLLMCPU_VENV", Path.home() / ".cache" / "kvdoctor-vllmcpu"))

JUDGE = r"""
import contextlib, io, json, sys
from packaging.version import Version
import vllm
from vllm.entrypoints.cli.serve import ServeSubcommand
from vllm.utils.argparse_utils import FlexibleArgumentParser

def covers(ranges, version):
    for part in filter(None, (p.strip() for p in ranges.split(","))):
        low, _, high = part.partition("-")
        if Version(low) <= Version(version) <= Version(high or low):
            return True
    return False

release = vllm.__version__.split("+")[0]
verdicts = []
for row in json.load(sys.stdin):
    if not covers(row["rejected_by"], release):
        verdicts.append("claimed for other releases only")
        continue
    argv = row["argv"][1:] if row["argv"][:1] == ["vllm"] else row["argv"]
    argv = argv if argv[:1] == ["serve"] else ["serve", *argv]
    top = FlexibleArgumentParser()
    ServeSubcommand().subparser_init(top.add_subparsers(dest="command"))
    try:
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            top.parse_args(argv)
        verdicts.append(f"real vLLM {release} accepts")
    except SystemExit:
        verdicts.append(f"real vLLM {release} refuses")
print(json.dumps(verdicts))
"""


def unlisted_refusals(group: str, listed_too: bool = False) -> list[dict]:
    """argv, refusing releases and title of each fired KVD004 on a workload whose index entry does not list it (or, with
    ``listed_too``, of every fired KVD004: the oracle checked against the index's own true errors)."""
    import measure_scan_public as measure

    from kvdoctor.check.run import CheckSettings
    from kvdoctor.scan.judge import ScanDefaults
    from kvdoctor.scan.run import run_scan

    cache, checkouts = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    rows = []
    for entry in measure.load_index(group):
        path = measure.as_checked_out(measure.scanned_path(entry), checkouts)
        report = run_scan([str(path)], ScanDefaults(offline=True, cache_dir=cache), CheckSettings(compile=False))
        expected = {(w["name"], w["container"]): w for w in entry["workloads"]}
        for result in report.workloads:
            want = expected.get((result.workload.name, result.workload.container)) or {}
            if not listed_too and "KVD004" in {t["rule"] for t in want.get("true_errors", ())}:
                continue
            for placed in result.placed:
                finding = placed.finding
                if finding.rule_id == "KVD004" and finding.status == "fired" and finding.severity == "error":
                    facts = result.report.facts if result.report else {}
                    rows.append({"argv": [t.text for t in result.workload.argv], "title": finding.title,
                                 "rejected_by": str(facts.get("serve.args_rejected_by") or "")})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--heldout", action="store_true")
    which.add_argument("--seen", action="store_true")
    parser.add_argument("--listed-too", action="store_true", help="also the findings the index lists as true")
    parser.add_argument("--show", action="store_true", help="print the findings real vLLM accepts (seen files only)")
    args = parser.parse_args()
    if args.show and not args.seen:
        parser.error("--show is for the seen files only: the held-back files' output stays unseen")
    python = VENV / "bin" / "python"
    if not python.is_file():
        parser.error(f"no real vLLM at {VENV} (.ci/run installs it; or set KVDOCTOR_VLLMCPU_VENV)")
    os.environ["HF_HUB_OFFLINE"] = "1"
    rows = unlisted_refusals("heldout" if args.heldout else "seen", args.listed_too)
    judged = subprocess.run([str(python), "-c", JUDGE], input=json.dumps(rows), capture_output=True, text=True,
                            check=True, env={**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"})
    verdicts = json.loads(judged.stdout.strip().splitlines()[-1])
    counts: dict[str, int] = {}
    for row, verdict in zip(rows, verdicts):
        counts[verdict] = counts.get(verdict, 0) + 1
        if args.show and "accepts" in verdict:
            print(f"  accepted: {row['argv']} | {row['title']}")
    scope = "" if args.listed_too else " the index does not list"
    print(f"{len(rows)} KVD004 findings{scope}: " + ", ".join(f"{n} {v}" for v, n in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
