#!/usr/bin/env python3
"""Cut one held-out batch of tests/fixtures/logs_real, by the rule in its index.yaml header.

The rule (so that earlier decisions never change): a batch is a set of log files added together; for each
batch, rng = random.Random(13); for each family in sorted order, that family's batch files sorted by name,
rng.sample(files, round(0.35 * len(files))) are held out (heldout: true), the rest stay heldout: false.
Files of other batches are never touched.

A batch is named either by the commits of this directory that added its files (1-based positions in
`git log --reverse -- tests/fixtures/logs_real`, e.g. --commits 4-11) or by an explicit file list.

  python tools/cut_heldout_batch.py --batch 4 --commits 4-11            # show the cut, change nothing
  python tools/cut_heldout_batch.py --batch 4 --commits 4-11 --write    # set the flags, add the header line
  python tools/cut_heldout_batch.py --check 1:1 2:2 3:3                 # recompute earlier batches, compare

Only index.yaml is edited (text edits: the batch's `heldout:` lines and one header line), so the file's
layout and comments stay as they are.
"""
from __future__ import annotations

import argparse
import random
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIR = "tests/fixtures/logs_real"
INDEX = ROOT / DIR / "index.yaml"
SEED = 13
SHARE = 0.35


def dir_commits() -> list[str]:
    out = subprocess.run(["git", "log", "--reverse", "--format=%H", "--", DIR], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def files_added_by(commits: list[str]) -> list[str]:
    names: list[str] = []
    for c in commits:
        out = subprocess.run(["git", "show", "--diff-filter=A", "--name-only", "--format=", c, "--", DIR],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
        names += [Path(p).name for p in out.split() if p.endswith(".log")]
    return names


def parse_range(spec: str) -> tuple[int, int]:
    a, _, b = spec.partition("-")
    return int(a), int(b or a)


def read_entries(text: str) -> dict[str, dict]:
    """file name -> {family, heldout, heldout_line (index into lines)} from index.yaml's text."""
    entries: dict[str, dict] = {}
    cur = None
    for i, line in enumerate(text.splitlines()):
        m = re.match(r"- file: (\S+)\s*$", line)
        if m:
            cur = {"family": None, "heldout": None, "heldout_line": None}
            entries[m.group(1)] = cur
            continue
        if cur is None:
            continue
        m = re.match(r"  family: (\S+)\s*$", line)
        if m:
            cur["family"] = m.group(1)
        m = re.match(r"  heldout: (true|false)\s*$", line)
        if m:
            cur["heldout"] = m.group(1) == "true"
            cur["heldout_line"] = i
    return entries


def cut(files: list[str], entries: dict[str, dict]) -> set[str]:
    missing = [f for f in files if f not in entries]
    if missing:
        sys.exit(f"not in index.yaml: {missing}")
    by_family: dict[str, list[str]] = defaultdict(list)
    for f in files:
        by_family[entries[f]["family"]].append(f)
    rng = random.Random(SEED)
    held: set[str] = set()
    for family in sorted(by_family):
        members = sorted(by_family[family])
        held.update(rng.sample(members, round(SHARE * len(members))))
    return held


def batch_files(commits_spec: str) -> tuple[list[str], tuple[int, int]]:
    a, b = parse_range(commits_spec)
    commits = dir_commits()
    if not (1 <= a <= b <= len(commits)):
        sys.exit(f"commit range {a}-{b} outside 1-{len(commits)}")
    return files_added_by(commits[a - 1:b]), (a, b)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, help="batch number (for the header line)")
    ap.add_argument("--commits", help="positions A-B of the commits that added the batch's files")
    ap.add_argument("--files", nargs="*", help="explicit file names instead of --commits")
    ap.add_argument("--write", action="store_true", help="edit index.yaml")
    ap.add_argument("--check", nargs="*", metavar="BATCH:A-B",
                    help="recompute earlier batches from git history and compare with index.yaml")
    args = ap.parse_args()
    text = INDEX.read_text()
    entries = read_entries(text)

    if args.check is not None:
        bad = 0
        for spec in args.check:
            batch, _, rng_spec = spec.partition(":")
            files, _ = batch_files(rng_spec)
            held = cut(files, entries)
            now = {f for f in files if entries[f]["heldout"]}
            ok = held == now
            bad += not ok
            print(f"batch {batch}: {len(files)} files, {len(held)} held out by the rule, "
                  f"{len(now)} held out in index.yaml: {'same' if ok else 'DIFFERENT'}")
            if not ok:
                print("  rule only:", sorted(held - now))
                print("  index only:", sorted(now - held))
        return 1 if bad else 0

    if args.batch is None or not (args.commits or args.files):
        ap.error("--batch and one of --commits / --files are required")
    if args.commits:
        files, (a, b) = batch_files(args.commits)
        where = f"commit {a}" if a == b else f"commits {a}\u2013{b}"
        origin = f"those added by {where} of this directory (git log -- {DIR})"
    else:
        files = list(args.files)
        origin = "listed in tools/cut_heldout_batch.py's --files"
    if len(set(files)) != len(files):
        sys.exit("a file is named twice")
    held = cut(files, entries)
    fams = defaultdict(lambda: [0, 0])
    for f in files:
        fams[entries[f]["family"]][0] += 1
        fams[entries[f]["family"]][1] += f in held
    print(f"batch {args.batch}: {len(files)} files, {len(held)} held out")
    for fam in sorted(fams):
        n, h = fams[fam]
        print(f"  {fam:24s} {n:3d} files, {h} held out")
    if not args.write:
        return 0

    lines = text.splitlines(keepends=True)
    for f in files:
        i = entries[f]["heldout_line"]
        if i is None:
            sys.exit(f"{f}: no heldout line")
        lines[i] = re.sub(r"heldout: (true|false)", f"heldout: {'true' if f in held else 'false'}", lines[i])
    header = f"#   batch {args.batch}: {len(files)} files, {origin}\n"
    if any(l.startswith(f"#   batch {args.batch}:") for l in lines):
        sys.exit(f"the header already lists batch {args.batch}")
    last = max(i for i, l in enumerate(lines) if re.match(r"#   batch \d+:", l))
    lines.insert(last + 1, header)
    INDEX.write_text("".join(lines))
    print(f"wrote {INDEX.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
