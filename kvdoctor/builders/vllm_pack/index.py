"""The pack's summary index (`index.json`): every release's small facts in one file, so a check with the vLLM
version unknown reads one file instead of decoding every release.

Derived only from the per-release files the builder wrote (deterministic: sorted keys, releases in version
order, each distinct serve option and run-time table stored once). The per-release files stay the source: the
loader reads `X.json` for serve-option provenance and `X.detail.json` for attention selection, lazily.
"""
from __future__ import annotations

import json
from pathlib import Path

from kvdoctor.base.versions import pack_order
from kvdoctor.vllm_pack import KINDS  # the pack's reader: json and the standard library only
from kvdoctor.vllm_pack.store import apply_variant

INDEX_FORMAT = 1


def _capability_key(text: str) -> tuple[int, ...]:
    """'8.9' -> (8, 9): compute capabilities in numeric order (10.0 after 9.0)."""
    return tuple(int(p) for p in text.split("."))


def _release_name(name: str) -> str | None:
    name = name[:-3] if name.endswith(".gz") else name
    if not name.endswith(".json") or name.endswith(".detail.json") or name == "index.json" or \
            name.startswith("selection-"):
        return None
    return name[: -len(".json")]


def read_json(pack_dir: Path, name: str) -> dict | None:
    """A pack file, plain or gzipped (`name.gz`)."""
    import gzip

    if (pack_dir / name).exists():
        return json.loads((pack_dir / name).read_text("utf-8"))
    if (pack_dir / f"{name}.gz").exists():
        return json.loads(gzip.decompress((pack_dir / f"{name}.gz").read_bytes()))
    return None


def kinds_of(core: dict, detail: dict) -> list[str]:
    """Which kinds of facts one release's files hold."""
    kinds = [k for k in ("serve_args", "kv_cache_dtypes", "model_dtypes", "pins") if core.get(k)]
    runtime = detail.get("runtime") or {}
    if (runtime.get("dtype") or {}).get("tables"):
        kinds.append("dtype_resolution")
    if runtime.get("model_runner"):
        kinds.append("model_runner")
    if detail.get("backends"):
        kinds.append("backend_replay")
    if detail.get("backend_grid"):
        kinds.append("backend_grid")
    return kinds


def build_index(pack_dir: Path) -> dict:
    """The index of every release file in `pack_dir`."""
    versions = sorted({_release_name(p.name) for p in pack_dir.iterdir() if _release_name(p.name)}, key=pack_order)
    sigs: list[str] = []
    sig_ids: dict[str, int] = {}
    pools: dict[str, list[str]] = {"dtype": [], "model_runner": []}
    releases = []
    for version in versions:
        core = read_json(pack_dir, f"{version}.json")
        detail = read_json(pack_dir, f"{version}.detail.json") or {}
        entry = {k: v for k, v in core.items() if k not in ("serve_args", "modelled", "build_errors")}
        serve = core.get("serve_args")
        if serve:
            ids = []
            for action in serve["actions"]:
                blob = json.dumps({k: v for k, v in action.items() if k != "where"}, sort_keys=True)
                if blob not in sig_ids:
                    sig_ids[blob] = len(sigs)
                    sigs.append(blob)
                ids.append(sig_ids[blob])
            entry["serve_args"] = {"sigs": ids, "allow_abbrev": serve["allow_abbrev"],
                                   "positionals": serve["positionals"],
                                   "make_arg_parser": (serve.get("where") or {}).get("make_arg_parser")}
            if serve.get("command"):  # before 0.5: the api_server module's plain argparse parser (no `_` as `-`)
                entry["serve_args"].update(command=serve["command"], flexible=(serve.get("where") or {}).get(
                    "parser") != "argparse.ArgumentParser")
        runtime = detail.get("runtime") or {}
        entry_runtime = {"where": runtime.get("where", {}), "kv_quant_modes": runtime.get("kv_quant_modes")}
        for key, pool in pools.items():
            if runtime.get(key):
                blob = json.dumps(runtime[key], sort_keys=True)
                if blob not in pool:
                    pool.append(blob)
                entry_runtime[key] = pool.index(blob)
        entry["runtime"] = entry_runtime
        entry["kinds"] = kinds_of(core, detail)
        entry["has_detail"] = bool(detail)
        releases.append(entry)
    return {
        "format": INDEX_FORMAT,
        "kinds": KINDS,
        "releases": releases,
        "serve_sigs": [json.loads(s) for s in sigs],
        "runtime_pools": {k: [json.loads(b) for b in v] for k, v in pools.items()},
    }


SELECTION_FORMAT = 1
SELECTION_COMMON = ("attn_types", "block_domain", "checks", "classes", "enum", "errors", "kv_domain",
                    "selector_config", "templates")
"""The parts of a release's `backends` facts that do not depend on the compute capability."""


def _cap_of(cell: str) -> str:
    return cell.split("|", 1)[0]


def _capability_slice(backends: dict, cap: str, pool: list, pool_ids: dict) -> dict | None:
    """What replaying vLLM's selection on `cap` needs of one release: the capability-free parts, that
    capability's answers (ids into the file's shared `answer_pool`), priorities, guards and query quantization."""
    per = backends["per_capability"].get(cap)
    if per is None:
        return None
    answers = {}
    for name, index in per.items():
        blob = json.dumps(backends["answer_sets"][index], sort_keys=True)
        if blob not in pool_ids:
            pool_ids[blob] = len(pool)
            pool.append(backends["answer_sets"][index])
        answers[name] = pool_ids[blob]
    prio = backends["priorities"]
    table = {k: v for k, v in prio["table"].items() if _cap_of(k) == cap}
    lists = sorted(set(table.values()))
    guards: dict = {}
    for name, messages in backends.get("guards", {}).items():
        for message, entry in messages.items():
            cells = [c for c in entry["cells"] if _cap_of(c) == cap]
            if cells:
                guards.setdefault(name, {})[message] = {**entry, "cells": cells}
    out = {k: backends[k] for k in SELECTION_COMMON if k in backends}
    out.update({
        "per_capability": {cap: answers},
        "priorities": {"lists": [prio["lists"][i] for i in lists], "params": prio["params"], "where": prio["where"],
                       "table": {k: lists.index(v) for k, v in table.items()}},
        "guards": guards,
    })
    if "layer_guards" in backends:
        out["layer_guards"] = _layer_guards_slice(backends["layer_guards"], cap)
    if "query_quant" in backends:
        out["query_quant"] = {n: [c for c in cells if _cap_of(c) == cap]
                              for n, cells in backends["query_quant"].items()}
    return out


def _layer_guards_slice(layer: dict, cap: str) -> dict:
    """The layer-feature probes' answers on one capability (probed cells and refusals)."""
    probed = {n: {stage: [c for c in cells if _cap_of(c) == cap] for stage, cells in stages.items()}
              for n, stages in layer["probed"].items()}
    refusals: dict = {}
    for name, messages in layer["refusals"].items():
        for message, entry in messages.items():
            cells = [c for c in entry["cells"] if _cap_of(c) == cap]
            if cells:
                refusals.setdefault(name, {})[message] = {**entry, "cells": cells}
    return {"features": layer["features"], "probed": probed, "refusals": refusals}


def _compact(data) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def selection_text(cap: str, releases: dict[str, dict], pool: list) -> str:
    """One capability's selection file: a JSON header line giving each release's part and each answer set as
    [start, end) byte offsets (UTF-8) into the JSON documents that follow it, so a reader decodes only the
    releases it replays (kvdoctor.vllm_pack.load_selection)."""
    parts, body, offset = {"releases": {}, "answer_pool": []}, [], 0
    for key, items in (("releases", releases.items()), ("answer_pool", enumerate(pool))):
        for name, value in items:
            text = _compact(value)
            span = [offset, offset + len(text.encode())]
            if key == "releases":
                parts["releases"][name] = span
            else:
                parts["answer_pool"].append(span)
            body.append(text)
            offset = span[1]
    header = _compact({"format": SELECTION_FORMAT, "capability": cap, **parts})
    return header + "\n" + "".join(body)


def build_selection(pack_dir: Path) -> dict[str, str]:
    """`selection-<capability>.json` per compute capability: every full release's selection facts for that
    capability, answer sets shared. A check reads one small file instead of every release's detail file
    (an unknown-version check replays 20 releases). Derived from the detail files only."""
    versions = sorted({_release_name(p.name) for p in pack_dir.iterdir() if _release_name(p.name)}, key=pack_order)
    details = {v: read_json(pack_dir, f"{v}.detail.json") or {} for v in versions}
    backends = {v: d.get("backends") for v, d in details.items()}
    backends = {v: b for v, b in backends.items() if b}
    # a release asked again with a modelled input stated otherwise (builders/vllm_pack/variants.py): its own part
    backends.update({f"{v}+{name}": apply_variant(backends[v], variant["backends"])
                     for v, d in details.items() if v in backends
                     for name, variant in sorted((d.get("variants") or {}).items())})
    caps = sorted({c for b in backends.values() for c in b["per_capability"]}, key=_capability_key)
    files = {}
    for cap in caps:
        pool: list = []
        pool_ids: dict = {}
        releases = {v: _capability_slice(b, cap, pool, pool_ids) for v, b in backends.items()}
        for key in [k for k in releases if "+" in k and releases[k] is not None]:  # a variant: what differs only
            base = releases.get(key.split("+", 1)[0]) or {}
            releases[key] = {"variant_of": key.split("+", 1)[0],
                             **{k: v for k, v in releases[key].items() if base.get(k) != v}}
        files[f"selection-{cap}.json"] = selection_text(cap, {v: s for v, s in releases.items() if s is not None},
                                                        pool)
    return files
