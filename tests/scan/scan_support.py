"""Helpers for the scan tests: fixture paths and a scan without the dry run, judged in-process."""

from __future__ import annotations

from pathlib import Path

from kvdoctor.check.run import CheckSettings
from kvdoctor.scan.judge import ScanDefaults
from kvdoctor.scan.run import run_scan

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "tests" / "fixtures" / "manifests"


def public_index() -> list[dict]:
    """The public manifests' index entries: index.yaml, then its continuations (index-2.yaml, ...), in that order."""
    import yaml

    files = sorted((MANIFESTS / "public").glob("index*.yaml"), key=lambda p: (p.name != "index.yaml", p.name))
    return [entry for path in files for entry in yaml.safe_load(path.read_text())["files"]]


def rel(name: str) -> str:
    return f"tests/fixtures/manifests/{name}"


def line_of(name: str, text: str, occurrence: int = 1) -> int:
    lines = (MANIFESTS / name).read_text().splitlines()
    return [n for n, line in enumerate(lines, 1) if text in line][occurrence - 1]


def scan(paths: list[str], tmp_path: Path, gpu: str | None = "A100", **settings):
    defaults = ScanDefaults(gpu=gpu, offline=True, cache_dir=tmp_path / "cache")
    return run_scan(paths, defaults, CheckSettings(compile=False, **settings))


def by_name(report) -> dict:
    return {r.workload.name: r for r in report.workloads}


def finding(result, rule_id: str):
    return next(p for p in result.placed if p.finding.rule_id == rule_id)


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """A repository's files (path -> text) written under ``root``, folders made; ``root`` back."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root
