"""An engine keyword (Ray Serve LLM's engine_kwargs, vLLM's EngineArgs fields) as the `vllm serve` words that set
the same field: vLLM's parser names each flag after its EngineArgs field, `_` written `-`."""

from __future__ import annotations

import json

from kvdoctor.scan.workload import Token


def flag_words(key: str, value: object, line: int | None, release: str | None = None) -> list[Token]:
    """key: value -> its serve flag: None leaves vLLM's default, True the switch, False its --no- form (nothing
    for a switch without one, in `release` when the app pins one), a dict or list the JSON vLLM's parser reads,
    anything else its text."""
    flag = "--" + key.replace("_", "-")
    if value is None:
        return []
    if value is True:
        return [Token(flag, line)]
    if value is False:  # a store_true switch has no --no- form: False is its default, nothing to write
        return [Token("--no-" + flag[2:], line)] if _has_negative_form(flag, release) else []
    if isinstance(value, (dict, list)):
        return [Token(flag, line), Token(json.dumps(value), line)]
    return [Token(flag, line), Token(str(value), line)]


def _has_negative_form(flag: str, release: str | None = None) -> bool:
    """Whether the release's parser (the ones read on either side of a release the pack lacks; any release's when
    none is named) has `--no-X` for the flag (BooleanOptionalAction): in one where X is a store_true switch, an
    EngineArgs keyword X=False is its default, not a refused `--no-X` (Python passes no argv)."""
    from kvdoctor.vllm_pack.candidates import all_serve_options, releases_around
    from kvdoctor.vllm_pack.release import load_release

    negative = "--no-" + flag[2:]
    if release is not None:
        exact = load_release(release)
        read = [exact] if exact else [r for r in releases_around(release) if r]
        if read:
            return any(negative in r.serve_args for r in read)
    return negative in all_serve_options()
