"""What happens to an option's value after the release's parser took it: an option typed as the prefix of a longer
one (argparse's abbreviations: `--device` became `--device-ids` in 0.24.0), and a value that parser keeps but vLLM
refuses once it builds its configuration (data/serve_flags.yaml `refused_values`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from kvdoctor.data import read_data
from kvdoctor.base.yaml_safe import load_yaml_cached


@dataclass(frozen=True)
class ValueRefusal:
    """A value of `option` that vLLM refuses after parsing."""

    option: str
    value: str
    takes: str
    """What the option takes, in words."""
    refusal: str
    """What vLLM does with the value, the value filled in."""
    where: str
    """The vLLM file:line locations, with the releases they were read from."""


@lru_cache(maxsize=1)
def _refused_values() -> dict[str, dict]:
    return load_yaml_cached(read_data("serve_flags.yaml"), "serve_flags.yaml").get("refused_values") or {}


def refused_value(option: str, values: tuple[str, ...]) -> ValueRefusal | None:
    """The first of `values` that vLLM refuses for `option` (as the parser spells it), None when all pass."""
    check = _refused_values().get(option)
    if check is None:
        return None
    accepts = re.compile(check["accepts"])
    for value in values:
        if not accepts.match(value):
            return ValueRefusal(option, value, check["takes"], check["refusal"].replace("{value}", repr(value)),
                                check["where"])
    return None


def own_option_releases(option: str) -> tuple[str, ...]:
    """The read releases whose parser has `option` as an option of its own (not only as a prefix)."""
    from kvdoctor.vllm_pack.candidates import all_serve_options
    from kvdoctor.vllm_pack.release import load_release
    from kvdoctor.vllm_pack.store import pack_releases

    if option not in all_serve_options():  # every release's options are loaded once, and only for this question
        return ()
    return tuple(v for v in pack_releases() if option in load_release(v).serve_args)
