"""Where kvdoctor may write: its own cache directory, and nowhere else but files the user names."""

from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path | None:
    """$KVDOCTOR_CACHE_DIR, else $XDG_CACHE_HOME/kvdoctor, else ~/.cache/kvdoctor; None without a HOME."""
    if os.environ.get("KVDOCTOR_CACHE_DIR"):
        return Path(os.environ["KVDOCTOR_CACHE_DIR"]).expanduser()
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "kvdoctor"
    home = os.environ.get("HOME")
    if not home:
        return None
    return Path(home) / ".cache" / "kvdoctor"
