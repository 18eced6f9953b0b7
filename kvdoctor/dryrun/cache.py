"""On-disk cache of kernel compile results, keyed by everything that decides the outcome.

Entries are written atomically (tempfile + os.replace), so two kvdoctor runs can share the directory;
an unreadable or corrupt entry is treated as missing and overwritten by the next compile.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from kvdoctor.base.cache_dir import default_cache_dir  # noqa: F401 - one definition of where kvdoctor may write

CACHE_FORMAT = "kvdoctor-dryrun-1"
CACHEABLE = ("passed", "failed")  # crashes and timeouts may be transient: always retried


def usable_cache_dir(cache_dir: Path | None) -> tuple[Path | None, str | None]:
    """(directory, None) when it can be created and written; else (None, a note saying why not)."""
    if cache_dir is None:
        return None, "no cache directory (HOME unset); ran without cache"
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=cache_dir, prefix=".probe-"):
            pass
    except OSError as exc:
        return None, f"cache directory {cache_dir} is not writable ({exc.strerror or exc}); ran without cache"
    return cache_dir, None


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def result_key(kernel_sha256: str, triton_version: str, kernel: str, inputs: dict[str, Any]) -> str:
    """Key of one compile: kernel file hash, Triton version, kernel name, target, dtypes and constexprs."""
    material = json.dumps([CACHE_FORMAT, kernel_sha256, triton_version, kernel, inputs], sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()


def _entry_path(cache_dir: Path, key: str) -> Path:
    return cache_dir / "results" / key[:2] / f"{key}.json"


def load_result(cache_dir: Path, key: str) -> dict[str, Any] | None:
    """The stored result dict for key, or None when absent, unreadable or not a valid entry."""
    try:
        entry = json.loads(_entry_path(cache_dir, key).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != key or entry.get("format") != CACHE_FORMAT:
        return None
    result = entry.get("result")
    if not isinstance(result, dict) or result.get("status") not in CACHEABLE:
        return None
    return result


def store_result(cache_dir: Path, key: str, result: dict[str, Any]) -> bool:
    """Write result under key atomically; False (and nothing raised) if the disk refuses."""
    if result.get("status") not in CACHEABLE:
        return False
    path = _entry_path(cache_dir, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"format": CACHE_FORMAT, "key": key, "result": result}, handle)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        return False
    return True
