"""Find a model's config.json: a directory, a file, or a Hugging Face id (local HF cache first).

Only config.json is ever fetched, into kvdoctor's own cache directory, and never when offline.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from kvdoctor.base.errors import ModelConfigError

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


@dataclass(frozen=True)
class ConfigLocation:
    path: Path
    """The config.json to read."""
    source: str
    """Human label: the path, 'hf-cache:ID' or 'hub:ID'."""
    model_id: str
    model_dir: Path | None
    """Directory holding the weights, when it is local (safetensors headers may be read)."""


def offline_requested(offline_flag: bool) -> bool:
    return offline_flag or os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def locate_config(model: str, *, revision: str | None, offline: bool, download_dir: Path | None) -> ConfigLocation:
    """Where this model's config.json is; raises ModelConfigError with what to do."""
    path = Path(model).expanduser()
    if path.is_dir():
        config = path / "config.json"
        if not config.is_file():
            raise ModelConfigError(f"no config.json in {path}", "point --model at a model directory or a config.json")
        return ConfigLocation(config, str(config), path.name, path)
    if path.is_file():
        name = path.parent.name if path.name == "config.json" else path.stem  # models/x/config.json, or x.json
        return ConfigLocation(path, str(path), name, path.parent)
    if model.startswith((".", "/", "~")) or os.sep + os.sep in model or not _REPO_ID.match(model):
        raise ModelConfigError(f"model path not found: {model}", "check the path, or pass a Hugging Face id like org/name")
    return _locate_on_hub(model, revision=revision, offline=offline, download_dir=download_dir)


def _locate_on_hub(repo_id: str, *, revision: str | None, offline: bool, download_dir: Path | None) -> ConfigLocation:
    import huggingface_hub
    from huggingface_hub import constants as hf_constants
    from huggingface_hub import errors as hf_errors

    # else each request's headers first GET {ENDPOINT}/api/agent-harnesses and cache it under HF_HOME
    hf_constants.HF_HUB_DISABLE_TELEMETRY = True

    for cache_dir in (None, download_dir):
        try:
            cached = huggingface_hub.try_to_load_from_cache(repo_id, "config.json", cache_dir=cache_dir,
                                                            revision=revision)
        except hf_errors.HFValidationError as exc:  # a name the hub refuses (letters outside ASCII, '--', ...)
            raise ModelConfigError(f"{repo_id!r} is not a Hugging Face model id ({str(exc).split(':')[0]})",
                                   "pass the model's id (org/name, ASCII letters, digits, - _ .) or a local path") from None
        if isinstance(cached, str):
            return ConfigLocation(Path(cached), f"hf-cache:{repo_id}", repo_id, Path(cached).parent)
    if offline:
        raise ModelConfigError(
            f"{repo_id}: config.json is not in the local Hugging Face cache and kvdoctor is offline",
            "run `hf download " + repo_id + " config.json` where there is network, or pass a local path",
        )
    token = os.environ.get("HF_TOKEN")
    try:
        # One HEAD without retries first: with no network, hf_hub_download alone retries for ~25 s and
        # logs a warning per retry before failing.
        url = huggingface_hub.hf_hub_url(repo_id, "config.json", revision=revision)
        huggingface_hub.get_hf_file_metadata(url, token=token, timeout=10)
        fetched = huggingface_hub.hf_hub_download(
            repo_id, "config.json", revision=revision, cache_dir=download_dir, token=token
        )
    except Exception as exc:  # hub errors, OSError, and httpx's transport errors (not OSError)
        raise _fetch_error(repo_id, revision, exc, hf_errors) from None
    return ConfigLocation(Path(fetched), f"hub:{repo_id}", repo_id, None)


def _fetch_error(repo_id: str, revision: str | None, exc: Exception, hf_errors) -> ModelConfigError:
    """One clear message per way a config.json fetch fails (LocalEntryNotFoundError, raised when the
    network is down, subclasses EntryNotFoundError, so it is tested first)."""
    if isinstance(exc, hf_errors.GatedRepoError):
        return ModelConfigError(f"{repo_id} is gated", "accept its licence on huggingface.co and set HF_TOKEN")
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        return ModelConfigError(f"{repo_id}: no such model on the Hugging Face hub", "check the id or set HF_TOKEN for a private model")
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return ModelConfigError(f"{repo_id}: revision {revision!r} not found")
    if isinstance(exc, hf_errors.EntryNotFoundError) and not isinstance(exc, hf_errors.LocalEntryNotFoundError):
        return ModelConfigError(f"{repo_id} has no config.json")
    return ModelConfigError(
        f"{repo_id}: could not fetch config.json ({type(exc).__name__})",
        "no network? pass --offline with a cached model, or a local path",
    )
