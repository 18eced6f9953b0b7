"""Build kvdoctor's API history of vLLM: which releases have each module, top-level name, public class member and
constructor / function parameter.

    python -m kvdoctor.builders.api_history [--wheels DIR] [--out kvdoctor/data/api_history.json.gz] [--no-network]

Every vllm-*.whl in DIR (default ~/.cache/kvdoctor/wheels) is read whole. Every release the package index lists
between the oldest and the newest of them is read by HTTP range requests: its file list and hashes from the
wheel's RECORD, then only the modules whose API differs between the two wheels read whole around it
(bisect.py). With --no-network only the wheels at hand are read, and a change between two of them is stated as
"between A and B". Fetched RECORDs and modules' keys are cached under <cache>/api-history/.
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from kvdoctor.base.versions import pep440_order
from kvdoctor.builders.api_history.bisect import ABSENT, ModuleApis, module_through
from kvdoctor.builders.api_history.extract import class_bases, module_name, packages_of
from kvdoctor.builders.api_history.packing import pack, write
from kvdoctor.builders.api_history.sources import (Release, RemoteWheel, local_release, local_releases,
                                                   remote_release)
from kvdoctor.data import DATA_DIR

THREADS = 16


class BuildError(Exception):
    """Input the build cannot use (no wheels, an index or wheel it cannot read): one line, exit 2."""


def build(wheels_dir: Path, cache_dir: Path, between: list[str] | None,
          open_wheel: Callable[[str], RemoteWheel] | None = None) -> dict:
    """The packed history of the wheels in `wheels_dir` and the releases `between` them (read by ranges through
    `open_wheel`, or from the cache)."""
    local = local_releases(wheels_dir)
    if not local:
        raise BuildError(f"no vllm-*.whl in {wheels_dir}")
    read_whole = sorted(local, key=pep440_order)
    lowest, highest = pep440_order(read_whole[0]), pep440_order(read_whole[-1])
    middle = sorted({v for v in between or () if lowest < pep440_order(v) < highest} - set(local), key=pep440_order)
    releases = sorted(read_whole + middle, key=pep440_order)
    apis = ModuleApis(cache_dir)
    loaded: dict[str, Release] = {v: local_release(v, local[v]) for v in read_whole}
    with ThreadPoolExecutor(THREADS) as pool:
        loaded.update(zip(middle, pool.map(lambda v: remote_release(v, cache_dir, open_wheel), middle)))
    span_of = [loaded[v] for v in releases]
    masks: dict[tuple[str, str, str], int] = {}
    for a, b in zip(read_whole, read_whole[1:]):
        low, high = releases.index(a), releases.index(b)
        span = span_of[low:high + 1]
        paths = sorted({p for r in span for p in r.hashes if module_name(p)})
        with ThreadPoolExecutor(THREADS) as pool:
            columns = list(pool.map(lambda p: module_through(apis, p, span), paths))
        for path, column in zip(paths, columns):
            for offset, keys in enumerate(column):
                if keys is not ABSENT:
                    _mark(masks, path, keys, low + offset)
        print(f"  {a} .. {b}: {len(paths)} modules, {apis.fetched} fetched so far", file=sys.stderr)
    _expand_star_imports(masks)
    history = pack(masks, releases, read_whole, complete=between is not None)
    history["bases"] = _bases([loaded[v] for v in read_whole], set(history["params"]) | set(history["members"]))
    return history


def _expand_star_imports(masks: dict, rounds: int = 3) -> None:
    """`from target import *` gives the module target's public names in the releases that have both (a package's
    __init__ re-exporting its submodules: vllm.distributed); a few rounds follow chains of them."""
    stars = [(key, mask) for key, mask in masks.items() if key[0] == "star"]
    for key, _ in stars:
        del masks[key]
    for _ in range(rounds):
        names: dict[str, list[tuple[str, int]]] = {}
        for (kind, owner, name), mask in masks.items():
            if kind == "name" and not name.startswith("_"):
                names.setdefault(owner, []).append((name, mask))
        for (_, module, target), star_mask in stars:
            for name, mask in names.get(target, ()):
                key = ("name", module, name)
                masks[key] = masks.get(key, 0) | (mask & star_mask)


def _bases(releases: list[Release], kept: set[str]) -> dict[str, list[str]]:
    """The bases each class kept in the history has in some release read whole (bases seldom change)."""
    found: dict[str, set[str]] = {}
    seen: set[tuple[str, str]] = set()
    for release in releases:
        for path, digest in sorted(release.hashes.items()):
            module = module_name(path)
            if module is None or (path, digest) in seen or b"class " not in (source := release.source(path)):
                continue
            seen.add((path, digest))
            for owner, names in class_bases(module, source).items():
                if owner in kept:
                    found.setdefault(owner, set()).update(names)
    return {owner: sorted(names) for owner, names in sorted(found.items())}


def _mark(masks: dict, path: str, keys: frozenset, index: int) -> None:
    bit = 1 << index
    module = module_name(path)
    for key in (("module", module, ""), *(("module", p, "") for p in packages_of(module)), *keys):
        masks[key] = masks.get(key, 0) | bit


def main(open_wheel: Callable[[str], RemoteWheel] | None = None,
         index_versions: Callable[[], list[str]] | None = None) -> None:
    """The builder's command line (see the module docstring); tools/build_api_history.py passes the network."""
    parser = argparse.ArgumentParser(prog="python -m kvdoctor.builders.api_history", description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, default=Path(os.environ.get(
        "KVDOCTOR_VLLM_WHEELS", Path.home() / ".cache" / "kvdoctor" / "wheels")))
    parser.add_argument("--out", type=Path, default=DATA_DIR / "api_history.json.gz")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "kvdoctor")
    parser.add_argument("--no-network", action="store_true", help="read only the wheels at hand")
    args = parser.parse_args()
    try:
        between = None if args.no_network or index_versions is None else index_versions()
        history = build(args.wheels, args.cache, between, open_wheel)
    except (BuildError, OSError, ValueError) as exc:
        hint = "" if isinstance(exc, BuildError) else " (--no-network reads only the wheels at hand)"
        print(f"python -m kvdoctor.builders.api_history: error: {exc}{hint}", file=sys.stderr)
        raise SystemExit(2) from None
    write(history, args.out)
    print(f"{len(history['modules'])} modules, {len(history['releases'])} releases "
          f"({len(history['read_whole'])} read whole) -> {args.out} ({args.out.stat().st_size // 1024} KiB)",
          file=sys.stderr)


if __name__ == "__main__":
    main()
