"""How well `kvdoctor explain` does on the real logs in tests/fixtures/logs_real (index.yaml).

    .venv/bin/python tools/measure_explain.py [--seen-only] [--verbose] [--batch N]

An entry counts as explained when
  - failure: true  -> exit 1, the reported failure family is the entry's family (any family for 'other'),
                      and every must_mention value appears in the text report (case-insensitive);
  - failure: false -> exit 0.
Prints the share for the seen entries (heldout: false) and, unless --seen-only, for the held-out ones. With
--verbose it lists each seen entry's outcome; held-out entries are only counted, never printed, so running it
while writing a family does not show their text. With --batch N only the files of held-out batch N count (the
batch's commits are read from index.yaml's header, its files from git history, as tools/cut_heldout_batch.py does).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "fixtures" / "logs_real"


def judge(entry: dict) -> tuple[bool, str]:
    from kvdoctor.explain.explain import explain_log
    from kvdoctor.report.check.text import render

    report = explain_log(str(LOGS / entry["file"]))
    code = report.exit_code("error")
    output = " ".join(render(report).split()).lower()
    family = report.extra.get("family")
    if not entry.get("failure", True):
        return code == 0, f"exit {code} (healthy expected), family {family}"
    missing = [m for m in entry.get("must_mention") or [] if str(m).lower() not in output]
    family_ok = entry["family"] == "other" or family == entry["family"]
    ok = code == 1 and family_ok and not missing
    return ok, f"exit {code}, family {family} (want {entry['family']}), missing {missing}"


def batch_members(batch: int, header: str) -> set[str]:
    """File names of batch `batch`, from its line in index.yaml's header ('batch N: K files, those added by
    commit(s) A[–B] ...') and the commits of the log directory; exits with one line when the batch is unknown."""
    m = re.search(rf"^#\s+batch {batch}: (\d+) files, those added by commits? (\d+)(?:[–-](\d+))?", header, re.M)
    if not m:
        print(f"measure_explain: batch {batch} is not in index.yaml's header (or was cut from a file list)",
              file=sys.stderr)
        sys.exit(2)
    spec = importlib.util.spec_from_file_location("cut_heldout_batch", ROOT / "tools" / "cut_heldout_batch.py")
    cut = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cut)
    files, _ = cut.batch_files(f"{m.group(2)}-{m.group(3) or m.group(2)}")
    if len(files) != int(m.group(1)):
        print(f"measure_explain: batch {batch} has {len(files)} files in git history, the header says {m.group(1)}",
              file=sys.stderr)
        sys.exit(2)
    return set(files)


def main() -> None:
    parser = argparse.ArgumentParser(description="share of real logs explained by kvdoctor explain")
    parser.add_argument("--seen-only", action="store_true")
    parser.add_argument("--verbose", "-v", action="store_true")
    parser.add_argument("--batch", type=int, help="only the files of held-out batch N (see index.yaml's header)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from kvdoctor.base.yaml_safe import load_yaml

    text = (LOGS / "index.yaml").read_text()
    entries = load_yaml(text)
    if args.batch is not None:
        members = batch_members(args.batch, text)
        entries = [e for e in entries if e["file"] in members]
    totals = {False: [0, 0], True: [0, 0]}
    contract = {False: [0, 0], True: [0, 0]}  # [failing logs with exit 0, healthy logs with exit 1]
    for entry in entries:
        held = bool(entry.get("heldout"))
        if held and args.seen_only:
            continue
        if not (LOGS / entry["file"]).is_file():
            continue
        ok, detail = judge(entry)
        totals[held][0] += ok
        totals[held][1] += 1
        failing = entry.get("failure", True) is not False
        if failing and detail.startswith("exit 0"):
            contract[held][0] += 1
        if not failing and detail.startswith("exit 1"):
            contract[held][1] += 1
        if args.verbose and not held:
            print(f"{'ok  ' if ok else 'MISS'} {entry['file']}: {detail}")
    prefix = f"batch {args.batch} " if args.batch is not None else ""
    for held, label in ((False, prefix + "seen"), (True, prefix + "held-out")):
        good, total = totals[held]
        if total:
            print(f"{label}: {good}/{total} explained ({100 * good / total:.0f}%); failing logs with exit 0: "
                  f"{contract[held][0]}, healthy logs with exit 1: {contract[held][1]}")


if __name__ == "__main__":
    main()
