"""An engine keyword (Ray Serve LLM's engine_kwargs, vLLM's EngineArgs fields) as the `vllm serve` words that set
the same field: vLLM's parser names each flag after its EngineArgs field, `_` written `-`."""

from __future__ import annotations

import json

from kvdoctor.scan.workload import Token


def flag_words(key: str, value: object, line: int | None) -> list[Token]:
    """key: value -> its serve flag: None leaves vLLM's default, True the switch, False its --no- form (nothing
    for a switch without one), a dict or list the JSON vLLM's parser reads, anything else its text."""
    flag = "--" + key.replace("_", "-")
    if value is None:
        return []
    if value is True:
        return [Token(flag, line)]
    if value is False:  # a store_true switch has no --no- form: False is its default, nothing to write
        return [Token("--no-" + flag[2:], line)] if _has_negative_form(flag) else []
    if isinstance(value, (dict, list)):
        return [Token(flag, line), Token(json.dumps(value), line)]
    return [Token(flag, line), Token(str(value), line)]


def _has_negative_form(flag: str) -> bool:
    """Whether some release's parser has `--no-X` for the flag (BooleanOptionalAction)."""
    from kvdoctor.vllm_pack.candidates import all_serve_options

    return "--no-" + flag[2:] in all_serve_options()
