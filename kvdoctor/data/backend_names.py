"""Human attention-backend names -> vLLM's AttentionBackendEnum names, from the one table
kvdoctor/data/backend_names.yaml."""

from __future__ import annotations

from kvdoctor.base.yaml_safe import load_yaml_cached
from kvdoctor.data import read_data

_TABLE = load_yaml_cached(read_data("backend_names.yaml"), "backend_names.yaml")["backends"]

BACKEND_ENUM_NAMES: dict[str, str] = {entry["spelling"]: entry["enum"] for entry in _TABLE}
"""Spelling in a log line ('Flash Attention') -> the AttentionBackendEnum member ('FLASH_ATTN')."""
USING_LINE_SPELLINGS: tuple[str, ...] = tuple(entry["spelling"] for entry in _TABLE if entry["using_line"])
"""The spellings vLLM prints in its "Using <name> backend." start-up line, in the table's order."""


def backend_enum_name(spelling: str) -> str:
    """The AttentionBackendEnum name a log's spelling means; an unknown spelling (already 'FLASH_ATTN') as given."""
    return BACKEND_ENUM_NAMES.get(spelling, spelling)
