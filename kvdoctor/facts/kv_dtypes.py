"""Which --kv-cache-dtype values vLLM accepts, from each release's own list (the knowledge pack).

When the vLLM version is unknown, a value is accepted or refused only if every release the pack read agrees.
Which platform a value is implemented on (ROCm, Intel Gaudi) is people's knowledge: data/kv_cache_platforms.yaml.
"""

from __future__ import annotations

import difflib
from functools import lru_cache

from kvdoctor.data import read_data
from kvdoctor.vllm_pack.candidates import Candidates, agree, candidates, describe_range
from kvdoctor.base.yaml_safe import load_yaml_cached


@lru_cache(maxsize=1)
def platform_only() -> dict[str, str]:
    """kv dtype -> the only platform that implements it."""
    raw = load_yaml_cached(read_data("kv_cache_platforms.yaml"), "kv_cache_platforms.yaml")
    return {entry["name"]: entry["platform"] for entry in raw["values"]}


def accepted_values(vllm_version: str | None) -> tuple[str, ...]:
    """The values the release accepts; every value some release accepts when the version is unknown."""
    releases = candidates(vllm_version).releases
    return tuple(dict.fromkeys(v for r in reversed(releases) for v in r.kv_cache_dtypes))


def kv_dtype_facts(kv_cache_dtype: str, releases: Candidates | str | None) -> dict[str, object]:
    """Derived facts: kv.accepted (True/False/None), kv.accepted_by, kv.closest, kv.valid_values, kv.platform.
    `releases` is the candidate set, or a vLLM version (None: unknown) to take it from."""
    if not isinstance(releases, Candidates):
        releases = candidates(releases)
    accepted = agree(releases.releases, lambda r: kv_cache_dtype in r.kv_cache_dtypes)
    pool = list(dict.fromkeys(v for r in reversed(releases.releases) for v in r.kv_cache_dtypes))
    typed = kv_cache_dtype.strip().lower()  # 'FP8', 'fp8 ': the value meant, in vLLM's spelling
    closest = [typed] if typed in pool else difflib.get_close_matches(typed, pool, n=1, cutoff=0.4)
    accepting = [r.version for r in releases.releases if kv_cache_dtype in r.kv_cache_dtypes]
    return {
        "kv.accepted": accepted.value,
        "kv.accepted_by": describe_range(accepting),
        "kv.refused_by": describe_range([r.version for r in releases.releases if r.version not in accepting]),
        "kv.known": bool(accepting),
        "kv.closest": closest[0] if closest else None,
        "kv.valid_values": ", ".join(pool) if pool else None,
        "kv.platform": platform_only().get(kv_cache_dtype),
        "kv.is_fp8": kv_cache_dtype.startswith("fp8"),
        "kv.is_turboquant": kv_cache_dtype.startswith("turboquant_"),
    }
