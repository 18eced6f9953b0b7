"""Turn the child's raw answers for one release into the pack's stored form (deterministic, no absolute paths)."""
from __future__ import annotations

import json
import re

# Serve-argument defaults worth naming as release defaults (dest -> key in `defaults`).
DEFAULT_DESTS = (
    "block_size", "gpu_memory_utilization", "kv_cache_dtype", "dtype", "max_model_len", "max_num_seqs",
    "max_num_batched_tokens", "enforce_eager", "attention_backend", "tensor_parallel_size", "swap_space",
    "enable_prefix_caching", "enable_chunked_prefill", "kv_cache_memory_bytes", "calculate_kv_scales",
)


def clean_paths(text):
    """Strip absolute paths (temporary extraction dirs, the builder's venv) from free text."""
    if isinstance(text, str):
        text = re.sub(r"/[^\s'\"]*?/(vllm/[\w/.]+\.py)", r"\1", text)
        text = re.sub(r"/[^\s'\"]*?/site-packages/", "", text)
        text = re.sub(r"/tmp/[\w.\-/]+", "<tmp>", text)
        return text
    if isinstance(text, list):
        return [clean_paths(t) for t in text]
    if isinstance(text, dict):
        return {k: clean_paths(v) for k, v in text.items()}
    return text


def _serve_args(raw: dict) -> dict:
    actions = []
    for a in raw["actions"]:
        if a["action"] == "help" or not a["option_strings"]:
            continue
        nargs = a["nargs"]
        takes_value = not (nargs == 0 or a["action"] in (
            "_StoreTrueAction", "_StoreFalseAction", "_StoreConstAction", "_CountAction", "_VersionAction"))
        actions.append({
            "dest": a["dest"],
            "option_strings": a["option_strings"],
            "action": a["action"].lstrip("_"),
            "nargs": nargs,
            "takes_value": takes_value,
            "choices": a["choices"],
            "default": a["default"],
            "type": a["type"],
            # BooleanOptionalAction, or vLLM's own EnableDisableAction (0.33+): `--x` / `--no-x`, no value
            "is_bool_optional": a["action"] == "BooleanOptionalAction" or (
                nargs == 0 and any(o.startswith("--no-") for o in a["option_strings"])),
            "help": a["help"],
            "hidden": a["hidden"],
            "where": a["where"],
        })
    actions.sort(key=lambda a: a["option_strings"][0])
    positionals = [a["dest"] for a in raw["actions"] if not a["option_strings"]]
    return {
        "actions": actions,
        "positionals": positionals,
        "allow_abbrev": raw["allow_abbrev"],
        "where": {"parser": raw["parser_class"], "make_arg_parser": raw["make_arg_parser"]},
        **({"command": raw["command"]} if "command" in raw else {}),  # before 0.5: the api_server module's parser
    }


def _pins(requirements: list) -> dict:
    pins = {}
    for name, spec, marker in requirements:
        if marker and "linux" not in marker.lower() and "x86_64" not in marker:
            if "platform_machine" in marker or "sys_platform" in marker or "platform_system" in marker:
                continue
        if spec:
            pins[name] = spec
    return pins


def normalise_release(version: str, raw: dict, shipped: dict, request: dict, pack_format: int) -> dict:
    """One release's stored facts from the child's raw answers, the wheel's contents and the request sent."""
    errors = dict(raw.get("errors", {}))
    out: dict = {"format": pack_format, "version": version}
    if "serve_args" in raw:
        out["serve_args"] = _serve_args(raw["serve_args"])
        by_dest = {a["dest"]: a for a in out["serve_args"]["actions"]}
        out["defaults"] = {d: {"value": by_dest[d]["default"], "where": by_dest[d]["where"]}
                           for d in DEFAULT_DESTS if d in by_dest}
        if "kv_cache_dtypes" not in raw and "kv_cache_dtype" in by_dest:
            raw["kv_cache_dtypes"] = {"values": by_dest["kv_cache_dtype"]["choices"],
                                      "where": by_dest["kv_cache_dtype"]["where"]}
        if "model_dtypes" not in raw and "dtype" in by_dest:
            raw["model_dtypes"] = {"values": by_dest["dtype"]["choices"], "where": by_dest["dtype"]["where"]}
    for key in ("kv_cache_dtypes", "model_dtypes"):
        if key in raw:
            out[key] = raw[key]
    out["pins"] = {"requires": _pins(shipped["requirements"]), "where": "METADATA (Requires-Dist)"}
    if shipped.get("triton"):
        out["pins"]["triton"] = shipped["triton"]
    out["modelled"] = {
        "compiled_modules_present": shipped["compiled_modules"],
        "packages_present": {**request["stub_packages"], **request.get("late_stub_packages", {})},
        "note": ("compiled extensions the wheel ships and its hard GPU dependencies are modelled as importable; "
                 "their run-time behaviour is not"),
    }
    if "backends" in raw:
        backends = dict(raw["backends"])
        out["samples"] = backends.pop("samples", [])
        # capabilities share most answers: each distinct answer set once, per capability an index
        answer_sets, index = [], {}
        for cap, per in backends["per_capability"].items():
            for name, answers in per.items():
                blob = json.dumps(answers, sort_keys=True)
                if blob not in index:
                    index[blob] = len(answer_sets)
                    answer_sets.append(answers)
                per[name] = index[blob]
        backends["answer_sets"] = answer_sets
        out["backends"] = backends
    if "backend_grid" in raw:
        grid = dict(raw["backend_grid"])
        out["samples"] = grid.pop("samples", [])
        if "v0" in grid:  # the V0 selector's samples join the file, each marked with its engine
            grid["v0"] = dict(grid["v0"])
            out["samples"] += [{**sample, "engine": "V0"} for sample in grid["v0"].pop("samples", [])]
        out["backend_grid"] = grid
    if "runtime" in raw:
        runtime = raw["runtime"]
        table = runtime.get("dtype", {}).get("table")
        if table:  # 2,592 cells share a handful of answers, and capabilities share whole tables
            answers = sorted({json.dumps(v) for v in table.values()})
            by_cap: dict = {}
            for key, value in table.items():
                cap, rest = key.split("|", 1)
                by_cap.setdefault(cap, {})[rest] = answers.index(json.dumps(value))
            tables, caps = [], {}
            for cap, sub in by_cap.items():
                if sub not in tables:
                    tables.append(sub)
                caps[cap] = tables.index(sub)
            runtime["dtype"]["answers"] = [json.loads(a) for a in answers]
            runtime["dtype"]["tables"] = tables
            runtime["dtype"]["table"] = caps
        out["runtime"] = runtime
    if errors:
        out["build_errors"] = clean_paths(errors)
    return clean_paths(out)
