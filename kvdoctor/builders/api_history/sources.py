"""Where the API history reads vLLM's source: wheels at hand (read whole), and the releases between them on the
package index (their RECORD hashes, then single modules, by HTTP range requests through a RemoteWheel the caller
gives). What the network gave is cached, so a rebuild needs none.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from kvdoctor.base.versions import wheel_version
from kvdoctor.base.wheel_record import record_hashes

CACHE_SUBDIR = "api-history"
KEYS_VERSION = 2  # raise when extract.py reads more: the cached keys of every module are then read again


@dataclass
class Release:
    """One release's Python files: their sha256 (from RECORD), and a way to read one."""

    version: str
    hashes: dict[str, str]
    """vllm/**/*.py path -> hex sha256."""
    read_whole: bool
    """True for a wheel at hand; False for one read by ranges (its files fetched one at a time, when needed)."""
    _read: object = field(default=None, repr=False)

    def source(self, path: str) -> bytes:
        return self._read(path)


def local_releases(wheels_dir: Path) -> dict[str, Path]:
    """version -> wheel, for each vllm-*.whl in the folder (the first wheel of a version)."""
    found: dict[str, Path] = {}
    for wheel in sorted(wheels_dir.glob("vllm-*.whl")):
        version = wheel_version(wheel)
        if version and not re.search(r"(a|b|rc|dev)\d*$", version):
            found.setdefault(version, wheel)
    return found


def local_release(version: str, wheel: Path) -> Release:
    """A wheel at hand: every vllm/**/*.py, hashed here."""
    archive = zipfile.ZipFile(wheel)
    names = sorted(n for n in archive.namelist() if n.startswith("vllm/") and n.endswith(".py"))
    hashes = {n: hashlib.sha256(archive.read(n)).hexdigest() for n in names}
    return Release(version, hashes, True, archive.read)


class RemoteWheel(Protocol):
    """A release's wheel on the package index, read by HTTP range requests (tools/build_api_history.py gives one
    through kvdoctor/dryrun's range reader: the builders sit below dryrun and do not import it)."""

    def names(self) -> list[str]:
        """The wheel's member names (its central directory)."""

    def read(self, name: str) -> bytes:
        """One member's bytes."""


def remote_release(version: str, cache_dir: Path, open_wheel: Callable[[str], RemoteWheel] | None) -> Release:
    """A release read by ranges: its RECORD (cached as JSON), and its modules fetched one at a time when asked."""
    listing = cache_dir / CACHE_SUBDIR / "records" / f"{version}.json"
    state: dict = {}
    lock = threading.Lock()  # the bisection's threads ask for modules of one release at once

    def wheel() -> RemoteWheel:
        with lock:
            if not state:
                if open_wheel is None:
                    raise OSError(f"vLLM {version}'s wheel is not cached and no network reader was given")
                state["wheel"] = open_wheel(version)
        return state["wheel"]

    if listing.is_file():
        hashes = json.loads(listing.read_text(encoding="utf-8"))
    else:
        record = next(n for n in wheel().names() if re.fullmatch(r"vllm-[^/]+\.dist-info/RECORD", n))
        hashes = {p: h for p, h in record_hashes(wheel().read(record).decode("utf-8", "replace")).items()
                  if p.startswith("vllm/") and p.endswith(".py")}
        listing.parent.mkdir(parents=True, exist_ok=True)
        listing.write_text(json.dumps(hashes, sort_keys=True), encoding="utf-8")
    return Release(version, hashes, False, lambda path: wheel().read(path))


def _api_path(cache_dir: Path, path: str, digest: str) -> Path:
    # the keys name the module (path and content), and what extract.py reads (its version)
    name = hashlib.sha256(f"{KEYS_VERSION}:{path}:{digest}".encode()).hexdigest()
    return cache_dir / CACHE_SUBDIR / "modules" / name[:2] / f"{name}.json"


def cached_api(cache_dir: Path, path: str, digest: str) -> list | None:
    """A module's extracted keys, cached by its path and sha256 (fetched once, ever)."""
    file = _api_path(cache_dir, path, digest)
    return json.loads(file.read_text(encoding="utf-8")) if file.is_file() else None


def store_api(cache_dir: Path, path: str, digest: str, keys: list) -> None:
    file = _api_path(cache_dir, path, digest)
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps(keys), encoding="utf-8")
