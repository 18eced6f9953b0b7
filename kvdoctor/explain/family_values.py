"""Values a family's cause adds to what the log's line gave: what the knowledge pack and the GPU table say about it.

A weight-quantization refusal gets the minimum the release's config class declares (data/vllm_pack/quantization)
and the GPUs that meet it (data/gpus.yaml); a KV cache that is too small gets what fits from the log's memory lines
(explain/log_memory.py). Each value is present only when what it needs is known; a text value that cannot be made
says what was missing, so a cause never reads as if kvdoctor knew more than the log and the pack hold.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from kvdoctor.explain.log_memory import kv_fit_values

MAX_METHODS = 8


def family_values(family: str | None, values: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """Extra `log.*`-style values (without the prefix) for a match of this family."""
    out = _clauses(values)
    if values.get("crash"):
        out.update(_native_frame(facts))
    out.update(_fact_clauses(family, facts))
    if family == "quant_min_capability":
        out.update(quant_capability_values(values, facts))
    elif family == "kv_cache_too_small":
        out.update(kv_fit_values(values, facts))
    elif family == "moe_kernel_selection":
        out.update(_capability_gpus(values))
    elif family == "model_arch_unsupported":
        out.update(arch_support_values(values, facts))
    elif family == "package_missing":
        out.update(package_values(values, facts))
    elif family == "no_kernel_image" and not values.get("archs") and facts.get("logged.torch_archs"):
        out["archs"] = facts["logged.torch_archs"]  # torch's warning wraps: its second line, read as a fact
    elif family in ("wrapper_api_mismatch", "serve_args"):
        from kvdoctor.explain.api_history import api_values  # loads data/api_history.json.gz: only here
        from kvdoctor.explain.interface_drift import drift_texts

        out.update(api_values(values, facts))
        out.update(drift_texts(values, facts))
        if family == "serve_args":
            out.update(_bare_option_words(values))
    return out


_UNRECOGNIZED = re.compile(r"unrecognized arguments: (.+)")
_TRUE = ("true", "1", "yes")


def _bare_option_words(values: dict[str, Any]) -> dict[str, Any]:
    """The fix for words argparse refused that are vLLM options written without their dashes, as a config file or a
    Python call spells them (`trust_remote_code=True`, `max_model_len=8192`): the flag they mean, by every option
    string of the releases the pack read."""
    found = _UNRECOGNIZED.search(str(values.get("detail") or ""))
    if not found:
        return {}
    from kvdoctor.vllm_pack.candidates import all_serve_options  # the pack's serve options: only here

    spelled = []
    for word in found.group(1).split():
        name, equals, value = word.strip("'\"").partition("=")
        option = "--" + name.replace("_", "-")
        if name.startswith("-") or not name or option not in all_serve_options():
            continue
        spelled.append(f"`{word}` is `{option}`" if not equals or value.lower() in _TRUE
                       else f"`{word}` is `{option} {value}`")
    if not spelled:
        return {}
    return {"api_fix": "Write vLLM's options as flags, with two dashes (a switch takes no value): "
                       + "; ".join(spelled)}


_TOOLCHAIN_FAMILIES = frozenset({"ptx_newer_than_driver", "driver_too_old", "no_kernel_image", "triton_ptxas_too_old",
                                 "flashinfer_jit_toolkit", "cuda_compat_803", "moe_kernel_selection"})
_MEMORY_FAMILIES = frozenset({"oom_profiling", "gpu_memory_occupied", "host_memory"})
_VISIBILITY_FAMILIES = frozenset({"no_gpu_visible", "device_placement"})


def _fact_clauses(family: str | None, facts: dict[str, Any]) -> dict[str, Any]:
    """One clause per family naming the start-up facts that bear on it (explain/log_facts.py), or saying that the
    log does not show them: `toolchain_text`, `memory_summary`, `visible_text`."""
    out: dict[str, Any] = {}
    if family in _TOOLCHAIN_FAMILIES:
        shown = [f"{label} {facts[name]}" for name, label in (
            ("logged.driver_version", "NVIDIA driver"), ("logged.driver_cuda", "which supports CUDA up to"),
            ("logged.torch_cuda", "; torch built with CUDA"), ("logged.cuda_runtime", "; CUDA runtime"))
            if facts.get(name)]
        out["toolchain_text"] = (" The log shows: " + " ".join(shown).replace(" ;", ";") + "." if shown else
                                 " The log shows neither the driver's version nor the CUDA torch was built with "
                                 "(collect_env or nvidia-smi output would).")
    if family in _MEMORY_FAMILIES:
        shown = [f"{label} {facts[name]:g} GiB" for name, label in (
            ("logged.total_gib", "GPU total"), ("logged.weights_gib", "weights"),
            ("logged.available_kv_gib", "KV cache"), ("logged.cuda_graph_gib", "CUDA graphs"))
            if isinstance(facts.get(name), (int, float))]
        shown += [f"{facts[name]} {label}" for name, label in (  # V0's block counts (no GiB figures of their own)
            ("logged.gpu_blocks", "GPU blocks of KV cache"), ("logged.cpu_blocks", "CPU blocks of swap space in host RAM"))
            if isinstance(facts.get(name), int)]
        out["memory_summary"] = (" The log's memory lines: " + ", ".join(shown) + "." if shown else
                                 " The log has no memory lines (Model loading took ..., Available KV cache memory ...)"
                                 " that would place the failure in start-up.")
    if family in _VISIBILITY_FAMILIES:
        visible = facts.get("logged.cuda_visible_devices")
        if visible is None:
            out["visible_text"] = " The log does not show CUDA_VISIBLE_DEVICES."
        elif visible.strip() == "":
            out["visible_text"] = " The log sets CUDA_VISIBLE_DEVICES empty, which hides every GPU."
        else:
            count = len([d for d in visible.split(",") if d.strip()])
            out["visible_text"] = f" The log sets CUDA_VISIBLE_DEVICES={visible} ({count} GPU{'s' if count != 1 else ''})."
        if str(facts.get("logged.active_drivers")) == "0":
            out["visible_text"] += (" Triton found 0 active driver(s) when vLLM imported it: no GPU driver was "
                                    "reachable from this process at all.")
    return out


def _clauses(values: dict[str, Any]) -> dict[str, Any]:
    """Short clauses a title or fix appends only when the log gave their value (an empty fallback otherwise)."""
    out: dict[str, Any] = {}
    if values.get("backend"):
        out["backend_text"] = f" (the {values['backend']} backend refused)"
    if values.get("env"):
        out["env_text"] = f", {values['env']}=1"
    if values.get("supported"):
        out["supported_text"] = f" (vLLM lists {values['supported']})"
    if values.get("required") and not _int(values.get("available")):
        out["required_text"] = f" (the build has it for capability {values['required']})"
    if values.get("expected"):
        out["expected_text"] = f" The backends vLLM names for it: {values['expected']}."
        listed = re.findall(r"'([\w.-]+)'", str(values["expected"]))
        if listed:
            out["first_expected"] = listed[0]
    elif values.get("candidates"):
        out["expected_text"] = f" The backends it tried: {values['candidates']}."
    if values.get("wanted"):
        out["wanted_text"] = f" ({values['wanted']})"
    if values.get("detail"):
        out["detail_text"] = f" with the engine's error {values['detail']}"
    if values.get("target"):
        out["target_text"] = f" ({values['target']})"
    if values.get("what"):
        out["what_text"] = f" ({values['what']})"
    if _int(values.get("required")) is not None and _int(values.get("available")) is not None:
        out["count_text"] = f" (needs {values['required']}, {values['available']} visible)"
    if _int(values.get("required")) and _int(values.get("required")) <= 16:
        out["visible_list"] = ",".join(str(i) for i in range(_int(values["required"])))
    if _int(values.get("required")) and _int(values.get("limit")):
        out["smem_text"] = (f" ({int(values['required']) // 1024} KiB of shared memory per block needed, "
                            f"{int(values['limit']) // 1024} KiB on this GPU)")
    arch = values.get("arch")
    if isinstance(arch, str) and arch.isdigit() and len(arch) >= 2:
        out["arch_dotted"] = f"{int(arch[:-1])}.{arch[-1]}"
    return out


def _native_frame(facts: dict[str, Any]) -> dict[str, Any]:
    """Where a native crash happened, from its stack dump (explain/native_crash.py)."""
    frame, owner = facts.get("log.native_frame"), facts.get("log.native_library")
    if not frame:
        return {}
    where = f"`{frame}`" + (f", in {owner}" if owner else "")
    return {"native_frame": frame, "frame_clause": f"The innermost frame of its stack dump is {where}."}


def package_values(values: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """What a missing package is and which setting of the run's command asks for it: an option whose name or value
    names the package (`--load-format fastsafetensors`, `--quantization bitsandbytes`, `--tokenizer-mode mistral` for
    mistral_common)."""
    module, extra = values.get("module"), values.get("extra")
    if not module and not extra:
        return {}
    out: dict[str, Any] = {}
    if extra:
        out["needed"] = f"vLLM's optional dependencies `{values.get('install') or f'vllm[{extra}]'}`"
        out["install"] = f"pip install '{values.get('install') or f'vllm[{extra}]'}' (the same vLLM release)"
    else:
        out["needed"] = f"the Python package `{module}`"
        out["install"] = (f"pip install {module} (where the distribution's name is the module's; for vLLM's own "
                          "optional dependencies pip install 'vllm[NAME]')")
    setting = _setting_naming(str(extra or module), str(facts.get("logged.command") or ""))
    if setting:
        out["setting"] = f"`{setting}`"
        argument = setting.split()[0].lstrip("-").replace("-", "_")
        out["setting_clause"] = f"The run's command asks for it: `{setting}` (engine argument {argument})."
    return out


def _setting_naming(package: str, command: str) -> str | None:
    """The option of a command line whose name or value names a package ('--load-format fastsafetensors')."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    wanted = _word(package)
    for i, word in enumerate(words):
        if not word.startswith("--"):
            continue
        name, equals, value = word.partition("=")
        if not equals and i + 1 < len(words) and not words[i + 1].startswith("-"):
            value = words[i + 1]
        for said in (value, name[2:]):
            if said and _names_package(_word(said), wanted):
                return f"{name} {value}".strip()
    return None


def _word(text: str) -> str:
    return text.strip("'\"").lower().replace("-", "_")


def _names_package(said: str, package: str) -> bool:
    """'fastsafetensors' ~ 'fastsafetensors', 'mistral' ~ 'mistral_common',
    'runai_streamer' ~ 'runai_model_streamer'."""
    if len(said) < 3 or len(package) < 3:
        return False
    if said == package or (min(len(said), len(package)) >= 4 and (said in package or package in said)):
        return True
    return len(said.split("_")[0]) >= 4 and said.split("_")[0] == package.split("_")[0]


def quant_capability_values(values: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """`pack_text` (the release's config class and its get_min_capability, file:line), `serving_gpus` (the GPUs
    whose capability meets the minimum) and `usable_methods` (the methods the release accepts on this GPU)."""
    out = _capability_gpus(values)
    method = str(values.get("method") or facts.get("model.quant_method") or "").lower()
    current = _int(values.get("current_capability"))
    if current is None and facts.get("gpu.capability") is not None:
        current = round(float(facts["gpu.capability"]) * 10)
    version = facts.get("vllm.version")
    if not version:
        out["pack_text"] = (" The log does not name the vLLM release, so the release's own minimum for the method "
                            "is not cited.")
        return out
    from kvdoctor.vllm_pack.quantization import release_quantization

    release = release_quantization(str(version).split("+")[0])
    if release is None:
        out["pack_text"] = f" kvdoctor's knowledge pack does not hold vLLM {version}'s quantization table."
        return out
    known = release.methods.get(method)
    if known is not None and known.min_capability is not None and known.min_capability_where:
        name = (known.config_class or "").rpartition(":")[2] or method
        out["pack_text"] = (f" In vLLM {version}, {name}.get_min_capability() returns {known.min_capability} "
                            f"({known.min_capability_where}).")
        logged = _int(values.get("min_capability"))
        if logged is not None and logged != known.min_capability:
            out["pack_text"] = out["pack_text"][:-1] + (
                f", not the {logged} the message shows: the message came from another release or config class "
                f"than vLLM {version}'s {name}.")
        out.setdefault("min_capability_sm", _sm(known.min_capability))
    elif method:
        out["pack_text"] = f" vLLM {version}'s pack entry for {method} gives no literal minimum capability."
    if current is not None:
        usable = [m.name for m in release.methods.values()
                  if m.min_capability is not None and 0 <= m.min_capability <= current and m.name in release.registered
                  and m.name not in release.deprecated]
        if usable:
            more = f" and {len(usable) - MAX_METHODS} more" if len(usable) > MAX_METHODS else ""
            out["usable_methods"] = f"vLLM {version} accepts there: " + ", ".join(usable[:MAX_METHODS]) + more
    return out


def arch_support_values(values: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """`arch_text`: which releases the knowledge pack read register the refused architecture(s) (their registries,
    data/vllm_pack/architectures), set against the release the log shows."""
    from kvdoctor.base.versions import release_numbers
    from kvdoctor.vllm_pack.architectures import serving_releases
    from kvdoctor.vllm_pack.candidates import describe_range, pack_releases

    names = tuple(re.findall(r"[A-Za-z_]\w*", str(values.get("archs") or "")))
    if not names:
        return {"arch_text": " The line does not name the architecture, so the releases that serve it are not "
                             "looked up."}
    said = ", ".join(names)
    read = pack_releases()
    serving = serving_releases(names)
    if not serving:
        return {"arch_text": (f" No vLLM release kvdoctor's knowledge pack read ({read[0]}-{read[-1]}) registers "
                              f"{said}: config.json names a class vLLM has no implementation for (a custom class, or "
                              "a bare base model saved without its LM head), so a newer vLLM does not fix it by "
                              "itself.")}
    first = serving[0]
    before = [v for v in read if release_numbers(v) < release_numbers(first)]
    since = (f" ({before[-1]}, the release read before it, does not; releases between them were not read)"
             if before else "")
    text = (f" Of the releases kvdoctor's knowledge pack read, {describe_range(serving)} register {said}: the first is "
            f"{first}{since}.")
    version = str(facts.get("vllm.version") or "").split("+")[0]
    logged = release_numbers(version)  # () when the log names no release
    if not logged:
        text += " The log does not name the vLLM release that refused it."
    elif logged < release_numbers(first):
        text += f" The log's vLLM {version} is older than {first}: upgrading serves it."
    else:
        text += (f" The log's vLLM {version} is not older than {first}, so its registry has the class: the "
                 "class failed to import (a dependency such as transformers, or a plugin), or the install is not "
                 "that release.")
    return {"arch_text": text, "arch_first": first}


def _capability_gpus(values: dict[str, Any]) -> dict[str, Any]:
    """`serving_gpus`: the GPU generations in data/gpus.yaml whose capability meets the minimum the line names."""
    minimum = _int(values.get("min_capability"))
    if minimum is None:
        sm = values.get("min_sm") or values.get("min_capability_sm")
        minimum = round(float(sm) * 10) if _is_number(sm) else None
    if minimum is None:
        return {}
    from kvdoctor.data.gpus import gpu_table

    by_capability: dict[tuple[int, int], list[str]] = {}
    for device in {d.name: d for d in gpu_table().values()}.values():
        if device.capability is not None and device.capability[0] * 10 + device.capability[1] >= minimum:
            by_capability.setdefault(device.capability, []).append(device.name)
    if not by_capability:
        return {}
    groups = [f"SM {major}.{minor} ({', '.join(sorted(names)[:4])})"
              for (major, minor), names in sorted(by_capability.items())]
    return {"serving_gpus": "; ".join(groups)}


def _sm(capability: int) -> str:
    return f"{capability // 10}.{capability % 10}"


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, str)) and str(value).isdigit() else None


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True
