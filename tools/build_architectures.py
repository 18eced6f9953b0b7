"""Rebuild kvdoctor/data/vllm_pack/architectures/: fetch each pack release's registry files by HTTP range requests
from its wheel on the package index (kvdoctor's wheel_fetch, verified against the wheel's RECORD), then run the
builder over them.

    python tools/build_architectures.py [--releases 0.8.5,0.9.2] [--sources DIR]

Fetched files are kept under DIR/<release>/ (default ~/.cache/kvdoctor/wheels/members, shared with the tests), so a
second run uses no network. The builder cannot fetch itself: kvdoctor's builders sit below dryrun/ in its layers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kvdoctor.builders.architectures.build import ABSENT, SOURCES_DIR, main as build
from kvdoctor.builders.architectures.read import MEMBERS
from kvdoctor.dryrun.package_index import find_wheel
from kvdoctor.dryrun.wheel_fetch import FetchError, fetch_members
from kvdoctor.vllm_pack.store import pack_releases


def fetch(version: str, sources: Path) -> str | None:
    """Fetch what sources/<version> lacks; why not, or None."""
    root = sources / version
    absent = set((root / ABSENT).read_text().split()) if (root / ABSENT).is_file() else set()
    if all((root / m).is_file() or m in absent for m in MEMBERS):
        return None
    location, why_not = find_wheel(version)
    if location is None:
        return f"no vLLM {version} wheel on the package index: {why_not}"
    root.mkdir(parents=True, exist_ok=True)
    try:
        absent |= set(fetch_members(location, MEMBERS, root)["absent"])
    except (OSError, FetchError) as exc:
        return f"vLLM {version}'s registry files could not be fetched: {exc}"
    (root / ABSENT).write_text("\n".join(sorted(absent)))
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--releases", help="comma-separated releases (default: every knowledge-pack release)")
    ap.add_argument("--sources", type=Path, default=SOURCES_DIR)
    args = ap.parse_args()
    releases = args.releases.split(",") if args.releases else list(pack_releases())
    for version in releases:
        why_not = fetch(version, args.sources)
        if why_not:
            print(f"error: {why_not}", file=sys.stderr)
            return 2
    return build(["--releases", ",".join(releases), "--sources", str(args.sources)])


if __name__ == "__main__":
    sys.exit(main())
