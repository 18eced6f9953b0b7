"""Locate a log line in vLLM's message index: which `raise` or logger call of which release printed it.

The index (kvdoctor/data/message_index/index.json.gz, built by kvdoctor/builders/message_index) holds every
error-level message template of the vLLM releases the knowledge pack covers and of Triton, torch's CUDA code and
FlashInfer, as literal parts with wildcards between them; each raise site with the condition it is raised under,
its class and function, and the names of the expressions its message interpolates. Templates are keyed by their rarest literal word, so a line costs
one dictionary look-up per word plus a regex test of the few templates that share one of its words.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from functools import lru_cache

from kvdoctor.data import DATA_DIR

INDEX_FORMAT = 3
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{3,}")
MAX_LINE = 4000
STRONG_LITERAL = 24  # literal characters that locate a line on their own; fewer must cover half of it
MIN_PREFIX = 30  # characters of a template's opening literal that identify it in a line cut short


@dataclass(frozen=True)
class Location:
    """One place a template is raised or logged."""

    package: str
    """'vllm', 'triton', 'torch' or 'flashinfer'."""
    kind: str
    """'raise', 'error', 'critical' or 'warning'."""
    type: str | None
    """The exception class a `raise` names (None for logger calls)."""
    file: str
    function: str
    releases: str
    """Release ranges that have it: '0.20.0-0.25.1,0.27.0-0.34.0'."""
    condition: str | None = None
    """For a raise: the `if` it is under, the `except` clause it is in or an assert's negated test, as source text."""
    owner: str | None = None
    """The class around the function (None for a module-level function)."""
    names: tuple[str | None, ...] = ()
    """The source text of the expression each placeholder interpolates, in order (None where unknown)."""

    @property
    def qualname(self) -> str:
        """'Class.function', or 'function' outside a class."""
        return f"{self.owner}.{self.function}" if self.owner else self.function

    def has_release(self, version: str | None) -> bool:
        """Whether this vLLM release has it (locations in other packages always do)."""
        if not version or self.package != "vllm":
            return True
        from packaging.version import InvalidVersion, Version

        try:
            wanted = Version(version).release[:3]
            for run in self.releases.split(","):
                low, _, high = run.partition("-")
                if Version(low).release <= wanted <= Version(high or low).release:
                    return True
        except InvalidVersion:
            return True
        return False

    def describe(self) -> str:
        verb = "raised by" if self.kind == "raise" else f"logged ({self.kind}) by"
        name = f"{self.type} " if self.type else ""
        return f"{name}{verb} {self.file} in {self.qualname} ({self.package} {self.releases})"


@dataclass(frozen=True)
class Template:
    parts: tuple[str | None, ...]
    """Literal strings, None for a placeholder."""
    locations: tuple[Location, ...]

    @property
    def literal_size(self) -> int:
        return sum(len(p) for p in self.parts if p is not None)

    @property
    def text(self) -> str:
        return "".join(p if p is not None else "{}" for p in self.parts)


@dataclass(frozen=True)
class Located:
    """A log line (or exception message) and the template it matches."""

    template: Template
    values: tuple[str, ...]
    """What the line has where the template has placeholders."""
    version: str | None = None

    @property
    def locations(self) -> tuple[Location, ...]:
        """The template's locations in the log's release when it names one (else all)."""
        matching = tuple(loc for loc in self.template.locations if loc.has_release(self.version))
        return matching or self.template.locations

    def named_values(self, location: Location) -> dict[str, str]:
        """The log's value of each expression the location's message interpolates ({'kv_cache_dtype': 'fp8'})."""
        if len(location.names) != len(self.values):
            return {}
        return {name: value for name, value in zip(location.names, self.values) if name and value}

    def describe(self, limit: int = 3) -> str:
        locations = self.locations
        text = "; ".join(loc.describe() for loc in locations[:limit])
        if len(locations) > limit:
            text += f"; and {len(locations) - limit} more places"
        return text


class MessageIndex:
    """Templates keyed by their rarest literal word (chosen by the builder); a group and its locations are decoded
    only when a line's word is its key, so loading parses two JSON lines."""

    def __init__(self, data: dict, templates: int | None = None):
        if data.get("format") != INDEX_FORMAT:
            raise ValueError(f"message index format {data.get('format')} (expected {INDEX_FORMAT})")
        self.packages: dict[str, list[str]] = data.get("packages", {})
        self._files: list[str] = data["files"]
        self._locations: list[list] = data["locations"]
        self._anchors: dict[str, list] = data["anchors"]
        self._prefixes: dict[str, list] = data.get("prefixes", {})
        self._decoded: dict[str, list[tuple[Template, re.Pattern[str]]]] = {}
        self._count = templates

    def __len__(self) -> int:
        if self._count is None:
            self._count = sum(len(json.loads(g) if isinstance(g, str) else g) for g in self._anchors.values())
        return self._count

    @classmethod
    def from_lines(cls, text: str) -> "MessageIndex":
        """The index as the builder stores it (packing.encode): the header and the prefixes are parsed now, each
        location and anchor group when a log line first asks for it."""
        lines = text.split("\n")
        header = json.loads(lines[0])
        count, anchors = header["locations"], header["anchors"]
        groups = dict(line.split("\t", 1) for line in lines[1 + count : 1 + count + anchors])
        return cls({"format": header["format"], "packages": header["packages"], "files": header["files"],
                    "locations": lines[1 : 1 + count], "anchors": groups,
                    "prefixes": json.loads(lines[1 + count + anchors])}, header.get("templates"))

    def _group(self, word: str) -> list[tuple[Template, re.Pattern[str]]]:
        group = self._decoded.get(word)
        if group is None:
            group = []
            raw = self._anchors[word]
            for parts, location_ids in (json.loads(raw) if isinstance(raw, str) else raw):
                locations = tuple(self._location(i) for i in location_ids)
                template = Template(tuple(parts), locations)
                group.append((template, _compile(template.parts)))
            self._decoded[word] = group
        return group

    def _location(self, number: int) -> Location:
        raw = self._locations[number]
        package, kind, exc_type, file_id, function, releases, *rest = json.loads(raw) if isinstance(raw, str) else raw
        condition, owner, names = (rest + [None, None, ()])[:3]
        return Location(package, kind, exc_type, self._files[file_id], function, releases, condition, owner,
                        tuple(names or ()))

    def templates(self):
        """Every template (for tests and tools; decodes the whole index)."""
        for word in self._anchors:
            for template, _ in self._group(word):
                yield template

    def locate(self, text: str, version: str | None = None) -> Located | None:
        """The most specific template the text matches, or None; a message quoted without its closing full stop
        (a doc's table cell, an issue title) matches as the sentence it is."""
        found = self._locate(text, version)
        stripped = text.rstrip()
        if found is None and stripped[-1:].isalnum() and len(stripped) < MAX_LINE:
            found = self._locate(stripped + ".", version)
        return found

    def _locate(self, text: str, version: str | None) -> Located | None:
        text = text[:MAX_LINE]
        plain = text.replace("`", "") if "`" in text else text
        best: list[tuple[Template, re.Match[str]]] = []
        best_size = -1
        for word in set(_WORD.findall(text)):
            if word not in self._anchors:
                continue
            for template, pattern in self._group(word):
                size = template.literal_size
                if size < best_size or not all(literal in plain for literal in _plain_literals(template.parts)):
                    continue  # a literal missing from the line: no match, found without the regex's backtracking
                match = pattern.search(text)
                if match:
                    if size > best_size:
                        best, best_size = [], size
                    best.append((template, match))
        if not best:
            return self._truncated(text, version)
        template, match = best[0]
        if best_size < STRONG_LITERAL and best_size < len(text.strip()) // 2:
            return None  # a short generic template ("Failed to load {}") says little about a long line
        return Located(_merged([t for t, _ in best]), tuple(g or "" for g in match.groups()), version)

    def _truncated(self, text: str, version: str | None) -> Located | None:
        """A line cut short (a truncated log, a hard wrap) still names its template by a long opening literal, whole
        or the part of it the line holds (MIN_PREFIX characters at least)."""
        best: list[Template] = []
        best_size = 0
        plain = text.replace("`", "")  # as _literal: backticks may be missing from the line
        for word in set(_WORD.findall(text)):
            for anchor, position in self._prefixes.get(word, ()):
                template = self._group(anchor)[position][0]
                first = next((p for p in template.parts if p is not None), "").replace("`", "")
                size = len(first) if first in plain else _cut_inside(first, plain)
                if len(first) >= MIN_PREFIX and size >= MIN_PREFIX and size >= best_size:
                    if size > best_size:
                        best, best_size = [], size
                    best.append(template)
        for word in set(_WORD.findall(text)) if not best else ():  # the first sentence of a longer message
            for template, _ in self._group(word) if word in self._anchors else ():
                first = template.parts[0]
                if first is None or len(template.parts) < 3 or first not in text:
                    continue
                size = _cut_at_sentence(template.parts, text)
                if size >= MIN_PREFIX and size >= best_size:
                    if size > best_size:
                        best, best_size = [], size
                    best.append(template)
        if not best:
            return None
        return Located(_merged(best), (), version)  # the values were cut off with the rest of the line


def _cut_inside(first: str, text: str) -> int:
    """How much of a template's opening literal the text ends with, when the text stops inside it (a line cut short,
    or a release that printed only the literal's start: 'FlashInfer requires GPUs with sm75 or higher'); else 0."""
    at = text.find(first[:MIN_PREFIX])
    if at < 0:
        return 0
    rest = text[at:].rstrip(" .")
    return len(rest) if first.startswith(rest) else 0


SENTENCE_END = re.compile(r"[.:;!?](?=\s|$)")


@lru_cache(maxsize=4096)
def _cut_patterns(parts: tuple[str | None, ...]) -> tuple[tuple[re.Pattern[str], int], ...]:
    """For a template of several literals, the patterns of its openings cut at a sentence's end inside a later
    literal (`Model architectures {} are not supported for now.` of `... for now. Supported architectures: {}`),
    each with the literal characters it holds."""
    patterns = []
    body, size = "", 0
    for part in parts:
        if part is None:
            body += "(.*?)"
            continue
        if body:
            for end in SENTENCE_END.finditer(part):
                cut = part[: end.end()]
                patterns.append((re.compile(body + _literal(cut.rstrip()) + r"\s*$"), size + len(cut.rstrip())))
        body += _literal(part)
        size += len(part)
    return tuple(patterns)


def _cut_at_sentence(parts: tuple[str | None, ...], text: str) -> int:
    """The literal characters of the longest opening of the template the line holds whole, stopping at a sentence's
    end (a reporter or a log that kept only the first sentence); 0 when none."""
    held = [size for pattern, size in _cut_patterns(parts) if pattern.search(text.rstrip())]
    return max(held, default=0)


def _merged(templates: list[Template]) -> Template:
    """Equally specific templates (the same wording raised in cuda.py and rocm.py) as one, naming every place."""
    if len(templates) == 1:
        return templates[0]
    locations = sorted({loc for t in templates for loc in t.locations},
                       key=lambda l: (l.package != "vllm", l.file, l.function, l.releases))
    return Template(templates[0].parts, tuple(locations))


@lru_cache(maxsize=8192)
def _plain_literals(parts: tuple[str | None, ...]) -> tuple[str, ...]:
    """A template's literals without their backticks (a match holds each, backticks or not)."""
    return tuple(part.replace("`", "") for part in parts if part)


def _compile(parts: tuple[str | None, ...]) -> re.Pattern[str]:
    body = []
    for i, part in enumerate(parts):
        if part is None:
            # a trailing placeholder takes the rest of the line, an inner one as little as it can
            body.append("(.*)" if i == len(parts) - 1 else "(.*?)")
        else:
            body.append(_literal(part))
    return re.compile("".join(body))


def _literal(part: str) -> str:
    """A template's literal as a pattern; its backticks may be missing (Markdown ate them from a pasted log)."""
    return re.escape(part).replace("`", "`?")


@lru_cache(maxsize=1)
def load_index() -> MessageIndex | None:
    """The shipped index, or None when the package was built without it."""
    resource = DATA_DIR / "message_index" / "index.json.gz"
    try:
        raw = resource.read_bytes()
    except (FileNotFoundError, OSError):
        return None
    return MessageIndex.from_lines(gzip.decompress(raw).decode())
