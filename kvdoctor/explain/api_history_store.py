"""data/api_history.json.gz as it is read: the header (releases, modules) parsed at once, every other table only
when a look-up asks for it, found in the decompressed text by its line's prefix (a full parse costs ~1 s)."""

from __future__ import annotations

import gzip
import json
import re
from functools import lru_cache
from pathlib import Path

SECTION_LETTER = {"names": "N", "members": "M", "params": "P", "bases": "B"}
_QUALIFIED = re.compile(r"[\w.]+")


class StoredHistory:
    """One history file: `header` (format, releases, read_whole, complete, modules) and its tables by owner."""

    def __init__(self, path: Path) -> None:
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
        end = text.index("\n")
        self.header = json.loads(text[:end])
        self.text = text
        self.releases: list[str] = self.header["releases"]
        self.position = {r: i for i, r in enumerate(self.releases)}
        self.modules: dict[str, list] = self.header["modules"]

    @lru_cache(maxsize=4096)
    def table(self, section: str, owner: str) -> dict | list | None:
        """The owner's table of a section ('names' of a module, 'members' / 'params' / 'bases' of a class)."""
        prefix = f"\n{SECTION_LETTER[section]}\t{owner}\t"
        at = self.text.find(prefix)
        if at < 0:
            return None
        start = at + len(prefix)
        return json.loads(self.text[start:self.text.index("\n", start)])

    def modules_with(self, name: str) -> tuple[str, ...]:
        """The modules whose names table holds `name`."""
        return self.owners_with("names", name)

    @lru_cache(maxsize=1024)
    def owners_named(self, short: str, section: str) -> tuple[str, ...]:
        """The qualified classes or functions called `short` that have a table in the section."""
        letter = SECTION_LETTER[section] + "\t"
        needle = f".{short}\t"  # the owner column's end: JSON holds no raw tab (a string search, not a regex's scan)
        found = []
        at = self.text.find(needle)
        while at >= 0:
            start = self.text.rfind("\n", 0, at) + 1
            owner = self.text[start + 2:at + len(needle) - 1]
            if self.text.startswith(letter, start) and _QUALIFIED.fullmatch(owner):
                found.append(owner)
            at = self.text.find(needle, at + 1)
        return tuple(found)

    @lru_cache(maxsize=1024)
    def owners_with(self, section: str, name: str) -> tuple[str, ...]:
        """The owners whose table in the section holds the key `name`."""
        letter = SECTION_LETTER[section] + "\t"
        found = []
        for needle in ("{" + json.dumps(name) + ":", "," + json.dumps(name) + ":"):
            at = self.text.find(needle)
            while at >= 0:
                start = self.text.rfind("\n", 0, at) + 1
                if self.text.startswith(letter, start):
                    found.append(self.text[start + 2:self.text.index("\t", start + 2)])
                at = self.text.find(needle, at + 1)
        return tuple(sorted(set(found)))
