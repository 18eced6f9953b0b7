"""The functions Helm charts call: Go's template builtins, the Sprig functions charts use and Helm's own (include,
tpl, required, toYaml, fromYaml, lookup), each as Sprig defines it (its nil and type rules, Go's printing)."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import string
from typing import Any, Callable

from kvdoctor.scan.gotemplate.gofmt import sprint, sprintf
from kvdoctor.scan.gotemplate.semver import semver, semver_compare
from kvdoctor.scan.gotemplate.sprig_extra import SPRIG_ALIASES, SPRIG_EXTRA
from kvdoctor.scan.gotemplate.values import compare, equal, go_format, kind, truth, type_name
from kvdoctor.scan.gotemplate.yaml_io import from_json, from_yaml, to_json, to_yaml


class FunctionFailed(Exception):
    """`fail` or `required` in a chart: the render stops with the chart's own message."""


def empty(value: Any) -> bool:
    """Sprig's empty: nil, false, 0, "" and empty collections; structs never."""
    return not truth(value)


def to_string(value: Any) -> str:
    """Sprig's strval: a string as it is, anything else as fmt's %v (nil: <nil>)."""
    return value if isinstance(value, str) else go_format(value, nested=True)


def to_int(value: Any) -> int:
    """cast.ToInt as Sprig's int/int64 use it: floats truncate, strings parse (base prefixes allowed), nil is 0,
    anything unparsable is 0."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value == value and abs(value) != float("inf") else 0
    if isinstance(value, str):
        text = value.strip()
        text = re.sub(r"\.0*$", "", text) if re.fullmatch(r"[-+]?\d+\.0*", text) else text
        try:
            return int(text, 0) if not re.fullmatch(r"[-+]?0\d+", text) else int(text, 8)
        except ValueError:
            return 0
    return 0


def to_float(value: Any) -> float:
    if isinstance(value, (bool, int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return 0.0
    return 0.0


def _list(value: Any) -> list:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    raise TypeError(f"cannot find first on type {type_name(value)}")


def _default(default_value: Any, *given: Any) -> Any:
    return default_value if not given or empty(given[0]) else given[0]


def _quote(*values: Any) -> str:
    return " ".join(json.dumps(to_string(v), ensure_ascii=False) for v in values if v is not None)


def _squote(*values: Any) -> str:
    return " ".join(f"'{to_string(v)}'" for v in values if v is not None)


def _indent(spaces: Any, text: Any) -> str:
    pad = " " * to_int(spaces)
    return pad + to_string(text).replace("\n", "\n" + pad)


def _trunc(count: Any, text: Any) -> str:
    count, text = to_int(count), to_string(text)
    if count < 0:
        return text[count:] if -count < len(text) else text
    return text[:count]


def _dict(*pairs: Any) -> dict:
    out: dict = {}
    for at in range(0, len(pairs), 2):
        out[to_string(pairs[at])] = pairs[at + 1] if at + 1 < len(pairs) else ""
    return out


def _get(mapping: dict, key: str) -> Any:
    return mapping.get(key, "") if isinstance(mapping, dict) else ""


def _set(mapping: dict, key: str, value: Any) -> dict:
    mapping[key] = value
    return mapping


def _unset(mapping: dict, key: str) -> dict:
    mapping.pop(key, None)
    return mapping


def _merge(dst: dict, *sources: dict, overwrite: bool = False) -> dict:
    """mergo.Merge (dst wins) or, with overwrite, mergo's WithOverride (sources win); maps merge deeply."""
    for source in sources:
        for key, value in (source or {}).items():
            if isinstance(dst.get(key), dict) and isinstance(value, dict):
                _merge(dst[key], value, overwrite=overwrite)
            elif key not in dst or (overwrite and value is not None) or (not overwrite and empty(dst[key])
                                                                        and not isinstance(dst[key], dict)):
                dst[key] = value
    return dst


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _join(separator: str, items: Any) -> str:
    if isinstance(items, str):
        return items
    return separator.join(to_string(v) for v in _list(items) if v is not None)


def _split(separator: str, text: str) -> dict:
    return {f"_{i}": part for i, part in enumerate(to_string(text).split(separator))}


def _splitn(separator: str, count: Any, text: str) -> dict:
    return {f"_{i}": part for i, part in enumerate(to_string(text).split(separator, max(to_int(count) - 1, 0)))}


def _index(item: Any, *keys: Any) -> Any:
    for key in keys:
        if isinstance(item, dict):
            item = item.get(key)
        elif isinstance(item, (list, tuple, str)):
            if not isinstance(key, int) or not 0 <= key < len(item):
                raise IndexError(f"index out of range: {key}")
            item = item[key]
        elif item is None:
            raise TypeError("index of untyped nil")
        else:
            raise TypeError(f"can't index item of type {type_name(item)}")
    return item


def _slice(item: Any, *bounds: int) -> Any:
    if not isinstance(item, (list, tuple, str)):
        raise TypeError(f"can't slice item of type {type_name(item)}")
    return item[bounds[0] if bounds else 0 : bounds[1] if len(bounds) > 1 else len(item)]


def _length(item: Any) -> int:
    if isinstance(item, (str, list, tuple, dict)):
        return len(item)
    raise TypeError(f"len of type {type_name(item)}")


def _eq(first: Any, *others: Any) -> bool:
    if not others:
        raise TypeError("missing argument for comparison")
    return any(equal(first, other) for other in others)


def _title(text: str) -> str:
    return re.sub(r"(^|[^\w'])(\w)", lambda m: m.group(1) + m.group(2).upper(), to_string(text))


def _go_regex_replacement(replacement: str) -> str:
    """Go's $1 / ${name} in a replacement as Python's \\g<1>."""
    escaped = replacement.replace("\\", "\\\\")
    return re.sub(r"\$(\{(\w+)\}|(\d+))", lambda m: f"\\g<{m.group(2) or m.group(3)}>", escaped)


MAX_GENERATED = 1_000_000  # until/repeat/range beyond this: a chart that would exhaust memory, refused


def _bounded(count: int) -> int:
    if abs(count) > MAX_GENERATED:
        raise ValueError(f"{count} is more than kvdoctor generates ({MAX_GENERATED})")
    return count


def _until(count: Any) -> list[int]:
    count = _bounded(to_int(count))
    return list(range(count)) if count >= 0 else list(range(0, count, -1))


def _until_step(start: Any, stop: Any, step: Any) -> list[int]:
    step = to_int(step)
    if step and abs((to_int(stop) - to_int(start)) // step) > MAX_GENERATED:
        raise ValueError(f"more than {MAX_GENERATED} numbers")
    return list(range(to_int(start), to_int(stop), step)) if step else []


def _div(a: Any, b: Any) -> int:
    a, b = to_int(a), to_int(b)
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


def _mod(a: Any, b: Any) -> int:
    a, b = to_int(a), to_int(b)
    return a - _div(a, b) * b


def _first(items: Any) -> Any:
    items = _list(items)
    return items[0] if items else None


def _last(items: Any) -> Any:
    items = _list(items)
    return items[-1] if items else None


def _has_key(mapping: Any, key: str) -> bool:
    return isinstance(mapping, dict) and key in mapping


def _pluck(key: str, *maps: dict) -> list:
    return [m[key] for m in maps if isinstance(m, dict) and key in m]


def _dig(*args: Any) -> Any:
    *keys, default, mapping = args
    for key in keys:
        if not isinstance(mapping, dict) or key not in mapping:
            return default
        mapping = mapping[key]
    return mapping


def _case_words(text: str) -> list[str]:
    return re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", to_string(text))


def _rand(alphabet: str) -> Callable[[Any], str]:
    generator = random.Random(0)  # Helm's output is random; a fixed seed keeps a scan's output stable
    return lambda count: "".join(generator.choice(alphabet) for _ in range(to_int(count)))


def _html(*args: Any) -> str:
    text = sprint(args)
    for raw, escaped in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&#34;"), ("'", "&#39;")):
        text = text.replace(raw, escaped)
    return text


def _urlquery(*args: Any) -> str:
    from urllib.parse import quote_plus

    return quote_plus(sprint(args))


def _substr(start: Any, end: Any, text: Any) -> str:
    """Sprig's substr: a negative start is 0, a negative or too large end is the end."""
    text, start, end = to_string(text), to_int(start), to_int(end)
    return text[max(start, 0) : end if 0 <= end <= len(text) else len(text)]


def _abbrev(width: Any, text: Any) -> str:
    text, width = to_string(text), to_int(width)
    return text if len(text) <= width else text[: max(width - 3, 0)] + "..."


def _repeat(count: Any, text: Any) -> str:
    text = to_string(text)
    _bounded(to_int(count) * max(len(text), 1))
    return text * max(to_int(count), 0)


def _regex_find_all(pattern: str, text: Any, count: Any) -> list[str]:
    found = [m.group(0) for m in re.finditer(pattern, to_string(text))]
    return found if to_int(count) < 0 else found[: to_int(count)]


def _uniq(items: Any) -> list:
    kept: list = []
    for item in _list(items):
        if item not in kept:
            kept.append(item)
    return kept


GO_BUILTINS: dict[str, Callable[..., Any]] = {
    "not": lambda v: not truth(v),
    "len": _length,
    "index": _index,
    "slice": _slice,
    "print": lambda *a: sprint(a),
    "println": lambda *a: " ".join(go_format(v, True) for v in a) + "\n",
    "printf": lambda fmt, *a: sprintf(to_string(fmt), a),
    "eq": _eq,
    "ne": lambda a, b: not equal(a, b),
    "lt": lambda a, b: compare(a, b) < 0,
    "le": lambda a, b: compare(a, b) <= 0,
    "gt": lambda a, b: compare(a, b) > 0,
    "ge": lambda a, b: compare(a, b) >= 0,
    "html": _html,
    "js": lambda *a: json.dumps(sprint(a))[1:-1],
    "urlquery": _urlquery,
    "call": lambda f, *a: f(*a),
}
"""Go's text/template builtins (`and` and `or` short-circuit, so the executor evaluates them itself)."""

HELM_DATA: dict[str, Callable[..., Any]] = {
    "toYaml": to_yaml,
    "mustToYaml": to_yaml,
    "fromYaml": from_yaml,
    "toJson": to_json,
    "mustToJson": to_json,
    "fromJson": from_json,
    "lookup": lambda *a: {},  # no cluster: what `helm template` gets too
}

SPRIG_FLOW: dict[str, Callable[..., Any]] = {
    "default": _default,
    "empty": empty,
    "coalesce": lambda *a: next((v for v in a if not empty(v)), None),
    "ternary": lambda t, f, cond: t if truth(cond) else f,
    "deepCopy": _deep_copy,
    "mustDeepCopy": _deep_copy,
    "kindOf": kind,
    "kindIs": lambda k, v: kind(v) == k,
    "typeOf": type_name,
    "typeIs": lambda t, v: type_name(v) == t,
}

SPRIG_STRINGS: dict[str, Callable[..., Any]] = {
    "quote": _quote,
    "squote": _squote,
    "toString": to_string,
    "trim": lambda s: to_string(s).strip(),
    "trimAll": lambda cut, s: to_string(s).strip(to_string(cut)),
    "trimPrefix": lambda p, s: to_string(s).removeprefix(to_string(p)),
    "trimSuffix": lambda x, s: to_string(s).removesuffix(to_string(x)),
    "trunc": _trunc,
    "indent": _indent,
    "nindent": lambda n, s: "\n" + _indent(n, s),
    "lower": lambda s: to_string(s).lower(),
    "upper": lambda s: to_string(s).upper(),
    "title": _title,
    "untitle": lambda s: to_string(s)[:1].lower() + to_string(s)[1:],
    "replace": lambda old, new, s: to_string(s).replace(to_string(old), to_string(new)),
    "contains": lambda sub, s: to_string(sub) in to_string(s),
    "hasPrefix": lambda p, s: to_string(s).startswith(to_string(p)),
    "hasSuffix": lambda x, s: to_string(s).endswith(to_string(x)),
    "repeat": _repeat,
    "substr": _substr,
    "nospace": lambda s: re.sub(r"\s", "", to_string(s)),
    "cat": lambda *a: " ".join(to_string(v) for v in a if v is not None),
    "abbrev": _abbrev,
    "camelcase": lambda s: "".join(w.capitalize() for w in _case_words(s)),
    "snakecase": lambda s: "_".join(w.lower() for w in _case_words(s)),
    "kebabcase": lambda s: "-".join(w.lower() for w in _case_words(s)),
    "split": _split,
    "splitn": _splitn,
    "splitList": lambda sep, s: to_string(s).split(to_string(sep)),
    "join": _join,
    "toStrings": lambda v: [to_string(x) for x in _list(v)],
    "sortAlpha": lambda v: sorted(to_string(x) for x in _list(v)),
    "regexMatch": lambda rx, s: re.search(rx, to_string(s)) is not None,
    "mustRegexMatch": lambda rx, s: re.search(rx, to_string(s)) is not None,
    "regexFind": lambda rx, s: (m.group(0) if (m := re.search(rx, to_string(s))) else ""),
    "regexFindAll": _regex_find_all,
    "regexReplaceAll": lambda rx, s, r: re.sub(rx, _go_regex_replacement(to_string(r)), to_string(s)),
    "regexReplaceAllLiteral": lambda rx, s, r: re.sub(rx, lambda _: to_string(r), to_string(s)),
    "regexSplit": lambda rx, s, n: re.split(rx, to_string(s), maxsplit=max(to_int(n) - 1, 0)),
    "b64enc": lambda s: base64.b64encode(to_string(s).encode()).decode(),
    "b64dec": lambda s: base64.b64decode(to_string(s)).decode("utf-8", "replace"),
    "sha256sum": lambda s: hashlib.sha256(to_string(s).encode()).hexdigest(),
    "sha1sum": lambda s: hashlib.sha1(to_string(s).encode()).hexdigest(),
    "randAlphaNum": _rand(string.ascii_letters + string.digits),
    "randAlpha": _rand(string.ascii_letters),
    "randNumeric": _rand(string.digits),
    "randAscii": _rand(string.printable[:94]),
}

SPRIG_NUMBERS: dict[str, Callable[..., Any]] = {
    "int": to_int,
    "int64": to_int,
    "atoi": to_int,
    "float64": to_float,
    "add": lambda *a: sum(to_int(v) for v in a),
    "add1": lambda v: to_int(v) + 1,
    "sub": lambda a, b: to_int(a) - to_int(b),
    "mul": lambda *a: _product(a),
    "div": _div,
    "mod": _mod,
    "max": lambda *a: max(to_int(v) for v in a),
    "min": lambda *a: min(to_int(v) for v in a),
    "maxf": lambda *a: max(to_float(v) for v in a),
    "minf": lambda *a: min(to_float(v) for v in a),
    "add1f": lambda v: to_float(v) + 1,
    "addf": lambda *a: sum(to_float(v) for v in a),
    "subf": lambda a, *b: to_float(a) - sum(map(to_float, b)),
    "mulf": lambda *a: _product(a, to_float),
    "divf": lambda a, *b: _quotient(to_float(a), b),
    "ceil": lambda v: float(-(-to_float(v) // 1)),
    "floor": lambda v: float(to_float(v) // 1),
    "round": lambda v, p=0: round(to_float(v), to_int(p)),
    "until": _until,
    "untilStep": _until_step,
    "semverCompare": semver_compare,
    "semver": semver,
}

SPRIG_COLLECTIONS: dict[str, Callable[..., Any]] = {
    "list": lambda *a: list(a),
    "tuple": lambda *a: list(a),
    "dict": _dict,
    "get": _get,
    "set": _set,
    "unset": _unset,
    "hasKey": _has_key,
    "keys": lambda *maps: [k for m in maps for k in m],
    "values": lambda m: list(m.values()),
    "pluck": _pluck,
    "dig": _dig,
    "merge": _merge,
    "mustMerge": _merge,
    "mergeOverwrite": lambda d, *s: _merge(d, *s, overwrite=True),
    "mustMergeOverwrite": lambda d, *s: _merge(d, *s, overwrite=True),
    "pick": lambda d, *k: {x: d[x] for x in k if x in d},
    "omit": lambda d, *k: {x: v for x, v in d.items() if x not in k},
    "first": _first,
    "mustFirst": _first,
    "last": _last,
    "mustLast": _last,
    "rest": lambda v: _list(v)[1:],
    "initial": lambda v: _list(v)[:-1],
    "reverse": lambda v: _list(v)[::-1],
    "append": lambda v, x: _list(v) + [x],
    "mustAppend": lambda v, x: _list(v) + [x],
    "prepend": lambda v, x: [x] + _list(v),
    "concat": lambda *a: [x for v in a for x in _list(v)],
    "uniq": _uniq,
    "compact": lambda v: [x for x in _list(v) if not empty(x)],
    "without": lambda v, *x: [y for y in _list(v) if y not in x],
    "has": lambda x, v: x in _list(v),
    "mustHas": lambda x, v: x in _list(v),
}


def builtin_functions(renderer) -> dict[str, Callable[..., Any]]:
    """Function name -> implementation; `renderer` serves Helm's include and tpl."""

    def include(name: str, data: Any = None) -> str:
        return renderer.render(name, data).text()

    def tpl(text: str, dot: Any) -> str:
        return renderer.render_text(to_string(text), dot, "tpl")

    def required(message: str, value: Any = None) -> Any:
        if value is None or (isinstance(value, str) and value == ""):
            raise FunctionFailed(message)
        return value

    def fail(message: str) -> Any:
        raise FunctionFailed(message)

    helm = {"include": include, "tpl": tpl, "required": required, "fail": fail}
    functions = {**GO_BUILTINS, **HELM_DATA, **helm, **SPRIG_FLOW, **SPRIG_STRINGS, **SPRIG_NUMBERS,
                 **SPRIG_COLLECTIONS, **SPRIG_EXTRA}
    return functions | {alias: functions[name] for alias, name in SPRIG_ALIASES.items() if name in functions}


def _product(values, convert=to_int):
    out = convert(1)
    for v in values:
        out *= convert(v)
    return out


def _quotient(a: float, divisors) -> float:
    for d in divisors:
        a /= to_float(d)
    return a


