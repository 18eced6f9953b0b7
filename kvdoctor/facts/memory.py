"""Will it fit? The context-length and KV-cache memory facts of the judged release(s): context.* and memory.*
(declared in data/fact_names.yaml). Context length: facts/context_length.py; KV pages, groups and vLLM's fit check:
facts/kv_capacity.py; the memory budget (GPU memory x utilization - weights - modelled activation, non-torch and
CUDA-graph memory, with its error band, or --kv-cache-memory-bytes exactly): facts/memory_budget.py; the verdict and
the recomputed fixes: here. Sources: data/kv_memory.yaml.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kvdoctor.base.versions import release_numbers
from kvdoctor.data.fact_names import fact_registry
from kvdoctor.facts.context_length import (
    derive_context_length, env_allows_long, overridden_config, serve_overrides, variants_for,
)  # fmt: skip
from kvdoctor.facts.kv_capacity import (
    Fit, KvPlan, capacity_log, judge_fit, kv_table, layer_specs, not_enough_message, plan_groups,
    skip_layers_block_size, state_page_bytes,
)  # fmt: skip
from kvdoctor.facts.memory_budget import (
    GIB, ServeMemory, batch_defaults, budget_table, cuda_total_bytes, kv_budget, parsed_json, release_utilization,
    serve_memory,
)  # fmt: skip
from kvdoctor.model.facts import Facts
from kvdoctor.vllm_pack.candidates import Candidates, agree, describe_range


def memory_facts(facts: Facts, releases: Candidates) -> dict[str, Any]:
    """context.* and memory.* for the judged release (decided only where every candidate release agrees)."""
    names = fact_registry().names(produced_by="memory")
    serve = serve_memory(facts.serve)  # first: malformed memory / override flags are bad input either way
    flat = facts.flat()
    if facts.model is None or not flat.get("model.layer_kinds") and not facts.model.num_hidden_layers:
        return dict.fromkeys(names)
    if not releases.releases:  # the facts stay unknown (no rule passes on them), the reason is said in words
        return dict.fromkeys(names) | {"memory.why_not": _why_no_release(flat, releases)}
    env = dict(facts.serve.env)
    per_release = {r.version: _one_release(flat, facts, serve, env, r) for r in releases.releases}
    out = {}
    for name in names:
        out[name] = agree(releases.releases, lambda r, n=name: per_release[r.version].get(n)).value
    out["memory.fit_by_release"] = _fit_by_release(releases, per_release)
    return out


def _why_no_release(flat: dict[str, Any], releases: Candidates) -> str:
    version = flat.get("vllm.version")
    if version:
        named = releases.note or f"vLLM {version} is not among the releases kvdoctor read"
        return (f"{named}: how it derives the context length, sizes the KV cache and defaults its memory flags is "
                "unknown; pass --vllm-version with a packed release to judge it as that one")
    return f"no vLLM release to judge with ({releases.note or 'none matches'})"


def _fit_by_release(releases: Candidates, per_release: dict[str, dict]) -> str:
    """The verdict on every candidate release: 'fits on all 30 candidate releases', 'does_not_fit on any ...', or the
    split ('fits on 0.23.0-0.33.0; within_band on 0.34.0'): with the version unknown, each release's own defaults
    (utilization, batch sizes, the extensible KV cache) decide, so the answer may differ between them."""
    split = agree(releases.releases, lambda r: per_release[r.version].get("memory.fit") or "unknown")
    if split.value is not None:
        count = len(releases.releases)
        word = {"fits": "fits on all", "does_not_fit": "does not fit on any", "no_memory": "no memory on any"}
        return f"{word.get(split.value, split.value + ' on all')} {count} candidate release{'s' * (count > 1)}"
    return "; ".join(f"{value} on {versions}" for value, versions in split.split)


def _one_release(flat: dict[str, Any], facts: Facts, serve: ServeMemory, env: dict[str, str], release) -> dict:
    """Every context.* / memory.* fact for one release; its context-length variants must agree."""
    overrides = serve_overrides(parsed_json(serve.hf_overrides), parsed_json(serve.rope_scaling), release.serve_args)
    answers = [_context(flat, facts, env, variant, overrides) for variant in variants_for(release.version)]
    context = answers[0] if all(a == answers[0] for a in answers) else dict.fromkeys(answers[0])
    memory = _memory(flat, facts, serve, release, context.get("context.max_model_len"))
    if memory.get("memory.auto_fit_max_model_len"):  # --max-model-len auto: the length vLLM will run with
        context = context | {"context.max_model_len": memory["memory.auto_fit_max_model_len"]}
    return context | memory


def auto_fit_error(facts: Facts) -> str | None:
    """vLLM's error when --max-model-len auto finds not one token's room (it runs before the one-request check)."""
    if facts.serve.max_model_len != -1:
        return None
    return " ".join(kv_table()["auto_fit_error"].split())


def _context(flat: dict[str, Any], facts: Facts, env: dict[str, str], variant: str,
             overrides: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    keys, rope = overridden_config(flat.get("model.max_len_keys") or {}, flat.get("model.rope_scaling") or [],
                                   overrides, flat.get("model.text_config_key"))
    length = derive_context_length(keys, rope, facts.model.model_type, facts.serve.max_model_len,
                                   env_allows_long(env), variant)  # fmt: skip
    limit = length.derived if length.derived != float("inf") else None
    return {
        "context.derived_max": int(limit) if limit is not None else None,
        "context.derived_key": length.key or "none",
        "context.max_model_len": length.max_model_len,
        "context.error": length.error or "none",
        "context.allowed_by_env": length.allowed_by_env,
    }


def _memory(flat: dict[str, Any], facts: Facts, serve: ServeMemory, release, max_model_len: int | None) -> dict:
    unknown = dict.fromkeys(fact_registry().names(produced_by="memory"))
    unknown = {k: v for k, v in unknown.items() if k.startswith("memory.")}
    kinds = flat.get("model.layer_kinds")
    why_not = _why_not_modelled(flat, facts, kinds, release, serve)
    plan = None
    if why_not is None:
        try:
            plan = plan_for(flat, facts, serve, kinds, facts.serve.kv_cache_dtype, release,
                            max_model_len=max_model_len)
        except NotImplementedError as exc:
            why_not = f"this mix of KV-cache layers is not modelled ({exc})"
    if plan is None or max_model_len is None:
        return unknown | {"memory.fit": "not_modelled" if why_not else None, "memory.why_not": why_not or "none"}
    budget, band, source, weights, estimated = kv_budget(flat, facts, serve, release, max_model_len)
    if weights is None and serve.kv_cache_memory_bytes is None:  # never a PASS on weights counted as 0 bytes
        method = facts.model.quant_method
        why = (f"the weights' size is unknown: no safetensors metadata at hand, and {method} quantization's bytes per "
               "parameter are not in data/kv_memory.yaml" if method not in (None, "none") else
               "the weights' size is unknown (no safetensors metadata, and config.json lacks the shapes)")
        return unknown | {"memory.fit": "not_modelled", "memory.why_not": why + ": pass --kv-cache-memory-bytes"}
    in_flight = _in_flight_tokens(flat, facts, serve, release)
    reserved = _null_block_reserved(release.version)
    auto_fit = None
    if facts.serve.max_model_len == -1:  # --max-model-len auto (0.14.1+): vLLM shrinks it to the longest length that
        # fits the memory it measures (v1/core/kv_cache_utils.py _auto_fit_max_model_len): at the budget's low edge when
        # one fits there (a fit), else at its middle (inside the band); none even there: "Cannot auto-fit" stands
        auto_fit = (_fitting_len(plan, budget - band, max_model_len, in_flight, reserved)
                    or _fitting_len(plan, budget, max_model_len, in_flight, reserved))
        max_model_len = auto_fit or max_model_len
    fit = judge_fit(plan, budget, max_model_len, in_flight, reserved)
    verdict = _verdict(plan, budget, band, max_model_len, in_flight, reserved)
    fp8 = _fp8_outcome(flat, facts, serve, kinds, release, budget, band, max_model_len, in_flight, reserved)
    capacities = _dtype_capacities(flat, facts, serve, kinds, release, budget, band, max_model_len, in_flight, reserved)
    logged = capacity_log(release.version, fit, plan, max_model_len)  # each release's own count and lines
    return unknown | {
        "memory.fit": verdict if why_not is None else "not_modelled",
        "memory.why_not": why_not or "none",
        "memory.kv_budget_bytes": budget,
        "memory.kv_budget_gib": round(budget / GIB, 2),
        "memory.band_gib": round(band / GIB, 2),
        "memory.kv_budget_source": source,
        "memory.weights_bytes": weights,
        "memory.weights_estimated": estimated,
        "memory.block_size": plan.block_size,
        "memory.kv_bytes_per_token": plan.bytes_per_block // plan.block_size,
        "memory.kv_needed_gib": round(fit.needed_bytes / GIB, 2),
        "memory.kv_tokens": logged[0] if logged else None,
        "memory.max_concurrency": round(logged[1] if logged else fit.concurrency, 2),
        "memory.error": (not_enough_message(fit, max_model_len) and auto_fit_error(facts)) or
                        not_enough_message(fit, max_model_len) or "none",
        "memory.fitting_max_model_len": _fitting_len(plan, budget - band, max_model_len, in_flight, reserved),
        "memory.auto_fit_max_model_len": auto_fit,
        "memory.fp8_fits": fp8,
        "memory.kv_dtype_capacities": "; ".join(capacities) or "none",
        "memory.kv_dtypes_fitting": "; ".join(c for c in capacities if ": fits," in c) or "none",
        "memory.fitting_gpu_memory_utilization": _fitting_utilization(flat, serve, release, plan, budget, band,
                                                                     max_model_len, in_flight, reserved),
        "memory.fitting_tensor_parallel_size": _fitting_tp(flat, facts, serve, kinds, release, max_model_len),
        "memory.vllm_log": "; ".join(logged[2]) if logged else None,
    }


def _why_not_modelled(flat, facts: Facts, kinds, release, serve: ServeMemory) -> str | None:
    model = facts.model
    if not kinds:
        return ("the model's layer kinds are unknown (a hybrid of attention and Mamba / linear-attention layers whose "
                "layout kvdoctor does not read)")
    if "cross" in kinds:
        why = _cross_unsized(flat, facts, release)
        if why:
            return why
    if any(k == "other" for k in kinds):
        arch = ", ".join(model.architectures) or "this model"
        return (f"{arch} has layers kvdoctor cannot size (cross-attention of an encoder-decoder model, or a Mamba / "
                "linear-attention state of an architecture data/kv_memory.yaml state_layers does not list)")
    if "state" in kinds:
        if not flat.get("model.state_layer"):
            return "config.json lacks a key vLLM sizes this model's Mamba / linear-attention state from"
        if checkpoint_blocks(facts, release.version) is None:
            return (f"whether vLLM {release.version}'s Mamba / linear-attention layers hold a prefill-checkpoint block "
                    "was not read (data/kv_memory.yaml state_layers prefill_checkpoint_blocks)")
    if "chunked" in kinds and not flat.get("model.attention_chunk_size"):
        return "config.json does not give the attention chunk size"
    if serve.unmodelled:
        verb = "changes" if len(serve.unmodelled) == 1 else "change"
        return f"{', '.join(serve.unmodelled)} {verb} the KV cache in ways kvdoctor does not size yet"
    skip = _skip_layers_unsized(facts, kinds, release, serve)
    if skip:
        return skip
    offloading = _kv_offloading_unread(facts, kinds, release, serve)
    if offloading:
        return offloading
    if not (model.head_dim and model.num_kv_heads) and "cross" not in kinds:
        return "config.json does not give head_dim and the KV heads"
    if _kv_bytes(facts.serve.kv_cache_dtype, facts.model.dtype) is None:
        follows_model = facts.serve.kv_cache_dtype == "auto" or facts.serve.kv_cache_dtype.startswith("turboquant_")
        if follows_model and model.dtype is None:  # auto (and TurboQuant's native layers) take the model's dtype
            return "the dtype vLLM serves the model in is undecided (it depends on the GPU: pass --gpu, or --dtype)"
        return f"--kv-cache-dtype {facts.serve.kv_cache_dtype}'s page size is not modelled (only auto, float16/bfloat16, fp8 and TurboQuant)"
    if serve.kv_cache_memory_bytes is None:
        if flat.get("gpu.memory_gib") is None:
            return "the GPU's memory is unknown (pass --gpu)"
        if serve.gpu_memory_utilization is None and release_utilization(release, serve) is None:
            return (f"vLLM {release.version}'s default --gpu-memory-utilization is not in the knowledge pack: pass "
                    "--gpu-memory-utilization or --kv-cache-memory-bytes")
    return None


def _cross_unsized(flat, facts: Facts, release) -> str | None:
    """Cross-attention is sized for the releases whose CrossAttentionSpec, grouping and encoder budget were read
    (data/kv_memory.yaml kv_cache.cross_attention) and the encoder-decoder architectures listed there."""
    arch = ", ".join(facts.model.architectures) or "this encoder-decoder model"
    if not flat.get("model.cross_attention"):
        return (f"{arch}'s decoder layers also hold cross-attention, and data/kv_memory.yaml kv_cache.cross_attention "
                "does not list how vLLM's model class shapes them")
    read = kv_table()["cross_attention"]["read_in"]
    if release.version not in read:
        return (f"{arch}'s decoder layers also hold cross-attention (CrossAttentionSpec for the scheduler's "
                f"max_num_encoder_input_tokens): how vLLM {release.version} groups and sizes it was not read (read: "
                f"{describe_range(read)})")
    return None


def encoder_tokens(flat, serve: ServeMemory, release, max_model_len: int | None) -> int:
    """max_num_encoder_input_tokens: max_num_batched_tokens as given, else the batch default capped at max_num_seqs
    x max_model_len (EngineArgs; data/kv_memory.yaml kv_cache.cross_attention)."""
    if serve.max_num_batched_tokens:
        return serve.max_num_batched_tokens
    tokens, seqs = batch_defaults(flat, release)
    seqs = serve.max_num_seqs or seqs
    return min(seqs * max_model_len, tokens) if max_model_len else tokens


def _skip_layers_unsized(facts: Facts, kinds, release, serve: ServeMemory) -> str | None:
    """--kv-cache-dtype-skip-layers is sized where the layers it names are full attention of a dense, non-MLA model
    in a release whose page reconciliation was read (data/kv_memory.yaml kv_cache.skip_layers)."""
    names = serve.kv_cache_dtype_skip_layers
    dtype = facts.serve.kv_cache_dtype
    if not names or dtype == "auto":  # skipped layers take 'auto': nothing changes
        return None
    why = None
    if dtype.startswith("turboquant_"):
        why = "next to TurboQuant's own boundary layers"
    elif facts.model.is_mla:
        why = "on an MLA model (its backends' kernel blocks differ)"
    elif any(not n.isdigit() for n in names):
        why = f"by attention type ({', '.join(n for n in names if not n.isdigit())})"
    elif any(int(n) < len(kinds) and kinds[int(n)] != "full" for n in names) or any(k in ("state", "chunked") for k in kinds):
        why = "on sliding-window, chunked or hybrid layers (vLLM picks their own block within the shared page)"
    elif _skip_block_raise(release.version) is None:
        why = f"on vLLM {release.version}, whose page reconciliation was not read (read: 0.23.0, 0.25.1-0.34.0)"
    if why is None:
        return None
    return (f"--kv-cache-dtype-skip-layers {why}: the skipped layers keep the model dtype's page, which kvdoctor does not "
            "size in this case (Platform._align_heterogeneous_kv_block_size, vllm/platforms/interface.py)")


def _skip_block_raise(version: str) -> bool | None:
    """Whether the release raises the quantized block for skipped layers (None: not read)."""
    table = kv_table()["skip_layers"]
    number = release_numbers(version)
    if number in [release_numbers(v) for v in table["no_block_raise_read_in"]]:
        return False
    return True if number >= release_numbers(table["block_raise_from"]) else None


def _kv_offloading_unread(facts: Facts, kinds, release, serve: ServeMemory) -> str | None:
    """--kv-offloading-size leaves the GPU budget alone; it matters only where its KV connector could turn vLLM's
    hybrid KV cache manager off for sliding-window / chunked / state layers (data/kv_memory.yaml kv_offloading)."""
    if serve.kv_offloading_gib is None or all(k in ("full", "none") for k in kinds):
        return None
    table = budget_table()["kv_offloading"]
    simple = dict(facts.serve.env).get(table["simple_offload_env"], "0").strip().lower() in ("1", "true")
    read = [release_numbers(v) for v in table["hma_read_in"]]
    if serve.kv_offloading_backend in table["hma_keeping_backends"] and not simple and (
            read[0] <= release_numbers(release.version) <= read[-1]):  # fmt: skip
        return None
    connector = "VLLM_USE_SIMPLE_KV_OFFLOAD's connector" if simple else f"the {serve.kv_offloading_backend} backend"
    return (f"--kv-offloading-size with {connector} on vLLM {release.version}: whether its KV connector keeps the "
            "hybrid KV cache manager for these sliding-window / chunked / state layers was not read (one without "
            "SupportsHMA turns it off, vllm/config/vllm.py)")


def _kv_bytes(kv_cache_dtype: str, model_dtype: str | None) -> float | None:
    table = kv_table()["dtype_bytes"]
    if kv_cache_dtype == "auto":
        return table.get(model_dtype) if model_dtype else None
    if kv_cache_dtype.startswith("turboquant_"):
        return table.get(model_dtype) if model_dtype else None  # native layers; packed ones in kv_capacity
    return table.get(kv_cache_dtype)


def plan_for(flat, facts: Facts, serve: ServeMemory, kinds, kv_cache_dtype: str, release=None,
             platform: str = "cuda", max_model_len: int | None = None) -> KvPlan:  # fmt: skip
    """The KV-cache groups vLLM plans for this model, these flags and this release on `platform` ('cuda', 'cpu', or
    'cpu_amx' for the CPU build on a host with AMX tiles: default and kernel blocks differ); NotImplementedError names
    what is not modelled."""
    model = facts.model
    state = flat.get("model.state_layer")
    state_bytes = None
    if state and kinds and "state" in kinds:
        ssm_dtype = serve.mamba_ssm_cache_dtype
        if ssm_dtype == "auto" and state.get("ssm_dtype"):  # the architecture's own default (NemotronH: float32)
            ssm_dtype = state["ssm_dtype"]
        conv, ssm = state_dtype_bytes(model.dtype, serve.mamba_cache_dtype, ssm_dtype)
        state_bytes = state_page_bytes(state, facts.serve.tensor_parallel_size, conv, ssm)
    skip = frozenset(int(n) for n in serve.kv_cache_dtype_skip_layers if n.isdigit()) if kv_cache_dtype != "auto" else None
    raise_block = bool(skip) and release is not None and bool(_skip_block_raise(release.version))
    heads, size, encoder = model.num_kv_heads, head_size(facts), None
    cross = flat.get("model.cross_attention")
    if cross and kinds and "cross" in kinds:  # the decoder's heads (KV heads = heads) and head size
        heads, size = cross["heads"], cross["head_size"]
        encoder = encoder_tokens(flat, serve, release, max_model_len) if release is not None else None
    return _plan_of(tuple(kinds) if kinds else kinds, kv_cache_dtype, model.dtype, heads, size,
                    bool(model.is_mla), facts.serve.tensor_parallel_size, facts.serve.pipeline_parallel_size,
                    model.sliding_window or None, serve.block_size, serve.disable_sliding_window,
                    flat.get("model.attention_chunk_size"), state_bytes,
                    state_blocks(facts, serve, release.version) if state_bytes and release else 0, platform,
                    skip or frozenset(), raise_block, encoder, _full_geometry(flat))


def _full_geometry(flat) -> tuple[int, int] | None:
    geometry = flat.get("model.full_attention_geometry")
    return (geometry["heads"], geometry["head_dim"]) if geometry else None


@lru_cache(maxsize=512)  # one plan per input set: 20 candidate releases x each KV dtype ask the same
def _plan_of(kinds, kv_cache_dtype: str, model_dtype, num_kv_heads, head_dim: int, is_mla: bool,
             tensor_parallel_size: int, pipeline_parallel_size: int, window, block_size, disable_sliding_window,
             chunk=None, state_bytes=None, state_blocks=0, platform="cuda", skip_layers=frozenset(),
             raise_block=False, encoder_tokens=None, full_geometry=None) -> KvPlan:  # fmt: skip
    kv_bytes = _kv_bytes(kv_cache_dtype, model_dtype)
    if kv_bytes is None:
        raise NotImplementedError(f"--kv-cache-dtype {kv_cache_dtype}")
    model_bytes = int(kv_table()["dtype_bytes"].get(model_dtype or "bfloat16", 2))
    specs = layer_specs(list(kinds) if kinds else kinds, num_kv_heads=num_kv_heads, head_dim=head_dim,
                        kv_bytes=kv_bytes, is_mla=is_mla, tensor_parallel_size=tensor_parallel_size, window=window,
                        kv_cache_dtype=kv_cache_dtype, model_dtype_bytes=model_bytes,
                        disable_sliding_window=disable_sliding_window, chunk=chunk, state_bytes=state_bytes,
                        skip_layers=skip_layers, encoder_tokens=encoder_tokens, full_geometry=full_geometry)
    layers_per_stage = max(1, pipeline_parallel_size)
    specs = specs[: -(-len(specs) // layers_per_stage)]  # the first pipeline stage's layers
    sizes = kv_table()["default_block_size"]
    mla = "_mla" if is_mla else ""
    block = block_size or sizes[platform + mla]
    kernel_block = kv_table()["state_layers"]["kernel_block"][platform]
    if skip_layers and raise_block and specs:  # the quantized block covers a skipped layer's model-dtype page
        pages = [s.page_bytes_per_token for s in specs if s.kind != "state"]
        block = skip_layers_block_size(min(pages), max(pages), block, kernel_block)
    return plan_groups(specs, block, kernel_block=kv_table()["state_layers"]["kernel_block"][platform],
                       state_blocks=state_blocks)


def state_dtype_bytes(model_dtype: str | None, mamba_cache_dtype: str, mamba_ssm_cache_dtype: str) -> tuple[int, int]:
    """Bytes of the conv and the temporal state's dtypes (MambaStateDtypeCalculator._mamba_state_dtype): 'auto' conv
    state takes the model dtype, 'auto' temporal state the conv state's."""
    table = kv_table()["dtype_bytes"]
    conv = int(table.get(model_dtype or "bfloat16", 2) if mamba_cache_dtype == "auto" else table[mamba_cache_dtype])
    return conv, conv if mamba_ssm_cache_dtype == "auto" else int(table[mamba_ssm_cache_dtype])


def checkpoint_blocks(facts: Facts, version: str) -> int | None:
    """num_prefill_checkpoint_blocks of the architecture's state layers in this release (None: not read)."""
    models = kv_table()["state_layers"]["models"]
    entry = next((models[a] for a in facts.model.architectures if a in models), None)
    if entry is None:
        return None
    read = {release_numbers(v): n for v, n in entry["prefill_checkpoint_blocks"].items()}
    number = release_numbers(version)
    below = max((r for r in read if r <= number), default=None)
    above = min((r for r in read if r >= number), default=None)
    if below is None:
        return None
    if above is None or read[below] == read[above]:
        return read[below]  # None where the data says the release decides it in a way not read
    return None


def state_blocks(facts: Facts, serve: ServeMemory, version: str) -> int:
    """Blocks one request holds per state group: 'align' (prefix caching on, the default) 2 + checkpoint blocks,
    'none' 1 (MambaSpec.max_memory_usage_bytes)."""
    table = kv_table()["state_layers"]
    mode = serve.mamba_cache_mode or ("align" if serve.prefix_caching else "none")
    if mode != "align":
        return table["none_blocks"]
    return table["align_blocks"] + (checkpoint_blocks(facts, version) or 0)


def head_size(facts: Facts) -> int:
    """The head size vLLM's model code gives the KV-cache spec (data/kv_memory.yaml head_size_from_hidden)."""
    model = facts.model
    by_hidden = set(kv_table()["head_size_from_hidden"]) & set(model.architectures)
    if by_hidden and not model.is_mla and model.hidden_size and model.num_attention_heads:
        return model.hidden_size // model.num_attention_heads
    return model.head_dim


def _in_flight_tokens(flat, facts: Facts, serve: ServeMemory, release) -> int:
    tokens = serve.max_num_batched_tokens or batch_defaults(flat, release)[0]
    if release_numbers(release.version) >= release_numbers(kv_table()["in_flight_multiplied_from"]):
        return tokens * (max(1, facts.serve.pipeline_parallel_size) + 1)  # async scheduling on the V2 runner
    return tokens


def _null_block_reserved(version: str) -> bool:
    return release_numbers(version) >= release_numbers(kv_table()["null_block_reserved_from"])


def _verdict(plan: KvPlan, budget: int, band: int, max_model_len: int, in_flight: int, reserved: bool) -> str:
    low = judge_fit(plan, budget - band, max_model_len, in_flight, reserved)
    high = judge_fit(plan, budget + band, max_model_len, in_flight, reserved)
    if low.fits:
        return "fits"
    if high.no_memory:
        return "no_memory"
    if not high.fits:
        return "does_not_fit"
    return "within_band"


def _fitting_len(plan: KvPlan, budget: int, max_model_len: int, in_flight: int, reserved: bool) -> int | None:
    fit: Fit = judge_fit(plan, budget, max_model_len, in_flight, reserved)
    return fit.estimated_max_len if not fit.fits and fit.estimated_max_len > 0 else None


def _fitting_utilization(flat, serve: ServeMemory, release, plan: KvPlan, budget: int, band: int, max_model_len: int,
                         in_flight: int, reserved: bool) -> float | None:  # fmt: skip
    """The --gpu-memory-utilization (at most 0.95, in steps of 0.01) whose budget's low edge holds one request, when
    the budget is modelled and the current one does not."""
    if serve.kv_cache_memory_bytes is not None or judge_fit(plan, budget - band, max_model_len, in_flight, reserved).fits:
        return None
    util = serve.gpu_memory_utilization or release_utilization(release, serve)
    total = cuda_total_bytes(flat)  # what vLLM multiplies by the utilization (torch's mem_get_info total)
    for step in range(int(round(util * 100)) + 1, 96):
        if judge_fit(plan, budget + int(total * (step / 100 - util)) - band, max_model_len, in_flight, reserved).fits:
            return step / 100
    return None


def _fitting_tp(flat, facts: Facts, serve: ServeMemory, kinds, release, max_model_len: int) -> int | None:
    """The smallest larger tensor-parallel size (2, 4, 8) at which one request fits the budget's low edge."""
    from dataclasses import replace

    plan = plan_for(flat, facts, serve, kinds, facts.serve.kv_cache_dtype, release, max_model_len=max_model_len)
    if judge_fit(plan, *_low_edge(flat, facts, serve, release),
                 max_model_len, _in_flight_tokens(flat, facts, serve, release), _null_block_reserved(release.version)).fits:
        return None
    for tp in (2, 4, 8):
        if tp <= facts.serve.tensor_parallel_size:
            continue
        wider = replace(facts, serve=replace(facts.serve, tensor_parallel_size=tp))
        plan = plan_for(flat, wider, serve, kinds, facts.serve.kv_cache_dtype, release, max_model_len=max_model_len)
        if judge_fit(plan, *_low_edge(flat, wider, serve, release), max_model_len,
                     _in_flight_tokens(flat, wider, serve, release), _null_block_reserved(release.version)).fits:
            return tp
    return None


def _low_edge(flat, facts: Facts, serve: ServeMemory, release) -> tuple[int]:
    budget, band, *_ = kv_budget(flat, facts, serve, release)
    return (budget - band,)


def _dtype_capacities(flat, facts: Facts, serve, kinds, release, budget, band, max_model_len, in_flight,
                      reserved) -> list[str]:  # fmt: skip
    """Capacity with each smaller KV dtype the release accepts (fp8 and the TurboQuant presets), at the budget's low
    edge: whether one request fits, tokens, concurrency. Whether the dtype also works on this GPU is the selector's and
    the dry run's question (not asked here)."""
    parts = []
    for dtype in ("fp8", *(d for d in release.kv_cache_dtypes if d.startswith("turboquant_"))):
        if dtype == facts.serve.kv_cache_dtype or dtype not in release.kv_cache_dtypes:
            continue
        try:
            plan = plan_for(flat, facts, serve, kinds, dtype, release, max_model_len=max_model_len)
            fit = judge_fit(plan, budget - band, max_model_len, in_flight, reserved)
        except NotImplementedError:  # e.g. TurboQuant's native layers next to sliding-window ones
            parts.append(f"{dtype}: not modelled")
            continue
        parts.append(f"{dtype}: {'fits' if fit.fits else 'does not fit'}, {fit.tokens:,} tokens, {fit.concurrency:.2f}x")
    return parts


def _fp8_outcome(flat, facts: Facts, serve, kinds, release, budget, band, max_model_len, in_flight,
                 reserved) -> bool | None:  # fmt: skip
    """Would an fp8 KV cache fit where this one does not (None when it is already fp8 or not asked)."""
    if facts.serve.kv_cache_dtype.startswith("fp8"):
        return None
    try:
        plan = plan_for(flat, facts, serve, kinds, "fp8", release, max_model_len=max_model_len)
    except NotImplementedError:
        return None
    return judge_fit(plan, budget - band, max_model_len, in_flight, reserved).fits
