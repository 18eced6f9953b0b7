"""Go's fmt.Sprint and fmt.Sprintf as templates call them (print, printf): Go's verbs, its %!verb(type=value)
for a value of the wrong type, and its spacing rule for Sprint."""

from __future__ import annotations

import json
import re
from typing import Any

from kvdoctor.scan.gotemplate.values import go_float, go_format, type_name

VERB = re.compile(r"%([-+# 0]*)(\d+|\*)?(?:\.(\d+|\*))?([a-zA-Z%])")


def sprint(args: tuple) -> str:
    """fmt.Sprint: operands printed with %v, a space between two operands when neither is a string."""
    out = ""
    for at, value in enumerate(args):
        if at and not isinstance(value, str) and not isinstance(args[at - 1], str):
            out += " "
        out += go_format(value, nested=True)
    return out


def sprintf(template: str, args: tuple) -> str:
    """fmt.Sprintf with the verbs charts use (%s %d %v %q %f %g %e %x %X %o %b %t %c %T %%)."""
    out: list[str] = []
    used = 0
    at = 0
    for match in VERB.finditer(template):
        out.append(template[at : match.start()])
        at = match.end()
        flags, width, precision, verb = match.groups()
        if verb == "%":
            out.append("%")
            continue
        if used >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        value = args[used]
        used += 1
        text = _one(verb, value, int(precision) if precision and precision != "*" else None)
        if width and width != "*":
            text = text.ljust(int(width)) if "-" in flags else text.rjust(int(width), "0" if "0" in flags
                                                                             and verb in "dfeg" else " ")  # fmt: skip
        out.append(text)
    out.append(template[at:])
    if used < len(args):
        extra = ", ".join(f"{type_name(v)}={go_format(v, True)}" for v in args[used:])
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)


def _one(verb: str, value: Any, precision: int | None) -> str:
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if verb == "v":
        return go_format(value, nested=True)
    if verb == "T":
        return type_name(value)
    if verb == "s" and isinstance(value, (str, list, tuple, dict)):
        return go_format(value, nested=True) if precision is None else go_format(value, True)[:precision]
    if verb == "q" and isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if verb == "t" and isinstance(value, bool):
        return "true" if value else "false"
    if verb in "dxXob" and is_int:
        return {"d": str(value), "x": format(value, "x"), "X": format(value, "X"), "o": format(value, "o"),
                "b": format(value, "b")}[verb]  # fmt: skip
    if verb == "c" and is_int:
        return chr(value)
    if verb in "feEgG" and isinstance(value, float):
        if verb == "g" and precision is None:
            return go_float(value)
        return format(value, f".{6 if precision is None else precision}{verb}")
    if verb in "xX" and isinstance(value, str):
        return value.encode().hex() if verb == "x" else value.encode().hex().upper()
    shown = "<nil>" if value is None else f"{type_name(value)}={go_format(value, True)}"
    return f"%!{verb}({shown})"
