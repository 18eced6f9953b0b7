"""The `.env` file Compose reads beside a compose file: the project's default values for `${VAR}` interpolation.

Compose reads `.env` from the project directory (the compose file's, unless --project-directory or --env-file say
otherwise) and interpolates `${VAR}` from it; the shell's environment, unknown to a scan, overrides it. Lines are
`KEY=VALUE` (`export ` allowed), `#` starts a comment, a quoted value keeps its `#`, an unquoted one ends at ` #`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

DOTENV = ".env"
MAX_BYTES = 1 << 20
_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*)$")


def project_env(compose_file: str) -> dict[str, str]:
    """KEY -> value of the `.env` beside the compose file; empty when there is none (or it cannot be read)."""
    env_file = Path(compose_file).resolve().parent / DOTENV
    try:
        stat = env_file.stat()
    except OSError:
        return {}
    if not env_file.is_file() or stat.st_size > MAX_BYTES:
        return {}
    return dict(_read(str(env_file), stat.st_mtime_ns))


@lru_cache(maxsize=64)
def _read(path: str, _mtime_ns: int) -> tuple[tuple[str, str], ...]:
    """The file's entries; the modification time is part of the key, so a rewritten file is read again."""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ()
    return tuple(parsed for line in text.splitlines() if (parsed := _entry(line)) is not None)


def _entry(line: str) -> tuple[str, str] | None:
    match = _LINE.match(line)
    if match is None or line.lstrip().startswith("#"):
        return None
    name, raw = match.group(1), match.group(2).strip()
    if raw[:1] in ("'", '"'):
        end = raw.find(raw[0], 1)
        return (name, raw[1:end]) if end > 0 else (name, raw[1:])
    return name, re.split(r"\s+#", raw, maxsplit=1)[0].strip()
