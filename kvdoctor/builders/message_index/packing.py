"""The message index's stored form: templates collected per release into entries with release ranges, grouped
by their rarest literal word (the look-up key at match time), written as deterministic gzip text, one JSON
value a line (read lazily: a log costs the parse of the lines it asks for).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import sys
from pathlib import Path

from kvdoctor.base.versions import describe_runs
from kvdoctor.builders.message_index.templates import templates_in_source

INDEX_FORMAT = 3
MIN_PREFIX = 30  # kvdoctor/explain/message_index.py: an opening literal this long identifies a cut-off line


def release_ranges(have: set[str], order: list[str]) -> str:
    """'0.20.0-0.25.1,0.27.0-0.34.0': contiguous runs of the ordered releases (the index's spelling: no spaces)."""
    return describe_runs(have, order, separator=",")


def collect(package: str, releases: list[tuple[str, list[tuple[str, bytes]]]]) -> list[dict]:
    """The templates of `package`'s (release, files) pairs, oldest release first: one entry per distinct
    (kind, type, template, file, function, condition, class, names), with the releases that have it as ranges."""
    cache: dict[str, list[tuple]] = {}
    where: dict[tuple, set[str]] = {}
    order = [release for release, _ in releases]
    for release, files in releases:
        for path, source in files:
            digest = hashlib.sha1(source).hexdigest()
            if digest not in cache:
                cache[digest] = templates_in_source(source, path)
            for entry in cache[digest]:
                where.setdefault(entry, set()).add(release)
        print(f"  {package} {release}: {len(files)} files, {len(where)} templates so far", file=sys.stderr)
    entries = []
    for (kind, exc_type, parts, path, function, condition, owner, names), have in where.items():
        entries.append({
            "package": package,
            "kind": kind,
            "type": exc_type,
            "parts": list(parts),
            "file": path,
            "function": function,
            "releases": release_ranges(have, order),
            "condition": condition,
            "class": owner,
            "names": list(names),
        })
    return entries


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{3,}")  # kvdoctor/explain/message_index.py splits log lines the same way


def pack(entries: list[dict], packages: dict[str, list[str]]) -> dict:
    """Templates grouped by their rarest literal word (the look-up key at match time), locations shared."""
    entries = sorted(entries, key=lambda e: (e["package"], e["file"], e["function"], e["kind"], e["type"] or "",
                                            json.dumps(e["parts"]), e.get("condition") or "", e.get("class") or "",
                                            json.dumps(e.get("names") or [])))
    files = sorted({e["file"] for e in entries})
    file_id = {f: i for i, f in enumerate(files)}
    locations, location_id, by_parts = [], {}, {}
    for e in entries:
        location = (e["package"], e["kind"], e["type"], file_id[e["file"]], e["function"], e["releases"],
                    e.get("condition"), e.get("class"), tuple(e.get("names") or ()))
        while location[-1] in (None, ()):  # trailing fields a site does not have are left out
            location = location[:-1]
        if location not in location_id:
            location_id[location] = len(locations)
            locations.append([list(f) if isinstance(f, tuple) else f for f in location])
        by_parts.setdefault(json.dumps(e["parts"]), []).append(location_id[location])
    words = {key: set(_WORD.findall(" ".join(p for p in json.loads(key) if p))) for key in by_parts}
    frequency: dict[str, int] = {}
    for found in words.values():
        for word in found:
            frequency[word] = frequency.get(word, 0) + 1
    anchors: dict[str, list] = {}
    for key in sorted(by_parts):
        if not words[key]:
            continue
        anchor = min(words[key], key=lambda w: (frequency[w], -len(w), w))
        anchors.setdefault(anchor, []).append([json.loads(key), sorted(set(by_parts[key]))])
    # A line cut short keeps only a template's opening: key those by the rarest word of the opening literal.
    prefixes: dict[str, list] = {}
    for anchor in sorted(anchors):
        for position, (parts, _) in enumerate(anchors[anchor]):
            first = next((p for p in parts if p is not None), "")
            opening = set(_WORD.findall(first)) if len(first) >= MIN_PREFIX else set()
            if opening:
                word = min(opening, key=lambda w: (frequency[w], -len(w), w))
                prefixes.setdefault(word, []).append([anchor, position])
    return {"format": INDEX_FORMAT, "packages": packages, "files": files, "locations": locations, "anchors": anchors,
            "prefixes": prefixes}


def unpack(index: dict) -> list[dict]:
    """The entries a packed index was made from (to re-pack it without re-reading the wheels)."""
    entries = []
    for group in index["anchors"].values():
        for parts, location_ids in group:
            for number in location_ids:
                package, kind, exc_type, file_id, function, releases, *rest = index["locations"][number]
                condition, owner, names = (rest + [None, None, []])[:3]
                entries.append({"package": package, "kind": kind, "type": exc_type, "parts": parts,
                                "file": index["files"][file_id], "function": function, "releases": releases,
                                "condition": condition, "class": owner, "names": names or []})
    return entries


def encode(index: dict) -> bytes:
    """The index as text lines, one JSON value each, so a reader parses only the lines a log asks for: a header
    (format, packages, files, the counts), one line per location, one `word<TAB>group` line per anchor, and the
    prefixes. Deterministic: the same index gives the same bytes."""
    def dump(value) -> str:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    header = {"format": index["format"], "packages": index["packages"], "files": index["files"],
              "locations": len(index["locations"]), "anchors": len(index["anchors"]),
              "templates": sum(len(group) for group in index["anchors"].values())}
    lines = [dump(header)]
    lines += [dump(location) for location in index["locations"]]
    lines += [f"{word}\t{dump(index['anchors'][word])}" for word in sorted(index["anchors"])]
    lines.append(dump(index.get("prefixes", {})))
    return "\n".join(lines).encode()


def decode(data: bytes) -> dict:
    """The index `encode` wrote, fully parsed (to re-pack it or to test it)."""
    lines = data.decode().split("\n")
    header = json.loads(lines[0])
    count, anchors = header["locations"], header["anchors"]
    locations = [json.loads(line) for line in lines[1 : 1 + count]]
    groups = dict(line.split("\t", 1) for line in lines[1 + count : 1 + count + anchors])
    return {"format": header["format"], "packages": header["packages"], "files": header["files"],
            "locations": locations, "anchors": {word: json.loads(group) for word, group in groups.items()},
            "prefixes": json.loads(lines[1 + count + anchors])}


def read(path: Path) -> dict:
    """The packed index stored at `path`."""
    return decode(gzip.decompress(path.read_bytes()))


def write(index: dict, out: Path) -> None:
    """`index` gzip-compressed at `out`, byte-identical for the same index (mtime 0)."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as gz:
        gz.write(encode(index))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(buffer.getvalue())
