"""How well `kvdoctor explain` does on the real logs in tests/fixtures/logs_real (index.yaml).

    .venv/bin/python tools/measure_explain.py [--seen-only] [--verbose] [--batch N] [--as-pasted] [--confusion]

An entry counts as explained when
  - failure: true  -> exit 1, the reported failure family is the entry's family (any family for 'other'; with
                      --strict, for 'other' only when explain names no family either),
                      and every must_mention value appears in the text report (case-insensitive);
  - failure: false -> exit 0.
Prints the share for the seen entries (heldout: false) and, unless --seen-only, for the held-out ones. With
--verbose it lists each seen entry's outcome; held-out entries are only counted, never printed, so running it
while writing a family does not show their text. With --batch N only the files of held-out batch N count (the
batch's commits are read from index.yaml's header, its files from git history, as tools/cut_heldout_batch.py does).
With --as-pasted only the seen entries are scored, once under each way people alter a log when they paste it
(AS_PASTED: HTML entities, typographic quotes, hard wraps, added prefixes and tags, record headers removed,
long lines cut).
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "tests" / "fixtures" / "logs_real"
# What issue 28's exit contract names as failure evidence in so many words: an ERROR or CRITICAL record, a traceback,
# an exception line. A log labelled healthy that holds one exits 1 by that contract (counted apart below).
CONTRACT_EVIDENCE = re.compile(r"\b(?:ERROR|CRITICAL)\b|Traceback \(most recent|^\s*(?:[\w.]+\.)?\w*(?:Error|Exception): ",
                               re.M)


def judge(entry: dict, alter=None, strict: bool = False) -> tuple[bool, str]:
    """Whether explain gets the entry right; ``alter`` (a function of one line) changes each line first."""
    from kvdoctor.explain.explain import explain_log, explain_text
    from kvdoctor.report.check.text import render

    from kvdoctor.explain.similar_reports import leaving_out

    with leaving_out(entry["file"]):  # a seen log is in the similar-reports data: it is never its own neighbour
        if alter is None:
            report = explain_log(str(LOGS / entry["file"]))
        else:
            text = (LOGS / entry["file"]).read_text(errors="replace")
            report = explain_text("\n".join(alter(line) for line in text.splitlines()) + "\n")
    code = report.exit_code("error")
    output = " ".join(render(report).split()).lower()
    family = report.extra.get("family")
    if not entry.get("failure", True):
        return code == 0, f"exit {code} (healthy expected), family {family}"
    if code == 0:
        from kvdoctor.explain.diagnosis import rules_with_role

        ends_early = rules_with_role("start_up_not_shown") & {finding.rule_id for finding in report.findings}
        return False, f"exit 0, family {family} (want {entry['family']}), " + (
            "the log ends before vLLM is up or fails" if ends_early else "vLLM is up in the log")
    missing = [m for m in entry.get("must_mention") or [] if str(m).lower() not in output]
    if entry["family"] == "other":  # no family fits: lenient takes any family, strict only none named ('other')
        family_ok = not strict or family in (None, "other")
    else:
        family_ok = family == entry["family"]
    ok = code == 1 and family_ok and not missing
    return ok, f"exit {code}, family {family} (want {entry['family']}), missing {missing}"


def _wrap(width: int):
    import textwrap

    return lambda line: "\n".join(textwrap.wrap(line, width, drop_whitespace=False, replace_whitespace=False)) \
        if len(line) > width else line


# How people paste logs: each alteration is applied to every line of the seen logs (--as-pasted).
AS_PASTED = {
    "html entities": lambda line: __import__("html").escape(line),
    "typographic quotes": lambda line: line.replace("'", "\u2019").replace('"', "\u201d"),
    "hard wrap at 120": _wrap(120),
    "hard wrap at 80": _wrap(80),
    "extra Ray tag": lambda line: "(RayWorkerWrapper pid=4711) " + line,
    "ISO timestamp": lambda line: "2024-06-25T16:32:00.123456Z " + line,
    "journald prefix": lambda line: "Jun 25 16:32:00 gpu-node-1 vllm[4711]: " + line,
    "compose prefix": lambda line: "vllm-1  | " + line,
    "indented": lambda line: "    " + line,
    "line numbers": (lambda count: lambda line: f"{next(count):>5}  " + line)(__import__("itertools").count(1)),
    "clock prefix": lambda line: "10:22:18.123 " + line,
    "list dash": lambda line: "- " + line,
    "cut at 200 with '...'": lambda line: line if len(line) <= 200 else line[:200] + "...",
    "no record headers": lambda line: re.sub(r"^(?:\(.*?pid=\d+\)\s*)?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) "
                                             r"\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[?[\w./:-]+\]? ", "", line),
}


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
    parser.add_argument("--as-pasted", action="store_true",
                        help="score the seen logs under each AS_PASTED alteration (HTML entities, hard wraps, ...)")
    parser.add_argument("--confusion", action="store_true",
                        help="also count the held-out misses by (wanted family, family named, exit): counts only, "
                             "no file names or text")
    parser.add_argument("--strict", action="store_true",
                        help="a log labelled 'other' counts only when explain names no family for it either")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from kvdoctor.base.yaml_safe import load_yaml

    text = (LOGS / "index.yaml").read_text()
    entries = load_yaml(text)
    if args.batch is not None:
        members = batch_members(args.batch, text)
        entries = [e for e in entries if e["file"] in members]
    if args.as_pasted:
        seen = [e for e in entries if not e.get("heldout") and (LOGS / e["file"]).is_file()]
        for name, alter in AS_PASTED.items():
            good = sum(judge(entry, alter)[0] for entry in seen)
            print(f"seen, {name}: {good}/{len(seen)} explained")
        return
    totals = {False: [0, 0], True: [0, 0]}
    contract = {False: [0, 0], True: [0, 0]}  # [failing logs with exit 0, healthy logs with exit 1]
    # [failing logs at exit 0 that end before vLLM is up or any failure line (explain's undecided start-up finding),
    # healthy logs at exit 1 that hold CONTRACT_EVIDENCE]
    explained_away = {False: [0, 0], True: [0, 0]}
    confusion: dict[tuple, int] = {}
    for entry in entries:
        held = bool(entry.get("heldout"))
        if held and args.seen_only:
            continue
        if not (LOGS / entry["file"]).is_file():
            continue
        ok, detail = judge(entry, strict=args.strict)
        totals[held][0] += ok
        totals[held][1] += 1
        failing = entry.get("failure", True) is not False
        if failing and detail.startswith("exit 0"):
            contract[held][0] += 1
            explained_away[held][0] += detail.endswith("before vLLM is up or fails")
        if not failing and detail.startswith("exit 1"):
            contract[held][1] += 1
            text = (LOGS / entry["file"]).read_text(errors="replace")
            explained_away[held][1] += CONTRACT_EVIDENCE.search(text) is not None
        if held and not ok and args.confusion:
            want = entry["family"] if failing else "healthy"
            got = re.search(r"exit (\d).*?family (\w+)", detail)
            key = (want, got.group(2) if got else "?", "exit " + (got.group(1) if got else "?"))
            confusion[key] = confusion.get(key, 0) + 1
        if args.verbose and not held:
            print(f"{'ok  ' if ok else 'MISS'} {entry['file']}: {detail}")
    prefix = (f"batch {args.batch} " if args.batch is not None else "") + ("strict, " if args.strict else "")
    for held, label in ((False, prefix + "seen"), (True, prefix + "held-out")):
        good, total = totals[held]
        if total:
            print(f"{label}: {good}/{total} explained ({100 * good / total:.0f}%); failing logs with exit 0: "
                  f"{contract[held][0]} ({explained_away[held][0]} end before vLLM is up or fails), healthy logs with "
                  f"exit 1: {contract[held][1]} ({explained_away[held][1]} hold an ERROR record, a traceback or an "
                  f"exception line)")
    for (want, got, code), count in sorted(confusion.items(), key=lambda item: -item[1]):
        print(f"held-out miss x{count}: want {want}, named {got}, {code}")


if __name__ == "__main__":
    main()
