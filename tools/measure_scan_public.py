"""Measure `kvdoctor scan` on the real public manifests (tests/fixtures/manifests/public/, issue 27).

The index (index.yaml) holds, per file, the vLLM workloads a human reads in it and the error findings that are
true. This scans each file as it is (no model config, no network, no compile, no --gpu) and prints counts only:
workloads expected / found / checked, error findings, and false errors (an error the index does not list as true,
or an error on a workload the index does not expect), plus files unread and whether a scan of the whole folder
finished. A workload is *checked* when it has a report, no input error, and every judgement it could not make
names the input that decides it (--gpu, --model-path, the vLLM version).

    python tools/measure_scan_public.py --heldout      # the held-back quarter: counts only
    python tools/measure_scan_public.py --seen          # the rest
    python tools/measure_scan_public.py --seen --details  # seen files: each miss and each false error (never
                                                         # for held-back files, whose output stays unseen)
    python tools/measure_scan_public.py --heldout --batch s33  # one batch of the index only (first, s32, s33, s34, s35, s36)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

PUBLIC = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "manifests" / "public"
TREES = PUBLIC.parent / "charts"
"""Helm charts stored whole (tests/fixtures/manifests/charts/OWNER__REPO/PATH, the same commit): a file of such a
chart is scanned where it sits in its repository, beside its Chart.yaml and templates, as a user's checkout has it."""
DECIDING_INPUTS = ("--gpu", "--model-path", "--vllm-version")
# another accelerator than an NVIDIA GPU: no input decides what kvdoctor does not model (scan/accelerator.py)
SETTLED = ("not an NVIDIA GPU:",)


@dataclass
class Tally:
    files: int = 0
    unread: int = 0
    expected: int = 0
    found: int = 0
    checked: int = 0
    extra: int = 0
    errors: int = 0
    false_errors: int = 0
    false_beyond: int = 0
    renamed: int = 0
    """Expected workloads not found by (name, container) but paired with a workload found beyond the index in the same
    file that shares the name or the container, or whose name holds the other's: found, named otherwise."""
    renamed_checked: int = 0
    """False errors on workloads the index does not name (found beyond it: often the same workload, named otherwise)."""
    undecided_errors: int = 0
    details: list[str] = field(default_factory=list)
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # workload kind (the index's) -> [expected, found, checked]
    # rule -> [false errors on expected workloads, beyond the index]
    false_by_rule: dict[str, list[int]] = field(default_factory=dict)


def load_index(which: str, batch: str | None = None) -> list[dict]:
    """The index's entries of a group (seen / heldout / all), of one batch when given ('first': those without one)."""
    files = sorted(PUBLIC.glob("index*.yaml"), key=lambda p: (p.name != "index.yaml", p.name))  # index.yaml, then index-2.yaml
    entries = [e for path in files for e in yaml.safe_load(path.read_text())["files"]]
    entries = [e for e in entries if batch is None or e.get("batch", "first") == batch]
    return [e for e in entries if which == "all" or e["heldout"] == (which == "heldout")]


def scanned_path(entry: dict) -> Path:
    """The file's copy in its stored repository tree when there is one (byte-identical), else the flat fixture."""
    tree = TREES / entry["repo"].replace("/", "__") / entry["path"]
    return tree if tree.is_file() else PUBLIC / entry["file"]


def error_findings(result) -> list[tuple[str, int | None]]:
    """(rule id or 'ERROR', line) of each error a workload's result reports: fired error findings and an input error."""
    found = [(p.finding.rule_id, p.location.line) for p in result.placed if p.finding.status == "fired"
             and p.finding.severity == "error" and not p.finding.ignored_reason]  # fmt: skip
    if result.error is not None:
        found.append(("ERROR", result.error_location.line if result.error_location else None))
    return found


def is_checked(result) -> bool:
    """A report, no input error, and every judgement left open names what decides it."""
    if result.report is None or result.error is not None:
        return False
    open_ = [f for f in result.report.findings if f.status == "undecided"]
    return all(f.decided_by for f in open_) and all(any(i in u for i in DECIDING_INPUTS) or u.startswith(SETTLED) for u in result.unjudged)


def as_checked_out(path: Path, scratch: Path) -> Path:
    """A file of a stored repository tree, scanned as a user's checkout has it: the tree copied once into scratch
    with a `.git` folder at its top (git is not allowed to store one), so that what scan looks for up to the
    checkout's root (a chart beside a values file kept outside it, project pins) is found as in the real checkout."""
    if TREES not in path.parents:
        return path
    repo = path.relative_to(TREES).parts[0]
    copy = scratch / repo
    if not copy.exists():
        shutil.copytree(TREES / repo, copy, symlinks=True)
        (copy / ".git").mkdir()
    return copy / path.relative_to(TREES / repo)


def measure(entries: list[dict], details: bool) -> Tally:
    from kvdoctor.check.run import CheckSettings
    from kvdoctor.scan.judge import ScanDefaults
    from kvdoctor.scan.run import run_scan

    tally = Tally()
    cache = Path(tempfile.mkdtemp(prefix="kvd-measure-"))
    checkouts = Path(tempfile.mkdtemp(prefix="kvd-checkouts-"))
    for entry in entries:
        tally.files += 1
        report = run_scan([str(as_checked_out(scanned_path(entry), checkouts))], ScanDefaults(offline=True, cache_dir=cache),
                          CheckSettings(compile=False))  # fmt: skip
        tally.unread += len(report.unread)
        results = {(r.workload.name, r.workload.container): r for r in report.workloads}
        expected = {(w["name"], w["container"]): w for w in entry["workloads"]}
        for key, want in expected.items():
            tally.expected += 1
            result = results.get(key)
            kind = tally.by_kind.setdefault(str(want.get("kind")), [0, 0, 0])
            kind[0] += 1
            kind[1] += result is not None
            kind[2] += result is not None and is_checked(result)
            if result is None:
                tally.details.append(f"{entry['file']}: {key} not found")
                continue
            tally.found += 1
            tally.checked += is_checked(result)
            findings = result.report.findings if result.report else ()
            tally.undecided_errors += sum(f.status == "undecided" and f.severity == "error" for f in findings)
            if not is_checked(result):
                tally.details.append(f"{entry['file']}: {key} not checked ({result.error or result.unjudged})")
            true = {t["rule"] for t in want.get("true_errors", ())}
            # a flag value kvdoctor's own validation refuses (the workload's input error, `--dtype float8`) is the
            # refusal vLLM's parser gives (KVD004) found one step earlier, at the same line
            parser_lines = {t.get("line") for t in want.get("true_errors", ()) if t["rule"] == "KVD004"}
            for rule, line in error_findings(result):
                tally.errors += 1
                if rule == "ERROR" and line in parser_lines:
                    continue
                if rule not in true:
                    tally.false_errors += 1
                    tally.false_by_rule.setdefault(rule, [0, 0])[0] += 1
                    tally.details.append(f"{entry['file']}:{line}: {key} false error {rule}")
        unpaired = [key for key in results if key not in expected]
        for key in expected:
            if key in results:
                continue
            other = next((k for k in unpaired if _same_workload(key, k)), None)
            if other is not None:
                unpaired.remove(other)
                tally.renamed += 1
                tally.renamed_checked += is_checked(results[other])
        for key, result in results.items():
            if key not in expected:
                tally.extra += 1
                for rule, line in error_findings(result):
                    tally.errors += 1
                    tally.false_errors += 1
                    tally.false_beyond += 1
                    tally.false_by_rule.setdefault(rule, [0, 0])[1] += 1
                    tally.details.append(f"{entry['file']}:{line}: unexpected workload {key}: error {rule}")
    if not details:
        tally.details = []
    return tally


def _same_workload(want: tuple, got: tuple) -> bool:
    """A found workload named otherwise than the index names it: the same name or container, or one name inside the
    other ('vllm' and 'vllm-vllm', a Makefile's 'run-llm' and 'Makefile:run-llm')."""
    (name, container), (got_name, got_container) = want, got
    if name == got_name or (container and container == got_container):
        return True
    name, got_name = (name or "").lower(), (got_name or "").lower()
    return bool(name and got_name) and (name in got_name or got_name in name)


def whole_folder_finishes(entries: list[dict]) -> tuple[bool, int, int, int]:
    """Whether one scan of the whole folder finishes (one bad file never stops the others), its workloads, and how
    many of the index's expected workloads of files stored flat (not in a tree under charts/) that walk finds: a file
    kind the walk skips shows here, never in the file-by-file measure."""
    from kvdoctor.check.run import CheckSettings
    from kvdoctor.scan.judge import ScanDefaults
    from kvdoctor.scan.run import run_scan

    report = run_scan([str(PUBLIC)], ScanDefaults(offline=True, cache_dir=Path(tempfile.mkdtemp())),
                      CheckSettings(compile=False))  # fmt: skip
    walked = {(Path(r.workload.file).resolve(), r.workload.name, r.workload.container) for r in report.workloads}
    flat = [(PUBLIC / e["file"], w) for e in entries if scanned_path(e) == PUBLIC / e["file"] for w in e["workloads"]]
    found = sum((path.resolve(), w["name"], w["container"]) in walked for path, w in flat)
    return True, len(report.workloads), found, len(flat)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--heldout", action="store_true")
    which.add_argument("--seen", action="store_true")
    which.add_argument("--all", action="store_true")
    parser.add_argument("--details", action="store_true", help="each miss and false error (refused with --heldout)")
    parser.add_argument("--by-kind", action="store_true",
                        help="workloads expected / found / checked per kind the index names (counts only: allowed "
                             "with --heldout)")
    parser.add_argument("--false-by-rule", action="store_true",
                        help="false errors counted per rule, on expected workloads / beyond the index (counts only: "
                             "allowed with --heldout)")
    parser.add_argument("--batch", help="only this batch of the index: 'first' (issue 27's), 's32' ... 's36'")
    args = parser.parse_args()
    if args.details and not args.seen:
        parser.error("--details is for the seen files only: the held-back files' output stays unseen")
    os.environ["HF_HUB_OFFLINE"] = "1"
    group = "heldout" if args.heldout else "seen" if args.seen else "all"
    entries = load_index(group, args.batch)
    tally = measure(entries, args.details)
    repos = len({e["repo"] for e in entries})
    print(f"{group}{f' (batch {args.batch})' if args.batch else ''}: {tally.files} files from {repos} repositories, "
          f"{tally.unread} unread")  # fmt: skip
    print(f"workloads: {tally.expected} expected, {tally.found} found, {tally.checked} checked, "
          f"{tally.extra} found beyond the index")  # fmt: skip
    print(f"  of the {tally.expected - tally.found} not found by the index's (name, container): {tally.renamed} found "
          f"under another name in the same file ({tally.renamed_checked} checked)")  # fmt: skip
    print(f"error findings: {tally.errors}, false errors: {tally.false_errors} "
          f"({tally.false_beyond} of them on workloads beyond the index) "
          f"(and {tally.undecided_errors} error rules left undecided, each naming the input that decides it)")
    if args.all:
        finished, count, walked, flat = whole_folder_finishes(entries)
        print(f"whole folder in one scan: {'finished' if finished else 'aborted'}, {count} workloads; of the "
              f"{flat} expected in files stored flat, {walked} found by the walk")  # fmt: skip
    if args.by_kind:
        for kind, (expected, found, checked) in sorted(tally.by_kind.items(), key=lambda item: item[1][1] - item[1][0]):
            if found < expected or checked < expected:
                print(f"  kind {kind}: {expected} expected, {found} found, {checked} checked")
    if args.false_by_rule:
        for rule, (expected, beyond) in sorted(tally.false_by_rule.items(), key=lambda item: -sum(item[1])):
            print(f"  false {rule}: {expected} on expected workloads, {beyond} beyond the index")
    for line in tally.details:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
