"""Go's view of plain data: truthiness, printing (fmt's %v as text/template prints it), kind names, comparison."""

from __future__ import annotations

import decimal
from typing import Any, Callable

NO_VALUE = "<no value>"


class GoObject:
    """A struct-like value with Go-capitalised fields and methods (.Release, .Chart, .Files, .Capabilities)."""

    def __init__(self, type_name: str, fields: dict[str, Any], methods: dict[str, Callable[..., Any]] | None = None):
        self.type_name = type_name
        self.fields = fields
        self.methods = methods or {}

    def __repr__(self) -> str:
        return f"GoObject({self.type_name})"


def truth(value: Any) -> bool:
    """Go's template truth: false, 0, nil, and empty strings, lists and maps are false; structs are true."""
    if value is None:
        return False
    if isinstance(value, GoObject):
        return True
    if isinstance(value, (bool, int, float)):
        return bool(value)
    if isinstance(value, (str, list, tuple, dict)):
        return len(value) > 0
    return True


def kind(value: Any) -> str:
    """reflect.Kind names as Sprig's kindOf / Go's errors say them."""
    if value is None:
        return "invalid"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "slice"
    if isinstance(value, dict):
        return "map"
    return "struct"


def type_name(value: Any) -> str:
    """Go type names as errors and typeOf say them (values read from YAML are interface{} maps and slices)."""
    if isinstance(value, GoObject):
        return value.type_name
    named = kind(value)
    return {"invalid": "<nil>", "slice": "[]interface {}", "map": "map[string]interface {}"}.get(named, named)


def go_text(value: Any) -> str:
    """What {{ value }} prints: nil is <no value>; everything else as fmt's %v."""
    return NO_VALUE if value is None else go_format(value)


def go_format(value: Any, nested: bool = False) -> str:
    """fmt.Sprint (%v): nested nil is <nil>, slices [a b], maps map[k:v] with sorted keys, floats %g-shortest."""
    if value is None:
        return "<nil>" if nested else NO_VALUE
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(go_format(v, True) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_format(value[k], True)}" for k in sorted(value, key=str)) + "]"
    if isinstance(value, GoObject):
        return "{" + " ".join(go_format(v, True) for v in value.fields.values()) + "}"
    return str(value)


def go_float(number: float) -> str:
    """fmt's %v of a float64 (strconv 'g', shortest): the exponent form when the exponent is < -4 or >= 6, so a
    values file's 1000000 prints 1e+06 in Helm (its numbers are float64)."""
    if number != number:
        return "NaN"
    if number in (float("inf"), float("-inf")):
        return "+Inf" if number > 0 else "-Inf"
    if number == 0:
        return "-0" if str(number).startswith("-") else "0"
    sign, digits, exponent = decimal.Decimal(repr(number)).normalize().as_tuple()
    text = "".join(map(str, digits))
    point = len(text) + exponent  # digits before the decimal point
    sci = point - 1
    minus = "-" if sign else ""
    if sci < -4 or sci >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{minus}{mantissa}e{'+' if sci >= 0 else '-'}{abs(sci):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{text}"
    if point >= len(text):
        return minus + text + "0" * (point - len(text))
    return f"{minus}{text[:point]}.{text[point:]}"


def compare(a: Any, b: Any) -> int:
    """Go's lt/le/gt/ge on basic kinds: ints with ints, floats with floats, strings with strings."""
    ka, kb = _basic(a), _basic(b)
    if ka != kb:
        raise TypeError("incompatible types for comparison")
    if ka not in ("int", "float", "string"):
        raise TypeError("invalid type for comparison")
    return (a > b) - (a < b)


def equal(a: Any, b: Any) -> bool:
    """Go's eq: basic kinds compare by value (int with int, float with float), other comparable values by ==;
    nil equals only nil."""
    if a is None or b is None:
        return a is None and b is None
    ka, kb = _basic(a), _basic(b)
    if ka in ("int", "float", "string", "bool") or kb in ("int", "float", "string", "bool"):
        if ka != kb:
            raise TypeError("incompatible types for comparison")
        return a == b
    raise TypeError(f"non-comparable types {type_name(a)}: {type_name(b)}")


def _basic(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    return kind(value)
