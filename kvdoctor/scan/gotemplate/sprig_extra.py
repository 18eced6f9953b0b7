"""Sprig functions charts call around the workload rather than in it: dates (Helm prints the time of the render:
here a fixed one, so a scan's output is stable), paths, encodings and JSON variants. Helm leaves out Sprig's `env`
and `expandenv`, and so does this."""

from __future__ import annotations

import base64
import json
import posixpath
import re
import uuid
import zlib
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import yaml

from kvdoctor.scan.gotemplate.yaml_io import as_go, plain

RENDER_TIME = datetime(2026, 1, 1, 0, 0, 0, tzinfo=timezone.utc)
"""What `now` returns: Helm's output carries the time of the render; a fixed one keeps the scan repeatable."""
GO_LAYOUT: list[tuple[str, Callable[[datetime], str]]] = [
    ("2006", lambda t: f"{t.year:04d}"), ("January", lambda t: t.strftime("%B")), ("Jan", lambda t: t.strftime("%b")),
    ("Monday", lambda t: t.strftime("%A")), ("Mon", lambda t: t.strftime("%a")), ("MST", lambda t: t.tzname() or ""),
    ("Z07:00", lambda t: "Z" if t.utcoffset() == timedelta(0) else t.strftime("%z")[:3] + ":" + t.strftime("%z")[3:]),
    ("-0700", lambda t: t.strftime("%z")), ("01", lambda t: f"{t.month:02d}"), ("02", lambda t: f"{t.day:02d}"),
    ("_2", lambda t: f"{t.day:2d}"), ("15", lambda t: f"{t.hour:02d}"), ("03", lambda t: f"{(t.hour - 1) % 12 + 1:02d}"),
    ("04", lambda t: f"{t.minute:02d}"), ("05", lambda t: f"{t.second:02d}"), ("06", lambda t: f"{t.year % 100:02d}"),
    ("PM", lambda t: "PM" if t.hour >= 12 else "AM"), ("1", lambda t: str(t.month)), ("2", lambda t: str(t.day)),
    ("3", lambda t: str((t.hour - 1) % 12 + 1)), ("4", lambda t: str(t.minute)), ("5", lambda t: str(t.second)),
]  # fmt: skip
"""Go's reference-time layout words, longest first, and what each prints."""


def go_date(layout: str, when: Any) -> str:
    """Go's time.Format with its reference layout (Mon Jan 2 15:04:05 MST 2006)."""
    moment = when if isinstance(when, datetime) else RENDER_TIME
    words = dict(GO_LAYOUT)
    pattern = "|".join(re.escape(word) for word, _ in GO_LAYOUT)
    return re.sub(pattern, lambda m: words[m.group(0)](moment), str(layout))


def _wrap_with(width: Any, joint: str, text: Any) -> str:
    """Sprig's wrapWith (goutils.WrapCustom): lines broken at the last space before `width` characters; a word longer
    than the width stays whole."""
    limit = int(width) if str(width).lstrip("-").isdigit() else 1
    out = []
    for line in str(text).split("\n"):
        while len(line) > limit:
            cut = line.rfind(" ", 0, limit + 1)
            if cut <= 0:
                cut = line.find(" ", limit)
                if cut < 0:
                    break
            out.append(line[:cut])
            line = line[cut + 1:]
        out.append(line)
    return joint.join(out)


def _uuid() -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "kvdoctor"))  # random in Helm; fixed here, as RENDER_TIME


def _to_pretty_json(value: Any) -> str:
    return json.dumps(plain(value), sort_keys=True, indent=2, ensure_ascii=False)


def _from_json_array(text: str) -> list:
    loaded = json.loads(text)
    return as_go(loaded) if isinstance(loaded, list) else []


def _from_yaml_array(text: str) -> list:
    loaded = yaml.safe_load(text)
    return as_go(loaded) if isinstance(loaded, list) else []


SPRIG_EXTRA: dict[str, Callable[..., Any]] = {
    "now": lambda: RENDER_TIME,
    "date": go_date,
    "dateInZone": lambda layout, when, zone: go_date(layout, when),
    "unixEpoch": lambda when: str(int((when if isinstance(when, datetime) else RENDER_TIME).timestamp())),
    "uuidv4": _uuid,
    "base": posixpath.basename,
    "dir": posixpath.dirname,
    "ext": lambda p: posixpath.splitext(p)[1],
    "clean": lambda p: posixpath.normpath(p) if p else ".",
    "isAbs": posixpath.isabs,
    "b32enc": lambda s: base64.b32encode(str(s).encode()).decode(),
    "b32dec": lambda s: base64.b32decode(str(s)).decode("utf-8", "replace"),
    "adler32sum": lambda s: str(zlib.adler32(str(s).encode())),
    "toPrettyJson": _to_pretty_json,
    "mustToPrettyJson": _to_pretty_json,
    "toRawJson": lambda v: json.dumps(plain(v), sort_keys=True, separators=(",", ":"), ensure_ascii=False),
    "fromJsonArray": _from_json_array,
    "fromYamlArray": _from_yaml_array,
    "swapcase": lambda s: str(s).swapcase(),
    "initials": lambda s: "".join(w[0] for w in str(s).split()),
    "plural": lambda one, many, count: one if count == 1 else many,
    "wrap": lambda width, text: _wrap_with(width, "\n", text),
    "wrapWith": _wrap_with,
    "regexQuoteMeta": re.escape,
    "osBase": posixpath.basename,
    "osDir": posixpath.dirname,
    "osExt": lambda p: posixpath.splitext(p)[1],
    "osClean": lambda p: posixpath.normpath(p) if p else ".",
    "osIsAbs": posixpath.isabs,
    "seq": lambda *a: " ".join(str(n) for n in _seq(*(int(x) for x in a))),
}
SPRIG_ALIASES = {
    "push": "append", "mustPush": "append", "mustPrepend": "prepend", "mustRest": "rest", "mustInitial": "initial",
    "mustReverse": "reverse", "mustUniq": "uniq", "mustWithout": "without", "mustCompact": "compact",
    "mustSlice": "slice", "mustRegexFind": "regexFind", "mustRegexFindAll": "regexFindAll",
    "mustRegexReplaceAll": "regexReplaceAll", "mustRegexReplaceAllLiteral": "regexReplaceAllLiteral",
    "mustRegexSplit": "regexSplit", "mustFromJson": "fromJson", "mustFromYaml": "fromYaml",
    "mustToRawJson": "toRawJson", "trimall": "trimAll", "biggest": "max",
}
"""Sprig's other names for the same function (must* raise where the plain one returns empty: both fail a render
the same way here)."""


def _seq(*bounds: int) -> range:
    """Sprig's seq: `seq 3` is 1 2 3, `seq 2 4` is 2 3 4, `seq 0 2 6` steps by 2 (a negative count is downward)."""
    if len(bounds) == 1:
        return range(1, bounds[0] + 1) if bounds[0] >= 1 else range(1, bounds[0] - 1, -1)
    if len(bounds) == 2:
        return range(bounds[0], bounds[1] + 1) if bounds[1] >= bounds[0] else range(bounds[0], bounds[1] - 1, -1)
    start, step, end = bounds[:3]
    return range(start, end + (1 if step > 0 else -1), step) if step else range(0)
