"""vLLM's own facts per release, read from its released wheels by kvdoctor/builders/vllm_pack (the knowledge pack).

`load_release("0.25.1")` gives one release's facts (release.py): its `vllm serve` arguments, accepted dtypes,
defaults and pins; store.py reads the pack's files. Beside them: which releases a judgement covers
(candidates.py), what a release's parser makes of serve flags (serve_parser.py), its attention selection
(select.py, select_grid.py before 0.20.0), model runner (runner.py) and dtype resolution (dtypes.py), and a
release newer than the pack built on the fly (on_the_fly.py). This face re-exports the names callers use; only
json and the standard library are imported here (the CLI loads this on every run).
"""

from __future__ import annotations

from kvdoctor.vllm_pack.release import KINDS, ReleaseFacts, ServeArg, ServeOptions, load_release
from kvdoctor.vllm_pack.store import (
    PACK_FORMAT,
    load_attention,
    load_backend_grid,
    load_detail,
    load_runtime,
    load_selection,
    newest_release,
    pack_releases,
    releases_with,
)

__all__ = [
    "KINDS", "PACK_FORMAT", "ReleaseFacts", "ServeArg", "ServeOptions", "load_attention", "load_backend_grid",
    "load_detail", "load_release", "load_runtime", "load_selection", "newest_release", "pack_releases",
    "releases_with",
]
