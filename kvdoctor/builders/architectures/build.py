"""Build kvdoctor/data/vllm_pack/architectures/<release>.json for every knowledge-pack release:

    python tools/build_architectures.py            # fetches the registry files, then runs this builder
    python -m kvdoctor.builders.architectures [--releases 0.8.5,0.9.2] [--sources DIR] [--out DIR]

Each release's registry files (read.MEMBERS) are read with ast from DIR/<release>/ (default
~/.cache/kvdoctor/wheels/members, where tools/build_architectures.py and the tests' release_sources fetch them by
range requests from the release's wheel; absent.txt lists the members a wheel lacks). Names, message templates and
file:line only; the output is deterministic, so a rebuild from the same wheels is byte-identical.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kvdoctor.builders.architectures.read import MEMBERS, Registry, read_registry
from kvdoctor.data import DATA_DIR

OUT_DIR = DATA_DIR / "vllm_pack" / "architectures"
SOURCES_DIR = Path.home() / ".cache" / "kvdoctor" / "wheels" / "members"
ABSENT = "absent.txt"  # the members the wheel lacks (shared with tests/dryrun_support.py)


def release_texts(version: str, sources: Path) -> dict[str, str]:
    """The text of each of MEMBERS in `version`'s wheel ('' for one it lacks) from sources/<version>."""
    root = sources / version
    absent = set((root / ABSENT).read_text().split()) if (root / ABSENT).is_file() else set()
    missing = [m for m in MEMBERS if m not in absent and not (root / m).is_file()]
    if missing:
        raise ValueError(f"{root} lacks {', '.join(missing)} (fetch them: python tools/build_architectures.py)")
    return {m: "" if m in absent else (root / m).read_text("utf-8") for m in MEMBERS}


def release_record(version: str, registry: Registry) -> dict:
    """The JSON record of one release: every architecture its registry serves, with the dict(s) and line it is in."""
    architectures: dict[str, list] = {}
    for name in registry.served_from:
        for arch, line in registry.dicts[name].items():
            architectures.setdefault(arch, []).append([name, line])
    return {
        "release": version, "registry": registry.file,
        "dicts": {name: registry.dict_lines[name] for name in registry.served_from},
        "architectures": dict(sorted(architectures.items())),
        "previously_supported": dict(sorted(registry.previously_supported.items())),
        "out_of_tree": dict(sorted(registry.out_of_tree.items())),
        "messages": dict(sorted(registry.messages.items())),
        "transformers_fallback": registry.fallback,
    }  # fmt: skip


def render(record: dict) -> str:
    """The file text: a key a line, and one entry a line inside each table (architectures, removed, messages)."""
    def compact(value) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    lines = []
    for key, value in record.items():
        if isinstance(value, dict) and value:
            rows = ",\n".join(f"  {compact(k)}:{compact(v)}" for k, v in value.items())
            lines.append(f" {compact(key)}:{{\n{rows}\n }}")
        else:
            lines.append(f" {compact(key)}:{compact(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main(argv: list[str] | None = None) -> int:
    from kvdoctor.vllm_pack.store import pack_releases

    ap = argparse.ArgumentParser(prog="python -m kvdoctor.builders.architectures", description=__doc__.split("\n\n")[0])
    ap.add_argument("--releases", help="comma-separated releases (default: every knowledge-pack release)")
    ap.add_argument("--sources", type=Path, default=SOURCES_DIR, help="where fetched registry files are kept")
    ap.add_argument("--out", type=Path, default=OUT_DIR)
    args = ap.parse_args(argv)
    releases = args.releases.split(",") if args.releases else pack_releases()
    args.out.mkdir(parents=True, exist_ok=True)
    for version in releases:
        try:
            registry = read_registry(release_texts(version, args.sources))
        except (OSError, ValueError, SyntaxError) as exc:
            print(f"error: vLLM {version}: {exc}", file=sys.stderr)
            return 2
        record = release_record(version, registry)
        (args.out / f"{version}.json").write_text(render(record), encoding="utf-8")
        print(f"{version}: {len(record['architectures'])} architectures, {len(record['previously_supported'])} removed")
    return 0
