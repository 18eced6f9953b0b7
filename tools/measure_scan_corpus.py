"""`kvdoctor scan` on every file of a kind that runs vLLM in many repository snapshots at once: the fired error
findings listed for judging by hand, and the scan's exit code (a whole-folder scan must never stop on one file).

    .venv/bin/python tools/measure_scan_corpus.py MIRRORS_DIR --kind scripts|yaml|python|build [--out DIR]

MIRRORS_DIR holds bare git repositories (`fetch`'s snapshots: OWNER+NAME/repo); each HEAD's files whose name
and text match the kind are copied into DIR (default /tmp/kvd-scan-corpus-KIND) as OWNER+NAME/PATH, then the
folder is scanned offline with no --gpu / --vllm-version, as a CI job on them would be.

Repositories a held-out manifest batch is being gathered from are left out (`--held-out DIR`, default
/work/staging: any OWNER__NAME folder under its manifests_*/files/), and so is any snapshot fetched after the
session's measure began (`--fetched-before HH:MM` today, UTC): a gatherer fetches into the same mirror, and a
measure that scans its repositories would show their output before the batch is measured.

A kustomization file is copied with the files it names (resources, bases, components, patches, generators' files,
each named folder's own kustomization in turn), so that the scan renders it as Kustomize would, not as a tree with
holes; names outside the repository (URLs, ../ above its root) stay out and are named by the scan.
"""

from __future__ import annotations

import argparse
import json
import re
import posixpath
import subprocess
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import yaml

KINDS = {
    "scripts": (re.compile(r"\.(?:sh|bash)$"), re.compile(r"vllm|VLLM")),
    "yaml": (re.compile(r"\.ya?ml$"), re.compile(r"vllm serve|vllm/vllm-openai|vllm\.entrypoints")),
    "python": (re.compile(r"\.py$"), re.compile(r"[\"']vllm[\"'],\s*[\"']serve|vllm serve|AsyncEngineArgs|modal\.App|bentoml")),
    "build": (re.compile(r"(?:^|/)(?:Dockerfile[^/]*|Makefile|[^/]*\.mk|justfile|Procfile)$"),
              re.compile(r"vllm serve|vllm/vllm-openai|vllm\.entrypoints")),
}
SKIPPED_PATHS = re.compile(r"templates/|\.github/ISSUE|test")  # chart templates are read through their chart
MAX_FILES_PER_REPO = 400
KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KUSTOMIZE_PATH_LISTS = ("resources", "bases", "components", "patchesStrategicMerge", "crds", "configurations",
                        "generators", "transformers", "validators")
"""Kustomization fields that list files or folders (Kustomize's kustomization reference); patches and generators
name theirs inside their items (path, files, envs, env)."""


def held_out_repos(staging: Path) -> set[str]:
    """OWNER+NAME of each repository a staged manifest batch holds files of (its files/OWNER__NAME folders)."""
    return {folder.name.replace("__", "+", 1) for folder in staging.glob("manifests_*/files/*") if folder.is_dir()}


def kustomize_companions(git_dir: Path, path: str, listed: set[str], seen: set[str] | None = None) -> set[str]:
    """The repository files a kustomization at ``path`` names, and those of each kustomization it names in turn."""
    seen = set() if seen is None else seen
    if path in seen:
        return set()
    seen.add(path)
    shown = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"HEAD:{path}"], capture_output=True)
    try:
        data = yaml.safe_load(shown.stdout.decode("utf-8", "replace")) if shown.returncode == 0 else None
    except yaml.YAMLError:
        return set()
    if not isinstance(data, dict):
        return set()
    found: set[str] = set()
    for ref in _named_paths(data):
        if "://" in ref or ref.startswith(("github.com/", "git@")):
            continue  # fetched from the network by Kustomize: not the repository's
        target = posixpath.normpath(posixpath.join(posixpath.dirname(path), ref))
        if target in listed:
            found.add(target)
            continue
        own = next((f"{target}/{name}" for name in KUSTOMIZATION_NAMES if f"{target}/{name}" in listed), None)
        if own is not None:  # a folder Kustomize reads through its own kustomization
            found |= {own} | kustomize_companions(git_dir, own, listed, seen)
    return found


def _named_paths(data: dict) -> list[str]:
    """Every file or folder name a kustomization's fields hold (generator file entries may be KEY=PATH)."""
    names = [item for key in KUSTOMIZE_PATH_LISTS for item in _items(data.get(key)) if isinstance(item, str)]
    for key in ("patches", "patchesJson6902"):
        names += [item["path"] for item in _items(data.get(key)) if isinstance(item, dict) and isinstance(item.get("path"), str)]
    for key in ("configMapGenerator", "secretGenerator"):
        for item in _items(data.get(key)):
            if isinstance(item, dict):
                files = _items(item.get("files")) + _items(item.get("envs")) + [item.get("env")]
                names += [str(f).rpartition("=")[2] for f in files if isinstance(f, str)]
    return names


def _items(value) -> list:
    return value if isinstance(value, list) else []


def collect(mirrors: Path, kind: str, out: Path, skipped: set[str] = frozenset(), before: float | None = None) -> int:
    names, text = KINDS[kind]
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    for git_dir in sorted(mirrors.glob("*/repo")):
        owner = git_dir.parent.name
        if owner in skipped or (before is not None and git_dir.parent.stat().st_mtime >= before):
            continue  # a held-out batch's repository, or one fetched since the measure began
        listed = subprocess.run(["git", f"--git-dir={git_dir}", "ls-tree", "-r", "HEAD", "--name-only"],
                                capture_output=True, text=True).stdout.splitlines()
        paths = [p for p in listed if names.search(p) and (kind != "yaml" or not SKIPPED_PATHS.search(p))]
        copied: set[str] = set()
        for path in paths[:MAX_FILES_PER_REPO]:
            shown = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"HEAD:{path}"], capture_output=True)
            if shown.returncode == 0 and text.search(shown.stdout.decode("utf-8", "replace")):
                copied.add(path)
        for path in sorted(copied):
            if posixpath.basename(path) in KUSTOMIZATION_NAMES:
                copied |= kustomize_companions(git_dir, path, set(listed))
        for path in sorted(copied):
            shown = subprocess.run(["git", f"--git-dir={git_dir}", "show", f"HEAD:{path}"], capture_output=True)
            target = out / owner / path  # the file's own name kept: Dockerfiles and Makefiles are known by it
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(shown.stdout)
            count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mirrors", type=Path)
    parser.add_argument("--kind", choices=sorted(KINDS), required=True)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--held-out", type=Path, default=Path("/work/staging"))
    parser.add_argument("--fetched-before", default="any", help="HH:MM today (UTC): leave out snapshots fetched since "
                        "(a session's gatherers fetch into the same mirror); 'any' (the default) keeps every one")
    args = parser.parse_args()
    out = args.out or Path(f"/tmp/kvd-scan-corpus-{args.kind}")
    before = None
    if args.fetched_before != "any":
        hour, minute = map(int, args.fetched_before.split(":"))
        before = datetime.now(timezone.utc).replace(hour=hour, minute=minute, second=0, microsecond=0).timestamp()
    files = collect(args.mirrors, args.kind, out, held_out_repos(args.held_out), before)
    run = subprocess.run([sys.executable, "-m", "kvdoctor", "scan", str(out), "--format", "json", "--offline",
                          "--allow-no-workload"], capture_output=True, text=True)
    report = json.loads(run.stdout) if run.stdout.strip() else {"workloads": []}
    errors = Counter()
    for workload in report["workloads"]:
        for finding in workload.get("findings", []):
            if finding["severity"] == "error" and finding["status"] == "fired":
                errors[finding["rule_id"]] += 1
                print(f"{Path(workload['file']).name}: {finding['rule_id']} {finding['title'][:140]}")
        if workload.get("error"):
            print(f"{Path(workload['file']).name}: ERROR {str(workload['error'].get('message'))[:160]}")
    print(f"{files} files, {len(report['workloads'])} workloads, fired errors {sum(errors.values())} {dict(errors)}, "
          f"unread {len(report.get('unread', []))}, exit {run.returncode}"
          + (f" ({run.stderr.strip().splitlines()[-1][:160]})" if run.returncode in (2, 3) and run.stderr.strip() else ""))


if __name__ == "__main__":
    main()
