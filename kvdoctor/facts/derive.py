"""Facts computed from other facts (kv-cache dtype catalogue, dry-run outcome), and the fact-name registry."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from kvdoctor.model.facts import Facts, GpuFacts, ServeFacts, VersionFacts
from kvdoctor.facts.attention import ATTENTION_FACTS, attention_facts
from kvdoctor.facts.kv_dtypes import kv_dtype_facts
from kvdoctor.vllm_pack.candidates import Candidates, agree, candidates, describe_range

if TYPE_CHECKING:
    from kvdoctor.model.dry_run import DryRunReport

DRYRUN_FACTS = {
    "dryrun.status": "'passed', 'failed' or 'skipped'; unknown when no dry run ran",
    "dryrun.source": "'vllm' (vLLM's real kernels) or 'probe' (kvdoctor's probe kernel)",
    "dryrun.failure_kind": "failure kind of the deciding kernel (the first that did not compile, else a skip for a "
    "changed layout), e.g. bf16_to_fp8e4b15_assert",
    "dryrun.failed_kernel": "name of that deciding kernel",
    "dryrun.innermost": "innermost exception of its failure, 'Type: message'",
    "dryrun.explained": "whether a rule's compile_kind names the failure kind",
}


DERIVED_FROM = {
    "model.dtype": ("model.config_dtype", "gpu.capability"),
    "kv.accepted": ("vllm.version",),
    "attention.backend": ("vllm.version", "gpu.capability", "model.dtype"),
    "attention.error": ("vllm.version", "gpu.capability", "model.dtype"),
    "serve.args_accepted": ("vllm.version",),
    "serve.args_error": ("vllm.version",),
}
"""Facts computed from others: an unknown one is supplied by supplying its unknown inputs (the hint says which)."""


def fact_names() -> set[str]:
    """Every fact name rules may use (env.* names are open-ended)."""
    blank = Facts(gpu=GpuFacts("none"), model=None, versions=VersionFacts(), serve=ServeFacts())
    names = set(blank.flat()) | set(DRYRUN_FACTS)
    names |= set(kv_dtype_facts("auto", Candidates((), exact=False)))
    names |= set(serve_args_facts((), Candidates((), exact=False))) | {"vllm.judged", "vllm.facts_note"}
    names |= set(ATTENTION_FACTS) | set(RUNNER_FACTS)
    return names


def is_fact_name(name: str) -> bool:
    return name in _names() or (name.startswith("env.") and len(name) > 4)


@lru_cache(maxsize=1)
def _names() -> frozenset[str]:
    return frozenset(fact_names())


def derive_kv_facts(facts: Facts) -> dict[str, Any]:
    """Facts that the judged vLLM release (or every candidate release) decides: KV dtype, serve arguments."""
    releases = candidates(facts.versions.vllm)
    judged = facts.versions.vllm or (
        f"(version unknown: {describe_range(r.version for r in releases.releases)})" if releases.releases else None
    )
    return (
        {"vllm.judged": judged, "vllm.facts_note": releases.note}
        | pinned_stack_facts(facts, releases)
        | kv_dtype_facts(facts.serve.kv_cache_dtype, releases)
        | serve_args_facts(facts.serve.argv, releases)
        | attention_facts(facts, releases)
        | runner_facts(facts, releases)
    )


RUNNER_FACTS = ("vllm.model_runner", "vllm.runner_bug", "vllm.runner_error")


def runner_facts(facts: Facts, releases: Candidates) -> dict[str, Any]:
    """Which GPU model runner (V1/V2) the release uses for this model and flags, and the runner bug it hits."""
    model = facts.model
    if model is None or not releases.releases:
        return dict.fromkeys(RUNNER_FACTS)
    env = dict(facts.serve.env).get("VLLM_USE_V2_MODEL_RUNNER")
    unsupported = ("ngram/ngram_gpu speculative decoding",) if "ngram" in (facts.serve.speculative_config or "") else ()

    def choose(release):
        return release.model_runner(
            architectures=model.architectures, is_moe=model.is_moe, is_hybrid=model.is_hybrid, env=env,
            v2_unsupported_features=unsupported, kv_cache_dtype=facts.serve.kv_cache_dtype,
        )

    choices = {r.version: choose(r) for r in releases.releases}
    pick = lambda attr: agree(releases.releases, lambda r: attr(choices[r.version])).value  # noqa: E731
    return {
        "vllm.model_runner": pick(lambda c: c.runner),
        "vllm.runner_bug": pick(lambda c: c.bugs[0].message if c.bugs else ("none" if c.runner else None)),
        "vllm.runner_error": pick(lambda c: c.error or ("none" if c.runner else None)),
    }


def pinned_stack_facts(facts: Facts, releases: Candidates) -> dict[str, Any]:
    """For a what-if release (not the installed one): the torch, Triton and FlashInfer its wheel pins. FlashInfer
    is a hard dependency of vLLM's CUDA wheel, so its presence is known once the release is."""
    if not releases.exact or facts.versions.vllm_source == "installed":
        return {}
    pins = releases.releases[0].pins

    def exact(name: str) -> str | None:
        spec = pins.get(name) or ""
        return spec[2:] if spec.startswith("==") and "," not in spec else None

    found = {
        "torch.version": facts.versions.torch or exact("torch"),
        "triton.version": exact("triton") if facts.versions.triton is None else facts.versions.triton,
        "flashinfer.version": exact("flashinfer-python"),
        "flashinfer.installed": "flashinfer-python" in pins,
    }
    return {k: v for k, v in found.items() if v is not None}


def serve_args_facts(argv: tuple[str, ...], releases: Candidates) -> dict[str, Any]:
    """serve.args_accepted/_error/_closest/_rejected_by: what each release's own parser makes of the arguments."""
    from kvdoctor.vllm_pack.serve_parser import judge_argv

    verdicts = {r.version: judge_argv(list(argv), r.serve_args, r.allow_abbrev) for r in releases.releases}
    rejected = [version for version, verdict in verdicts.items() if verdict.error]
    newest_error = next((verdicts[v] for v in reversed(rejected)), None)
    accepted = agree(releases.releases, lambda r: verdicts[r.version].error is None).value
    return {
        "serve.args_accepted": accepted,
        "serve.args_error": newest_error.error if newest_error else None,
        "serve.args_closest": newest_error.closest if newest_error else None,
        "serve.args_rejected_by": describe_range(rejected) if verdicts else None,
        "serve.args_accepted_by": describe_range([v for v in verdicts if v not in rejected]) if verdicts else None,
    }


def derive_dryrun_facts(dry_run: DryRunReport | None, known_kinds: set[str]) -> dict[str, Any]:
    """Dry-run facts of the dry run's deciding kernel; all unknown when there was no dry run."""
    if dry_run is None:
        return {name: None for name in DRYRUN_FACTS}
    deciding = dry_run.deciding_kernel
    kind = dry_run.failure_kind
    return {
        "dryrun.status": str(dry_run.status),
        "dryrun.source": "probe" if dry_run.used_probe else "vllm",
        "dryrun.failure_kind": kind,
        "dryrun.failed_kernel": deciding.kernel if deciding else None,
        "dryrun.innermost": deciding.failure.innermost if deciding else None,
        "dryrun.explained": (kind in known_kinds) if kind else None,
    }
