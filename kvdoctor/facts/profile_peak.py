"""The torch peak of vLLM's profile run (gpu_worker.determine_available_memory -> profile_run): the dummy forward over
max_num_batched_tokens, then the dummy sampler over one logit row per request, with what the forward leaves held
(the fused-MoE workspace) under both. Numbers, rules and their sources: data/kv_memory.yaml (budget.profile_sampler,
budget.moe_workspace); docs/fit.md "The profile run's peak"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvdoctor.model.facts import Facts


@dataclass(frozen=True)
class ProfilePeak:
    """The profile run's modelled torch peak and what it is made of (bytes)."""

    total: int
    forward: int
    """The dummy forward's own tensors over max_num_batched_tokens (torch.compile's share included)."""
    sampler: int
    """The dummy sampler's tensors plus the forward's hidden states it runs beside."""
    workspace: int
    """The fused-MoE workspaces (0 for a dense model)."""
    workspace_held: bool
    """Kept after the forward, so under the sampler too."""
    runner: str
    """'V1' or 'V2': the model runner whose sampler ran; 'pooling' where the dummy pooler ran instead."""
    rows: int
    """Logit rows the dummy sampler ran over (one per dummy request)."""

    def describe(self, vocab: int) -> str:
        """One clause for the budget's source: which part sets the peak."""
        gib = 2**30
        held = f" over the held MoE workspace ({self.workspace / gib:.2f} GiB)" if self.workspace_held and \
            self.workspace else ""
        if self.sampler >= self.forward and self.runner == "pooling":
            return f"the peak is the dummy pooler's ({self.sampler / gib:.2f} GiB){held}"
        if self.sampler >= self.forward:
            return (f"the peak is the dummy sampler's ({self.runner} runner, {self.rows:,} x {vocab:,} logits: "
                    f"{self.sampler / gib:.2f} GiB){held}")
        return f"the peak is the dummy forward's ({self.forward / gib:.2f} GiB){held}"


def profile_peak(flat, facts: Facts, table: dict[str, Any], release, tokens: int, seqs: int, eager: bool,
                 max_model_len: int | None = None, block_size: int | None = None,
                 pooling: bool = False) -> ProfilePeak:  # fmt: skip
    """Torch's peak increase over the profile run: held + max(forward, hidden states + sampler). The forward grows
    under torch.compile (compiled_activation_share); the sampler runs outside the compiled graph. A pooling model's
    dummy pooler replaces the sampler: its token-level output and normalised copy beside the hidden states."""
    m = facts.model
    tp = max(1, facts.serve.tensor_parallel_size)
    hidden = m.hidden_size or 0
    inter = (flat.get("model.intermediate_size") or 0) // tp
    forward = tokens * (table["activation_bytes_per_token_hidden"] * hidden
                        + table["activation_bytes_per_token_intermediate"] * inter)
    forward = max(forward, mla_profile_bytes(flat, facts, table, tokens, seqs, max_model_len, block_size))
    forward = int(forward * (1 if eager else 1 + table["compiled_activation_share"]))
    workspace = moe_workspace_bytes(flat, table, moe_rows(facts, table, release, tokens), hidden, tp)
    rows = min(tokens, seqs)
    # profile_run keeps the forward's hidden states (tokens x hidden, activation dtype) while the sampler runs
    hidden_states = tokens * hidden * table["moe_workspace"]["dtype_bytes"]
    if pooling:
        sampler = hidden_states * (1 + table["pooling_runner"]["pooler_hidden_copies"])
    else:
        sampler = hidden_states + sampler_bytes(flat, facts, table, release, rows)
    held = workspace_held(facts, table, release)
    total = workspace + max(forward, sampler) if held else max(forward + workspace, sampler)
    runner = "pooling" if pooling else profiling_runner(facts, release)
    return ProfilePeak(total, forward, sampler, workspace, held, runner, rows)


def mla_profile_bytes(flat, facts: Facts, table: dict[str, Any], tokens: int, seqs: int, max_model_len: int | None,
                      block_size: int | None) -> int:  # fmt: skip
    """The forward at an MLA layer of the profile run (no attention metadata): the worst case of the chunked
    context's up-projection it allocates (chunked_prefill_workspace_size x heads per rank x (qk_nope + v_head)) beside
    the layer's live tensors per token: residual and normed input, q, the latent with its rope part and the output
    (budget.mla_profile). A max_model_len not yet known counts as long (the 64k cap)."""
    mla = flat.get("model.mla_layout")
    heads = facts.model.num_attention_heads
    if not mla or not heads:
        return 0
    entry, dtype = table["mla_profile"], table["moe_workspace"]["dtype_bytes"]
    block = block_size or entry["default_block_size"]
    long = 8 * max_model_len if max_model_len else entry["workspace_cap_tokens"]
    rows = max(min(max(long, 4 * seqs * block), entry["workspace_cap_tokens"]), seqs * block)
    per_rank = -(-heads // max(1, facts.serve.tensor_parallel_size))
    nope, rope, v = mla["qk_nope_head_dim"], mla["qk_rope_head_dim"], mla["v_head_dim"]
    live = tokens * (2 * (facts.model.hidden_size or 0) + per_rank * (nope + rope + v) + mla["kv_lora_rank"] + rope)
    return (rows * per_rank * (nope + v) + live) * dtype


def moe_rows(facts: Facts, table: dict[str, Any], release, tokens: int) -> int:
    """The tokens one fused-MoE call sizes its workspaces for: all of them, or VLLM_FUSED_MOE_CHUNK_SIZE where the
    release chunks (a release between a chunking and a non-chunking one: no chunking, the larger workspace)."""
    entry = table["moe_workspace"]
    chunks = read_neighbours(entry["chunk_tokens"], release.version)
    if any(c is None for c in chunks):
        return tokens
    env = dict(facts.serve.env).get(entry["chunk_env"], "").strip()
    chunk = int(env) if env.isdigit() and int(env) > 0 else max(chunks)
    return min(tokens, chunk)


def moe_workspace_bytes(flat, table: dict[str, Any], tokens: int, hidden: int, tp: int) -> int:
    """The fused-MoE experts' workspaces for `tokens` rows (TritonExperts.workspace_shapes: (M, topk, max(inter, K))
    and (M, topk, max(2 x inter, K)) in the activation dtype; no chunking of M in the releases read)."""
    moe = flat.get("model.moe_layout")
    if not moe or not moe.get("top_k"):
        return 0
    inter = moe["expert_width"] // max(1, tp)
    per_token = moe["top_k"] * (max(inter, hidden) + max(2 * inter, hidden))
    return int(tokens * per_token * table["moe_workspace"]["dtype_bytes"])


def workspace_held(facts: Facts, table: dict[str, Any], release) -> bool:
    """Does the release keep the fused-MoE workspace after the forward (a shared buffer or its workspace manager), for
    this model's quantization method?"""
    from kvdoctor.base.versions import release_numbers

    entry = table["moe_workspace"]
    method = facts.model.quant_method if facts.model.quant_method not in (None, "none") else facts.serve.quantization
    return (release_numbers(release.version) >= release_numbers(entry["held_from"])
            and method not in entry["not_held_for_methods"])


def sampler_bytes(flat, facts: Facts, table: dict[str, Any], release, rows: int) -> int:
    """Bytes the dummy sampler holds at its peak: rows x vocabulary x the bytes live per logit in the runner that
    profiles (V1: a float32 copy, top-k/top-p buffers or a sort, probabilities and noise; V2: a float32 copy), and
    V1's triton row buffer."""
    vocab = flat.get("model.vocab_size") or 0
    return int(rows * vocab * _bytes_per_logit(facts, table, release)) + _row_buffer_bytes(flat, facts, table, release,
                                                                                           rows, vocab)


def _row_buffer_bytes(flat, facts: Facts, table: dict[str, Any], release, rows: int, vocab: int) -> int:
    from kvdoctor.base.versions import release_numbers

    entries = table["profile_sampler"]
    sms = entries["streaming_multiprocessors"].get(flat.get("gpu.name"))
    if (not sms or profiling_runner(facts, release) != "V1"
            or release_numbers(release.version) < release_numbers(entries["triton_row_buffer_from"])):
        return 0
    programs = min(sms, rows)
    return min(1 << (programs - 1).bit_length(), sms) * vocab * 4


def sampler_band_bytes(flat, facts: Facts, table: dict[str, Any], release, rows: int) -> int:
    """What the install decides beyond sampler_bytes: 0.10.2 sorts (more bytes) when flashinfer is not installed."""
    entries = table["profile_sampler"]
    far = entries["install_dependent"].get(release.version)
    if far is None or profiling_runner(facts, release) != "V1" or _flashinfer_opted_in(facts):
        return 0
    return int(rows * (flat.get("model.vocab_size") or 0) * max(0, far - _bytes_per_logit(facts, table, release)))


def _bytes_per_logit(facts: Facts, table: dict[str, Any], release) -> int:
    entries = table["profile_sampler"]
    runner = profiling_runner(facts, release)
    value = max(read_neighbours(entries[f"{runner.lower()}_bytes_per_logit"], release.version))
    if runner == "V1" and _flashinfer_opted_in(facts):
        return min(value, entries["flashinfer_bytes_per_logit"])
    return value


def _flashinfer_opted_in(facts: Facts) -> bool:
    return dict(facts.serve.env).get("VLLM_USE_FLASHINFER_SAMPLER", "").strip() == "1"


def profiling_runner(facts: Facts, release) -> str:
    """'V1' or 'V2': the GPU model runner the release picks for this model (vllm_pack/runner.py, asked of vLLM's own
    use_v2_model_runner); undecided counts as V1, whose sampler holds more."""
    from kvdoctor.vllm_pack.runner import model_runner, v2_unsupported_features

    m = facts.model
    choice = model_runner(release, architectures=m.architectures, is_moe=m.is_moe, is_hybrid=m.is_hybrid,
                          env=dict(facts.serve.env).get("VLLM_USE_V2_MODEL_RUNNER"),
                          v2_unsupported_features=v2_unsupported_features(facts.serve))
    return "V2" if choice.runner == "V2" else "V1"


def read_neighbours(entries: dict[str, Any], version: str) -> list[Any]:
    """The answers of the read releases around `version`: its own where read, else the nearest read below and above
    (the last read one past the end, the first before the start); callers take the larger."""
    from kvdoctor.base.versions import release_numbers

    read = sorted((release_numbers(v), value) for v, value in entries.items())
    number = release_numbers(version)
    same = [value for r, value in read if r == number]
    if same:
        return same
    below = [value for r, value in read if r < number][-1:]
    above = [value for r, value in read if r > number][:1]
    return below + above
