"""`kvdoctor scan` on whole repository trees (docs/scan.md, "Whole repositories"): for each tree, the exit code, wall
seconds, files read, workloads found and checked, the fired error findings (to be judged by hand against vLLM's
release), the files not read, and the files that plainly run vLLM (a grep) that no workload, unread entry or note
names ("silent"; a file of a chart that a workload or unread entry names counts as named, the chart being scanned
whole; test files and library code among them are judged by hand too).

    python tools/measure_scan_repos.py /tmp/h5/vllm-project+aibrix ... [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

RUNS_VLLM = re.compile(r"vllm serve|vllm\.entrypoints|vllm/vllm-openai|LLMConfig|AsyncEngineArgs")
SKIPPED_DIRS = {".git", "node_modules", ".venv", "venv", "vendor", "__pycache__"}
SUFFIXES = (".yaml", ".yml", ".sh", ".bash", ".py", ".tftpl", ".mk")
KVDOCTOR = Path(sys.executable).with_name("kvdoctor")


def files_running_vllm(root: Path) -> list[str]:
    found = []
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in SKIPPED_DIRS and (not d.startswith(".") or d == ".github")]
        for name in names:
            if not (name.endswith(SUFFIXES) or name.startswith(("Dockerfile", "Containerfile", "Makefile"))):
                continue
            path = Path(directory) / name
            try:
                if RUNS_VLLM.search(path.read_text(errors="replace")[:2_000_000]):
                    found.append(path.relative_to(root).as_posix())
            except OSError:
                continue
    return found


def chart_of(root: Path, file: str) -> str | None:
    """The chart directory (the nearest one with a Chart.yaml) a file of the tree lies in, else None."""
    for parent in Path(file).parents:
        if parent != Path(".") and (root / parent / "Chart.yaml").is_file():
            return parent.as_posix()
    return None


def measure(root: Path, out: Path | None) -> dict:
    started = time.monotonic()
    run = subprocess.run([str(KVDOCTOR), "scan", ".", "--format", "json", "--offline"], cwd=root,
                         capture_output=True, text=True, timeout=1800)  # fmt: skip
    row: dict = {"tree": root.name, "exit": run.returncode, "seconds": round(time.monotonic() - started, 1)}
    if out is not None:
        (out / f"{root.name}.json").write_text(run.stdout)
    try:
        report = json.loads(run.stdout)
    except ValueError:
        row["crash"] = run.stderr[-2000:]
        return row
    workloads = report["workloads"]
    strip = lambda path: path.removeprefix("./")  # noqa: E731
    row |= {
        "files": len(report["files"]),
        "workloads": len(workloads),
        "checked": sum(1 for w in workloads if not w.get("error")),
        "not_checked": [(strip(w["file"]), w["line"], w["error"]["message"]) for w in workloads if w.get("error")],
        "errors": [(strip(w["file"]), f["location"]["line"], f["rule_id"], f["title"]) for w in workloads
                   for f in w["findings"] if f["severity"] == "error" and f["status"] == "fired"],
        "unread": [(strip(u["location"]["file"]), u["location"]["line"], u["message"]) for u in report.get("unread", [])],
    }  # fmt: skip
    named = {strip(w["file"]) for w in workloads} | {u[0] for u in row["unread"]}
    notes = "\n".join(report["notes"])
    charts = {chart_of(root, f) for f in named} - {None}  # a chart is scanned whole: its other files are named with it
    row["silent"] = [f for f in files_running_vllm(root) if f not in named and f not in notes
                     and chart_of(root, f) not in charts]  # fmt: skip
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="write each tree's scan JSON and row here")
    args = parser.parse_args()
    for tree in args.trees:
        if not tree.is_dir():
            print(f"measure_scan_repos: {tree}: not a directory", file=sys.stderr)
            return 2
    for tree in args.trees:
        row = measure(tree.resolve(), args.out)
        if args.out is not None:
            (args.out / f"{tree.name}.row.json").write_text(json.dumps(row, indent=1))
        print(tree.name, row["exit"], row["seconds"], row.get("files"), row.get("workloads"), row.get("checked"),
              len(row.get("errors", [])), len(row.get("unread", [])), len(row.get("silent", [])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
