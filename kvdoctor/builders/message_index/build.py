"""Build kvdoctor's message index: every error message vLLM (and the dependencies its failures surface from) can
print, as a template with its location and the releases that have it.

    python -m kvdoctor.builders.message_index [--wheels DIR] [--out kvdoctor/data/message_index/index.json.gz]

For each vllm-*.whl in DIR (default ~/.cache/kvdoctor/wheels) of a release the knowledge pack covers (every wheel
with --all-wheels) every vllm/**/*.py is AST-walked for `raise X(<message>)`, `assert cond, <message>` (a message
held in a local variable is followed to its assignment) and
`logger.error/exception/critical/warning(...)` / `warnings.warn(...)` calls whose message is a string, an
f-string, a %-format, a `.format` call or a concatenation of those. The literal parts are kept, every
placeholder becomes a wildcard. Of the code a raise site keeps only its condition (the innermost `if`, the
`except` clause, an assert's negated test; at most 200 characters), its class and function, and the names of the
expressions its message interpolates. Identical entries across releases become one entry with release ranges. Triton, torch (CUDA init) and FlashInfer messages come from
their installed packages or wheels, when present. The output is gzip text, one JSON value a line, written deterministically (a
rebuild from the same inputs is byte-identical).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from kvdoctor.builders.message_index.packing import collect, pack, read, unpack, write
from kvdoctor.base.versions import pack_order
from kvdoctor.builders.message_index.sources import DEPENDENCIES, dependency_wheel, installed_sources, wheel_sources
from kvdoctor.data import DATA_DIR

_WHEEL_VERSION = re.compile(r"^vllm-(\d+\.\d+\.\d+(?:\.post\d+)?)-")


def build(wheels_dir: Path, deps_dir: Path | None = None, releases: tuple[str, ...] | None = None) -> dict:
    """The packed index of the vllm-*.whl in `wheels_dir` (those of `releases` when given) and the dependencies
    found (installed or in deps_dir)."""
    wheels = {}
    for wheel in sorted(wheels_dir.glob("vllm-*.whl")):
        match = _WHEEL_VERSION.match(wheel.name)
        if match and (releases is None or match.group(1) in releases):
            wheels.setdefault(match.group(1), wheel)
    versions = sorted(wheels, key=pack_order)
    if not versions:
        raise SystemExit(f"no vllm-*.whl in {wheels_dir}")
    entries = collect("vllm", [(v, list(wheel_sources(wheels[v]))) for v in versions])
    packages = {"vllm": versions}
    for package, folders in DEPENDENCIES.items():
        version, files = installed_sources(package, folders)
        if version is None:
            version, files = dependency_wheel(package, folders, deps_dir)
        if version is None:
            print(f"  {package}: not installed, skipped", file=sys.stderr)
            continue
        entries += collect(package, [(version, files)])
        packages[package] = [version]
    return pack(entries, packages)


def refresh(old: dict, packages: tuple[str, ...], deps_dir: Path | None) -> dict:
    """The index `old` with the named dependencies read again (installed, or their wheels in deps_dir)."""
    unknown = [p for p in packages if p not in DEPENDENCIES]
    if unknown:
        raise SystemExit(f"not a dependency the index reads: {', '.join(unknown)} (sources.py DEPENDENCIES)")
    entries = [e for e in unpack(old) if e["package"] not in packages]
    versions = {name: have for name, have in old["packages"].items() if name not in packages}
    for package in packages:
        version, files = installed_sources(package, DEPENDENCIES[package])
        if version is None:
            version, files = dependency_wheel(package, DEPENDENCIES[package], deps_dir)
        if version is None:
            raise SystemExit(f"{package}: neither installed nor a wheel in --deps")
        entries += collect(package, [(version, files)])
        versions[package] = [version]
    return pack(entries, versions)


def main() -> None:
    """The builder's command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m kvdoctor.builders.message_index",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, default=Path(os.environ.get("KVDOCTOR_VLLM_WHEELS", Path.home() / ".cache" / "kvdoctor" / "wheels")))
    parser.add_argument("--out", type=Path,
                        default=DATA_DIR / "message_index" / "index.json.gz")
    parser.add_argument("--deps", type=Path, default=None,
                        help="folder with wheels of dependencies that are not installed (flashinfer_python-*.whl)")
    parser.add_argument("--all-wheels", action="store_true",
                        help="index every vllm wheel in --wheels, not only the releases the knowledge pack covers")
    parser.add_argument("--repack", type=Path, default=None,
                        help="re-pack an existing index (after a change to the packing) instead of reading wheels")
    parser.add_argument("--refresh", default=None, metavar="PACKAGE[,PACKAGE]",
                        help="read only these dependencies again (after a change to DEPENDENCIES), keeping the rest of "
                             "the --out index as it is")
    args = parser.parse_args()
    if args.repack:
        old = read(args.repack)
        index = pack(unpack(old), old["packages"])
    elif args.refresh:
        index = refresh(read(args.out), tuple(args.refresh.split(",")), args.deps)
    else:
        from kvdoctor.vllm_pack.store import pack_releases

        index = build(args.wheels, args.deps, None if args.all_wheels else tuple(pack_releases()))
    write(index, args.out)
    print(f"{sum(len(g) for g in index['anchors'].values())} templates from {index['packages']} -> {args.out} "
          f"({args.out.stat().st_size // 1024} KiB)", file=sys.stderr)


if __name__ == "__main__":
    main()
