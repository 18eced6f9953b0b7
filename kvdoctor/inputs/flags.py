"""Where a flag belongs: kvdoctor's own flags before `--`, vLLM's serve flags after it (or mixed in before it).

A flag that is neither kvdoctor's nor any vLLM release's is a typo: exit 2 naming the closest real flag. A
kvdoctor flag inside the pasted vLLM command would be silently lost: exit 2 saying where it goes.
"""

from __future__ import annotations

import difflib

from kvdoctor.base.errors import UsageError


def refuse_misplaced_flags(pasted: tuple[str, ...], loose: tuple[str, ...], own_flags: tuple[str, ...]) -> list[str]:
    """The loose tokens to treat as serve flags; raises UsageError for a typo or a misplaced flag."""
    suspects = [n for n in map(option_name, _after_launcher(pasted)) if n and n in own_flags]
    if not suspects and not any(map(option_name, loose)):
        return list(loose)  # nothing to look up: spare loading the release facts
    from kvdoctor.vllm_pack.candidates import all_serve_options

    vllm = all_serve_options()
    for name in suspects:
        if name not in vllm:
            raise UsageError(
                f"{name} is a kvdoctor flag, not a vLLM one, so it cannot go inside the pasted command",
                f"put it before `--`: kvdoctor check {name} ... -- vllm serve ...",
            )
    for token in loose:
        name = option_name(token)
        if name is None or name in vllm or name.split(".", 1)[0] in vllm:
            continue
        raise UsageError(f"no such option: {token.partition('=')[0]}", _suggestion(name, own_flags, vllm))
    return list(loose)


def _after_launcher(pasted: tuple[str, ...]) -> tuple[str, ...]:
    """The pasted command without a leading `python -m MODULE` (the api_server module: its -m is Python's)."""
    if len(pasted) >= 3 and pasted[0].rsplit("/", 1)[-1].startswith("python") and pasted[1] == "-m":
        return pasted[3:]
    return pasted


def option_name(token: str) -> str | None:
    """'--max_model_len=4' -> '--max-model-len'; None for values and positionals."""
    if not token.startswith("-") or token in ("-", "--") or token[1:2].isdigit():
        return None
    name = token.partition("=")[0]
    return "--" + name[2:].replace("_", "-") if name.startswith("--") else name


def _suggestion(name: str, own_flags: tuple[str, ...], vllm: frozenset[str]) -> str:
    own = [name] if name in own_flags else []  # --vllm_version: kvdoctor's flags are spelt with '-'
    own = own or difflib.get_close_matches(name, [f for f in own_flags if f.startswith("--")], n=1, cutoff=0.6)
    if own:
        return f"did you mean {own[0]}?"
    theirs = difflib.get_close_matches(name, sorted(f for f in vllm if f.startswith("--")), n=1, cutoff=0.6)
    if theirs:
        return f"did you mean vLLM's {theirs[0]}?"
    return "kvdoctor check --help lists kvdoctor's flags; vLLM serve flags go after `--`: -- vllm serve MODEL ..."

