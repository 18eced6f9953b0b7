"""How well `kvdoctor explain` does on the real logs in tests/fixtures/logs_real (index.yaml).

    .venv/bin/python tools/measure_explain.py [--seen-only] [--verbose]

An entry counts as explained when
  - failure: true  -> exit 1, the reported failure family is the entry's family (any family for 'other'),
                      and every must_mention value appears in the text report (case-insensitive);
  - failure: false -> exit 0.
Prints the share for the seen entries (heldout: false) and, unless --seen-only, for the held-out ones. With
--verbose it lists each seen entry's outcome; held-out entries are only counted, never printed, so running it
while writing a family does not show their text.
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(description="share of real logs explained by kvdoctor explain")
    parser.add_argument("--seen-only", action="store_true")
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from kvdoctor.base.yaml_safe import load_yaml

    entries = load_yaml((LOGS / "index.yaml").read_text())
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
    for held, label in ((False, "seen"), (True, "held-out")):
        good, total = totals[held]
        if total:
            print(f"{label}: {good}/{total} explained ({100 * good / total:.0f}%); failing logs with exit 0: "
                  f"{contract[held][0]}, healthy logs with exit 1: {contract[held][1]}")


if __name__ == "__main__":
    main()
