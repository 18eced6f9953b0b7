"""Facts for a vLLM release newer than the pack, built on the fly from its wheel or tree and cached.

The same builder as the shipped pack (kvdoctor/builders/vllm_pack, shipped with kvdoctor, run in a subprocess)
runs with a builder Python ($KVDOCTOR_PACK_PYTHON, or this Python when vLLM and torch are installed here) and
writes `<kvdoctor cache>/vllm_pack/<version>/`. Without a builder, a source or a cache entry, nothing is built
and kvdoctor says where its facts stop; a newer release is never guessed from an older one.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from kvdoctor.base.versions import pack_order
from kvdoctor.vllm_pack.release import load_release
from kvdoctor.vllm_pack.store import built_pack_dir, cache_root, locate_release, newest_release, pack_releases


def builder_python() -> str | None:
    """$KVDOCTOR_PACK_PYTHON, else this Python when the vLLM installed here can be asked (vLLM and torch)."""
    if os.environ.get("KVDOCTOR_PACK_PYTHON"):
        return os.environ["KVDOCTOR_PACK_PYTHON"]
    if importlib.util.find_spec("vllm") and importlib.util.find_spec("torch"):
        return sys.executable
    return None


BUILDER = "kvdoctor.builders.vllm_pack"  # run with -m in the builder's Python; never imported here


def builder_package() -> Path | None:
    """This kvdoctor's pack builder (kvdoctor/builders/vllm_pack), or None when the install lacks it."""
    package = Path(__file__).resolve().parents[1] / "builders" / "vllm_pack"
    return package if (package / "__main__.py").is_file() else None


def _builder_env(folder: Path) -> dict[str, str]:
    """The environment that makes this kvdoctor, and none of this Python's other packages, importable in the
    builder's Python: a folder holding only a link to it, first on PYTHONPATH."""
    folder.mkdir()
    (folder / "kvdoctor").symlink_to(Path(__file__).resolve().parents[1], target_is_directory=True)
    paths = [str(folder)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def why_not_buildable(version: str, source: str | Path | None) -> str | None:
    """None when `version` can be built here from `source`, else one line on what is missing."""
    if version in pack_releases():
        return f"vLLM {version} is in the pack"
    newest = newest_release()
    if newest is None or pack_order(version) <= pack_order(newest):
        return f"vLLM {version} is not newer than the pack ({newest})"
    if source is None or not Path(source).exists():
        return f"no wheel or tree of vLLM {version} at hand"
    if builder_python() is None:
        return "no builder Python (set KVDOCTOR_PACK_PYTHON to a Python with CPU torch and vLLM's dependencies)"
    if builder_package() is None:
        return "the pack builder (kvdoctor/builders/vllm_pack) is missing from this install of kvdoctor"
    if cache_root() is None:
        return "no kvdoctor cache directory to keep the facts in"
    return None


def ensure_release(version: str | None, source: str | Path | None, timeout: float = 900) -> str | None:
    """Build and cache the facts of `version` (newer than the pack) from `source` (a wheel or a tree), unless
    they are cached already. Returns None when the facts are there afterwards, else why not (one line)."""
    if not version or built_pack_dir(version) is not None:
        return None
    why = why_not_buildable(version, source)
    if why:
        return why
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    print(f"kvdoctor: vLLM {version} is newer than kvdoctor's facts; reading them from {source} "
          "(once, a minute or two; cached)", file=sys.stderr)
    with tempfile.TemporaryDirectory(dir=root, prefix=f".{version}-") as tmp:
        out = Path(tmp).resolve() / "pack"
        command = [builder_python(), "-m", BUILDER, "--python", builder_python(), "--source",
                   str(Path(source).resolve()), "--versions", version, "--out", str(out), "--tasks", "serve_args",
                   "dtypes", "module:backends", "module:runtime"]
        try:  # run from the temporary folder: a `kvdoctor` folder where the user stands must not shadow this one
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                  env=_builder_env(out.parent / "importable"), cwd=out.parent)
        except subprocess.TimeoutExpired:
            return f"building vLLM {version}'s facts took longer than {timeout:.0f} s"
        if proc.returncode != 0 or not (out / "index.json").is_file():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return f"building vLLM {version}'s facts failed: {last[:200]}"
        shutil.move(str(out), str(root / version))
    locate_release.cache_clear()  # both remembered "not in any pack"
    load_release.cache_clear()
    return None


def ensure_for_versions(versions) -> str | None:
    """ensure_release for the judged vLLM (VersionFacts) when it is newer than the pack: from --vllm-source,
    the installed vLLM, or a wheel/tree kvdoctor already has for --vllm-version. Cheap when it is not newer."""
    version, newest = versions.vllm, newest_release()
    if not version or newest is None or pack_order(version) <= pack_order(newest):
        return None
    source = versions.vllm_kernels
    if source == "installed":
        spec = importlib.util.find_spec("vllm")
        source = str(Path(spec.origin).parent.parent) if spec and spec.origin else None
    return ensure_release(version, source)
