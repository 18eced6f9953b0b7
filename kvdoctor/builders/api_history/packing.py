"""The API history's stored form: for each module, name, class member and parameter, the release ranges that have
it, as gzip text written deterministically (byte-identical for the same inputs), one table a line.

A name whose ranges are its module's (a member's or parameter's: its class's or function's) is stored as 0, which
is most of them: the file stays small and reads fast.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

FORMAT = 2
SAME_AS_OWNER = 0
# models' and kernels' classes keep their names but not their members and parameters: programs on top of vLLM
# import them, they do not construct them (two fifths of the file otherwise)
NO_DETAIL = ("vllm.model_executor.models.", "vllm.models.", "vllm.model_executor.layers.", "vllm.vllm_flash_attn.")


def ranges_of(mask: int, releases: list[str]) -> list[list[str]]:
    """[[first, last], ...]: the runs of set bits of `mask` over the ordered releases."""
    runs: list[list[str]] = []
    start = None
    for i in range(len(releases) + 1):
        present = i < len(releases) and mask >> i & 1
        if present and start is None:
            start = i
        elif not present and start is not None:
            runs.append([releases[start], releases[i - 1]])
            start = None
    return runs


def pack(masks: dict[tuple[str, str, str], int], releases: list[str], read_whole: list[str],
         complete: bool) -> dict:
    """The stored history of each key's bitmask over `releases` (bit i: releases[i] has it); `complete` says
    whether `releases` are every release between the oldest and newest (else a change falls between two)."""
    modules = {k[1]: m for k, m in masks.items() if k[0] == "module"}
    names: dict[str, dict[str, int]] = {}
    for (kind, owner, name), mask in masks.items():
        if kind == "name":
            names.setdefault(owner, {})[name] = mask
    history: dict = {"format": FORMAT, "releases": releases, "read_whole": read_whole, "complete": complete,
                     "read_by_ranges": [r for r in releases if r not in read_whole],
                     "modules": {m: ranges_of(mask, releases) for m, mask in sorted(modules.items())},
                     "names": {}, "members": {}, "params": {}}
    for module, table in sorted(names.items()):
        history["names"][module] = {n: _relative(mask, modules.get(module), releases) for n, mask in sorted(table.items())}
    for kind in ("member", "param"):
        grouped: dict[str, dict[str, int]] = {}
        for (k, owner, name), mask in masks.items():
            if k == kind and not owner.startswith(NO_DETAIL):
                grouped.setdefault(owner, {})[name] = mask
        for owner, table in sorted(grouped.items()):
            module, _, short = owner.rpartition(".")
            owner_mask = names.get(module, {}).get(short)
            history[kind + "s"][owner] = {n: _relative(mask, owner_mask, releases) for n, mask in sorted(table.items())}
    return history


def _relative(mask: int, owner_mask: int | None, releases: list[str]):
    return SAME_AS_OWNER if mask == owner_mask else ranges_of(mask, releases)


# the stored lines after the header: one per module's names, class's members, callable's parameters, class's bases
SECTIONS = (("names", "N"), ("members", "M"), ("params", "P"), ("bases", "B"))


def write(history: dict, out: Path) -> None:
    """`history` as gzip text at `out`: a JSON header line (format, releases, modules), then one line per table,
    `<section letter>\t<owner>\t<JSON>`, so a look-up parses only the lines it asks for; byte-identical for the
    same history (mtime 0, sorted)."""
    header = {k: v for k, v in history.items() if k not in dict(SECTIONS)}
    lines = [json.dumps(header, sort_keys=True, separators=(",", ":"))]
    for section, letter in SECTIONS:
        for owner, table in sorted(history.get(section, {}).items()):
            lines.append(f"{letter}\t{owner}\t" + json.dumps(table, sort_keys=True, separators=(",", ":")))
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as gz:
        gz.write(("\n".join(lines) + "\n").encode("utf-8"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(buffer.getvalue())
