"""Which runner vLLM builds the model for: 'pooling' (embedding, classification, reward, scoring) or 'generate'. A
pooling model has no LM head and its profile run pools instead of sampling (data/kv_memory.yaml budget.pooling_runner)."""

from __future__ import annotations

from typing import Any

from kvdoctor.model.facts import Facts


def pooling_reason(flat, facts: Facts, table: dict[str, Any], runner: str | None, convert: str | None,
                   task: str | None, version: str | None) -> str | None:  # fmt: skip
    """Why vLLM serves this model with the pooling runner (a clause naming the evidence), or None for 'generate'."""
    entry = table["pooling_runner"]
    if runner and runner != "auto":
        return "--runner pooling" if runner == "pooling" else None
    if convert and convert not in entry["converts_not_pooling"]:
        return f"--convert {convert}"
    if task:
        return f"--task {task}" if task in entry["tasks"] else None
    if flat.get("model.sentence_transformers_pooling"):
        return f"the model directory's {entry['sentence_transformers_file']} (a Sentence Transformers model)"
    arch = _pooling_architecture(facts, entry, version)
    return f"{arch} is registered as a pooling model" if arch else None


def _pooling_architecture(facts: Facts, entry: dict[str, Any], version: str | None) -> str | None:
    """The first architecture the release registers only in its pooling dicts (none where the pack lacks it)."""
    from kvdoctor.vllm_pack.architectures import load_architectures

    record = load_architectures(version) if version else None
    if not record or not facts.model:
        return None
    pooling = set(entry["registry_dicts"])
    for arch in facts.model.architectures:
        places = record["architectures"].get(arch)
        if places:
            return arch if all(name in pooling for name, _ in places) else None
    return None
