"""vLLM's start-up guards in front of the Triton kernels, from kvdoctor/data/constructor_guards.yaml: the failure
kind of each refusal, the words that find it in a release's source, and the fallback message for a release the
knowledge pack does not hold."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import lru_cache

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data


def _capability(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


@dataclass(frozen=True)
class Refusal:
    """One configuration a guard refuses."""

    kv_cache_dtypes: str
    """fnmatch pattern of the --kv-cache-dtype values it refuses ('fp8*')."""
    below: tuple[int, int]
    """It refuses them on GPUs below this compute capability."""
    kind: str
    """The failure kind (kvdoctor/data/failure_kinds.yaml)."""
    needle: str
    """Words of the refusal's message as they stand on one line of the guard's source file."""
    message: str
    """vLLM's message, with {device_name}, {major}, {minor} and {suggested} to fill in."""


@dataclass(frozen=True)
class ConstructorGuard:
    """A backend implementation's constructor check, as vLLM's releases wrote it."""

    backend: str
    """vLLM's backend name (the pack's `guards` key): TRITON_ATTN, TRITON_MLA."""
    impl: str
    """The constructor, as reports name it: TritonAttentionImpl.__init__."""
    source_file: str
    since: str
    """The first vLLM release with the guard."""
    refusals: dict[str, Refusal]
    """'fp8' / 'bf16' -> the refusal."""
    suggest: tuple[tuple[tuple[int, int] | None, str], ...]
    """(below capability or None, --kv-cache-dtype) in the order vLLM's message picks its suggestion."""

    def refusal_for(self, kv_cache_dtype: str) -> tuple[str, Refusal] | None:
        """('fp8' or 'bf16', the refusal) whose KV dtypes include `kv_cache_dtype`, whatever the GPU."""
        return next(((which, r) for which, r in self.refusals.items() if fnmatchcase(kv_cache_dtype,
                                                                                 r.kv_cache_dtypes)), None)  # fmt: skip

    def fallback_message(self, kv_cache_dtype: str, capability: tuple[int, int],
                         device_name: str | None = None) -> str | None:  # fmt: skip
        """The guard's words as the releases read here wrote them, for this KV dtype on this GPU; None when it lets
        the configuration through. Only for a release the knowledge pack does not hold."""
        found = self.refusal_for(kv_cache_dtype)
        cap = tuple(capability)
        if found is None or not cap < found[1].below:
            return None
        suggested = next(dtype for below, dtype in self.suggest if below is None or cap < below)
        return found[1].message.format(device_name=device_name or "this GPU", major=cap[0], minor=cap[1],
                                       suggested=suggested)  # fmt: skip


@lru_cache(maxsize=1)
def constructor_guards() -> dict[str, ConstructorGuard]:
    """vLLM backend name -> its guard, for every backend kvdoctor compiles behind a guard."""
    table = load_yaml_cached(read_data("constructor_guards.yaml"), "constructor_guards.yaml")
    suggest = tuple((_capability(s["below"]) if "below" in s else None, s["kv_cache_dtype"]) for s in table["suggest"])
    return {
        backend: ConstructorGuard(
            backend, entry["impl"], entry["source_file"], entry["since"],
            {which: Refusal(r["kv_cache_dtypes"], _capability(r["below"]), r["kind"], r["needle"], r["message"])
             for which, r in entry["refusals"].items()},
            suggest,
        )
        for backend, entry in table["backends"].items()
    }  # fmt: skip
