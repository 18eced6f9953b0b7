"""Whether the judged release still serves the model's architecture: vLLM's _PREVIOUSLY_SUPPORTED_MODELS, read per
release into data/removed_architectures.yaml (fact names: data/fact_names.yaml, group `architecture`)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kvdoctor.base.versions import release_numbers
from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data
from kvdoctor.model.facts import Facts
from kvdoctor.vllm_pack.candidates import Candidates, agree


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return load_yaml_cached(read_data("removed_architectures.yaml"), "removed_architectures.yaml")


def removed_error(architectures: tuple[str, ...], version: str) -> str | None:
    """vLLM's refusal when none of these architectures is served by `version` any more, 'none' when it serves them,
    None when not decided (a release between one read without the entry and one read with it)."""
    table = _table()
    removed = [a for a in architectures if a in table["architectures"]]
    if not architectures or len(removed) < len(architectures):
        return "none"  # another architecture of the model may still be served: the registry tries it first
    arch, entry = removed[0], table["architectures"][removed[0]]
    number = release_numbers(version)
    read = [v for v in table["read_in"] if release_numbers(v) <= number]
    below = max(read, key=release_numbers) if read else None
    if below is not None and release_numbers(entry["listed_from"]) <= release_numbers(below):
        return table["message"].format(arch=arch, last=entry["last"])
    if number <= release_numbers(entry["last"]):
        return "none"
    return None


def architecture_facts(facts: Facts, releases: Candidates) -> dict[str, Any]:
    """vllm.arch_removed for the judged release(s), decided where every candidate agrees."""
    if facts.model is None or not releases.releases:
        return {"vllm.arch_removed": None}
    architectures = tuple(facts.model.architectures)
    return {"vllm.arch_removed": agree(releases.releases, lambda r: removed_error(architectures, r.version)).value}
