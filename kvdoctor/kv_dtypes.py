"""Which --kv-cache-dtype values a vLLM release accepts (data in data/kv_cache_dtypes.yaml)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from kvdoctor.yaml_safe import load_yaml
from packaging.version import InvalidVersion, Version

OLDEST_READ = Version("0.19.0")


@dataclass(frozen=True)
class KvDtype:
    name: str
    since: Version | None
    platform: str | None


@lru_cache(maxsize=1)
def _catalogue() -> tuple[Version, tuple[KvDtype, ...]]:
    raw = load_yaml(resources.files("kvdoctor.data").joinpath("kv_cache_dtypes.yaml").read_text("utf-8"))
    values = tuple(
        KvDtype(v["name"], Version(v["since"]) if "since" in v else None, v.get("platform")) for v in raw["values"]
    )
    return Version(raw["checked_through"]), values


def accepted_values(vllm_version: str | None) -> list[str] | None:
    """Values the release accepts, or None when kvdoctor cannot know (no version, unparsable, too old)."""
    if vllm_version is None:
        return None
    try:
        version = Version(vllm_version)
    except InvalidVersion:
        return None
    if version.release < OLDEST_READ.release:
        return None
    _, values = _catalogue()
    return [v.name for v in values if v.since is None or version.release >= v.since.release]


def kv_dtype_facts(kv_cache_dtype: str, vllm_version: str | None) -> dict[str, object]:
    """Derived facts: kv.accepted (True/False/None), kv.closest, kv.valid_values, kv.platform, kv.known."""
    checked_through, values = _catalogue()
    by_name = {v.name: v for v in values}
    accepted = accepted_values(vllm_version)
    newer = _newer_than(vllm_version, checked_through)
    if accepted is None:
        verdict = None if kv_cache_dtype not in by_name or by_name[kv_cache_dtype].since else True
        if kv_cache_dtype.startswith("turboquant_") and _older_than(vllm_version, "0.20.0"):
            verdict = False
    elif kv_cache_dtype in accepted:
        verdict = True
    else:
        verdict = None if newer else False  # a release newer than our data may have added it
    pool = accepted or list(by_name)
    closest = difflib.get_close_matches(kv_cache_dtype, pool, n=1, cutoff=0.4)
    entry = by_name.get(kv_cache_dtype)
    return {
        "kv.accepted": verdict,
        "kv.known": kv_cache_dtype in by_name,
        "kv.closest": closest[0] if closest else None,
        "kv.valid_values": ", ".join(pool),
        "kv.platform": entry.platform if entry else None,
        "kv.is_fp8": kv_cache_dtype.startswith("fp8"),
        "kv.is_turboquant": kv_cache_dtype.startswith("turboquant_"),
    }


def _newer_than(version: str | None, bound: Version) -> bool:
    try:
        return version is not None and Version(version).release > bound.release
    except InvalidVersion:
        return False


def _older_than(version: str | None, bound: str) -> bool:
    try:
        return version is not None and Version(version).release < Version(bound).release
    except InvalidVersion:
        return False
