"""Whether the judged release serves the model's architecture: its registry as the pack read it
(vllm_pack/architectures.py) and vLLM's _PREVIOUSLY_SUPPORTED_MODELS, read per release into
data/removed_architectures.yaml (fact names: data/fact_names.yaml, group `architecture`)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kvdoctor.base.versions import release_numbers
from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data
from kvdoctor.model.facts import Facts
from kvdoctor.vllm_pack.architectures import judge_architectures, serving_releases
from kvdoctor.vllm_pack.candidates import Candidates, agree, describe_range


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return load_yaml_cached(read_data("removed_architectures.yaml"), "removed_architectures.yaml")


def removed_error(architectures: tuple[str, ...], version: str) -> str | None:
    """vLLM's refusal when none of these architectures is served by `version` any more, 'none' when it serves them,
    None when not decided (a release outside the pack between one read without the entry and one read with it).
    A pack release answers from its own registry (data/vllm_pack/architectures; it agrees with the YAML wherever
    that decides)."""
    verdict = judge_architectures(architectures, version, model_impl="vllm")  # removed is refused before fallback
    if verdict is not None:
        return verdict.message if verdict.kind == "removed" else "none"
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


_SERVED_FACTS = ("vllm.arch_served", "vllm.arch_refusal", "vllm.arch_refusal_at", "vllm.arch_served_by",
                 "vllm.arch_first_served", "vllm.arch_undecided")  # fmt: skip


def _model_impl(argv: tuple[str, ...]) -> str:
    """--model-impl as vLLM's parser reads it (the last one wins); 'auto' when not given."""
    value = "auto"
    for i, word in enumerate(argv):
        if word == "--model-impl" and i + 1 < len(argv):
            value = argv[i + 1]
        elif word.startswith("--model-impl="):
            value = word.split("=", 1)[1]
    return value


def served_facts(architectures: tuple[str, ...], releases: Candidates, model_impl: str) -> dict[str, Any]:
    """vllm.arch_served ('yes'/'no', unknown when undecided) and vLLM's refusal where every candidate refuses."""
    verdicts = {r.version: judge_architectures(architectures, r.version, model_impl) for r in releases.releases}
    if not architectures or any(v is None for v in verdicts.values()):
        return dict.fromkeys(_SERVED_FACTS)
    word = {True: "yes", False: "no", None: "undecided"}
    outcome = agree(releases.releases, lambda r: word[verdicts[r.version].served])
    served = outcome.value if outcome.value in ("yes", "no") else None
    newest = verdicts[releases.releases[-1].version]
    undecided = "none"
    if outcome.value is None:
        undecided = "; ".join(f"{value} by {span}" for value, span in outcome.split) + " (decided by --vllm-version)"
    elif outcome.value == "undecided":
        undecided = (f"no candidate release registers {', '.join(architectures)}, and with --model-impl {model_impl} vLLM's "
                     f"Transformers backend ({newest.where}) serves it only if the installed transformers has a class "
                     "of that name or config.json's auto_map names an AutoModel")  # fmt: skip
    facts: dict[str, Any] = dict.fromkeys(_SERVED_FACTS)
    facts |= {"vllm.arch_served": served, "vllm.arch_undecided": undecided}
    if served == "no":
        kinds = {v.kind for v in verdicts.values()}
        refused = kinds == {"unsupported"} or kinds == {"out_of_tree"}  # 'removed': arch_removed says it
        serving = serving_releases(architectures)
        facts |= {"vllm.arch_refusal": newest.message if refused else "none",
                  "vllm.arch_refusal_at": newest.where, "vllm.arch_served_by": describe_range(serving),
                  "vllm.arch_first_served": serving[0] if serving else "none"}  # fmt: skip
    elif served == "yes":
        facts |= {"vllm.arch_refusal": "none", "vllm.arch_served_by": None}
    return facts


def architecture_facts(facts: Facts, releases: Candidates) -> dict[str, Any]:
    """vllm.arch_removed and vllm.arch_served for the judged release(s), decided where every candidate agrees."""
    if facts.model is None or not releases.releases:
        return {"vllm.arch_removed": None} | dict.fromkeys(_SERVED_FACTS)
    architectures = tuple(facts.model.architectures)
    removed = agree(releases.releases, lambda r: removed_error(architectures, r.version)).value
    return {"vllm.arch_removed": removed} | served_facts(architectures, releases, _model_impl(facts.serve.argv))
