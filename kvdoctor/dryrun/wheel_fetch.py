"""Fetch just the kernel files of a vLLM release from its wheel on the package index, never the whole wheel.

HTTP range requests into the wheel's zip: the last 64 KiB (end of central directory), the central directory,
then each needed member; every member is checked against the sha256 the wheel's RECORD gives it. The files
are cached per release (a few hundred KB) under <kvdoctor cache>/vllm-kernels/<version>/ as an unpacked
tree, and reused with no network at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import tempfile
import time
import urllib.parse
import urllib.request
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from kvdoctor.base.wheel_record import record_hashes
from kvdoctor.dryrun.package_index import WheelLocation, find_wheel, open_url, read_pip_settings
from kvdoctor.facts.probes.vllm_sources import FETCH_MARKER as MARKER

CACHE_SUBDIR = "vllm-kernels"
TAIL_BYTES = 64 * 1024
_LOCAL_SLACK = 512  # a local header's extra field may be longer than the central directory's copy


class FetchError(Exception):
    """The wheel could not be read by ranges, or a member did not match RECORD."""


@dataclass(frozen=True)
class FetchResult:
    """Where a release's kernel files are, or why they are not."""

    root: Path | None
    """Unpacked tree (containing vllm/) with the fetched files; None when they could not be had."""
    note: str | None
    """One line for the user: why not, or None."""
    fetched: bool
    """True when the network was used in this call (False: the cache answered)."""
    seconds: float
    """Wall time of this call."""


class RangeReader:
    """Byte ranges of one remote (http/https) or local (file:) file."""

    def __init__(self, url: str, cert: str | None = None) -> None:
        self.url, self.cert = url, cert
        parts = urllib.parse.urlsplit(url)
        self.local = Path(urllib.request.url2pathname(parts.path)) if parts.scheme == "file" else None
        self.requests = 0

    def _get(self, spec: str) -> tuple[bytes, int | None]:
        self.requests += 1
        with open_url(self.url, {"Range": f"bytes={spec}", "Accept-Encoding": "identity"}, self.cert) as response:
            if getattr(response, "status", 206) != 206:
                raise FetchError(f"{_host(self.url)} ignores HTTP range requests (status {response.status})")
            total = re.search(r"/(\d+)\s*$", response.headers.get("Content-Range", ""))
            return response.read(), int(total.group(1)) if total else None

    def tail(self, length: int) -> tuple[bytes, int]:
        """The last length bytes and the file's size."""
        if self.local is not None:
            size = self.local.stat().st_size
            return self.read(max(0, size - length), min(length, size)), size
        data, total = self._get(f"-{length}")
        if total is None:
            raise FetchError(f"{_host(self.url)} gave no Content-Range for a range request")
        return data, total

    def read(self, start: int, length: int) -> bytes:
        if self.local is not None:
            with self.local.open("rb") as handle:
                handle.seek(start)
                return handle.read(length)
        return self._get(f"{start}-{start + length - 1}")[0]


def _host(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc or url


@dataclass(frozen=True)
class _Entry:
    method: int
    compressed: int
    size: int
    offset: int


def _central_directory(reader: RangeReader) -> dict[str, _Entry]:
    tail, total = reader.tail(TAIL_BYTES)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0:
        raise FetchError("no zip end-of-central-directory record in the wheel's last 64 KiB")
    count, cd_size, cd_offset = struct.unpack_from("<HII", tail, at + 10)
    locator = tail.rfind(b"PK\x06\x07", 0, at)
    if 0xFFFFFFFF in (cd_size, cd_offset) or count == 0xFFFF:  # zip64
        if locator < 0:
            raise FetchError("zip64 wheel without a zip64 locator")
        (eocd64,) = struct.unpack_from("<Q", tail, locator + 8)
        record = reader.read(eocd64, 56)
        cd_size, cd_offset = struct.unpack_from("<QQ", record, 40)
    tail_start = total - len(tail)
    if cd_offset >= tail_start:
        data = tail[cd_offset - tail_start : cd_offset - tail_start + cd_size]
    else:
        data = reader.read(cd_offset, cd_size)
    return _parse_entries(data)


def _parse_entries(data: bytes) -> dict[str, _Entry]:
    entries: dict[str, _Entry] = {}
    pos = 0
    while pos + 46 <= len(data) and data[pos : pos + 4] == b"PK\x01\x02":
        method, = struct.unpack_from("<H", data, pos + 10)
        compressed, size, name_len, extra_len, comment_len = struct.unpack_from("<IIHHH", data, pos + 20)
        offset, = struct.unpack_from("<I", data, pos + 42)
        name = data[pos + 46 : pos + 46 + name_len].decode("utf-8", "replace")
        extra = data[pos + 46 + name_len : pos + 46 + name_len + extra_len]
        if 0xFFFFFFFF in (compressed, size, offset):
            compressed, size, offset = _zip64_sizes(extra, compressed, size, offset)
        entries[name] = _Entry(method, compressed, size, offset)
        pos += 46 + name_len + extra_len + comment_len
    if not entries:
        raise FetchError("the wheel's central directory is empty or unreadable")
    return entries


def _zip64_sizes(extra: bytes, compressed: int, size: int, offset: int) -> tuple[int, int, int]:
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, pos)
        if tag == 1:
            values = list(struct.unpack_from(f"<{length // 8}Q", extra, pos + 4))
            if size == 0xFFFFFFFF:
                size = values.pop(0)
            if compressed == 0xFFFFFFFF:
                compressed = values.pop(0)
            if offset == 0xFFFFFFFF:
                offset = values.pop(0)
        pos += 4 + length
    return compressed, size, offset


def _member(reader: RangeReader, name: str, entry: _Entry) -> bytes:
    """The member's uncompressed bytes."""
    blob = reader.read(entry.offset, 30 + len(name.encode()) + _LOCAL_SLACK + entry.compressed)
    if blob[:4] != b"PK\x03\x04":
        raise FetchError(f"no local header for {name}")
    name_len, extra_len = struct.unpack_from("<HH", blob, 26)
    start = 30 + name_len + extra_len
    raw = blob[start : start + entry.compressed]
    if len(raw) < entry.compressed:
        raw += reader.read(entry.offset + len(blob), entry.compressed - len(raw))
    if entry.method == 0:
        return raw
    if entry.method == 8:
        return zlib.decompress(raw, -15)
    raise FetchError(f"{name} uses zip compression method {entry.method}")


def fetch_members(location: WheelLocation, members: tuple[str, ...], target: Path, cert: str | None = None) -> dict:
    """Write the members found in the wheel under target (verified against RECORD); their marker dict."""
    reader = RangeReader(location.url, cert)
    entries = _central_directory(reader)
    names = list(entries)
    record = next((n for n in names if re.fullmatch(r"vllm-[^/]+\.dist-info/RECORD", n)), None)
    metadata = next((n for n in names if re.fullmatch(r"vllm-[^/]+\.dist-info/METADATA", n)), None)
    if record is None:
        raise FetchError("the wheel has no RECORD to verify its files with")
    wanted = [m for m in members if m in entries] + ([metadata] if metadata else [])
    with ThreadPoolExecutor(max(1, min(8, len(wanted) + 1))) as pool:
        record_job = pool.submit(_member, reader, record, entries[record])
        jobs = {name: pool.submit(_member, reader, name, entries[name]) for name in wanted}
        hashes = record_hashes(record_job.result().decode("utf-8", "replace"))
        files = {name: job.result() for name, job in jobs.items()}
    for name, data in files.items():
        expected = hashes.get(name)
        if expected is None:
            raise FetchError(f"{name} has no sha256 in the wheel's RECORD")
        if hashlib.sha256(data).hexdigest() != expected:
            raise FetchError(f"{name} does not match the sha256 in the wheel's RECORD")
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_bytes(data)
    return {
        "wheel": location.filename, "url": location.url, "wheel_sha256": location.sha256,
        "members": {name: hashes[name] for name in files}, "absent": [m for m in members if m not in entries],
        "range_requests": reader.requests,
    }  # fmt: skip


def cached_release(version: str, cache_dir: Path | None, members: tuple[str, ...] = ()) -> Path | None:
    """The cached tree of a release's kernel files, when a complete one is there: fetched, and (given members)
    fetched for all of them (each either there or known absent from the wheel; an older kvdoctor fetched fewer)."""
    if cache_dir is None:
        return None
    root = cache_dir / CACHE_SUBDIR / version
    if not (root / MARKER).is_file():
        return None
    if members:
        marker = read_marker(root) or {}
        known = set(marker.get("members") or ()) | set(marker.get("absent") or ())
        if not set(members) <= known:
            return None
    return root


def read_marker(root: Path) -> dict | None:
    try:
        return json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def fetch_release(version: str, cache_dir: Path | None, members: tuple[str, ...], *, offline: bool,
                  location: WheelLocation | None = None) -> FetchResult:  # fmt: skip
    """The release's kernel files from the cache, else fetched from its wheel on the user's index.

    Never raises for network trouble: the result then has root None and a one-line note."""
    started = time.perf_counter()
    cached = cached_release(version, cache_dir, members)
    if cached is not None:
        return FetchResult(cached, None, False, time.perf_counter() - started)
    partial = cached_release(version, cache_dir)
    if offline and partial is not None:  # fetched by an older kvdoctor: what it has, the rest said per kernel
        return FetchResult(partial, None, False, time.perf_counter() - started)
    if offline:
        return FetchResult(None, f"vLLM {version}'s kernel files are not cached and the network is off (--offline)",
                           False, time.perf_counter() - started)  # fmt: skip
    if cache_dir is None:
        return FetchResult(None, "no cache directory to keep fetched kernel files in (HOME unset)", False,
                           time.perf_counter() - started)  # fmt: skip
    try:
        settings = read_pip_settings()
        if location is None:
            location, why_not = find_wheel(version)
            if location is None:
                return FetchResult(None, f"could not fetch vLLM {version}'s kernel files: {why_not}", True,
                                   time.perf_counter() - started)  # fmt: skip
        target = cache_dir / CACHE_SUBDIR / version
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".fetch-"))
        try:
            marker = fetch_members(location, members, staging, settings.cert)
            marker["version"] = version
            (staging / MARKER).write_text(json.dumps(marker, indent=1), encoding="utf-8")
            if partial is not None:  # an older, smaller fetch: set it aside, then put the full one in its place
                try:
                    os.replace(target, Path(tempfile.mkdtemp(dir=target.parent, prefix=".old-")) / "tree")
                except OSError:
                    pass  # a concurrent run moved it already
            try:
                os.replace(staging, target)
            except OSError:
                if cached_release(version, cache_dir, members) is None:  # not a concurrent run's finished copy
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            for old in target.parent.glob(".old-*"):
                shutil.rmtree(old, ignore_errors=True)
    except (OSError, FetchError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return FetchResult(None, f"could not fetch vLLM {version}'s kernel files: {reason}", True,
                           time.perf_counter() - started)  # fmt: skip
    return FetchResult(target, None, True, time.perf_counter() - started)
