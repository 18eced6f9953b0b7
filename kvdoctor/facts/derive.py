"""Facts computed from other facts: what the judged release (or its candidates) decides, and the dry-run outcome.
Their names are declared in data/fact_names.yaml."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from kvdoctor.data.fact_names import fact_registry
from kvdoctor.facts.architecture import architecture_facts
from kvdoctor.facts.attention import attention_facts
from kvdoctor.facts.kv_dtypes import kv_dtype_facts
from kvdoctor.facts.quantization import quantization_facts
from kvdoctor.facts.memory import memory_facts
from kvdoctor.model.facts import ANY_RELEASE, Facts
from kvdoctor.vllm_pack.candidates import Candidates, agree, candidates, describe_range

if TYPE_CHECKING:
    from kvdoctor.model.dry_run import DryRunReport


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
        | serve_args_facts(facts.serve.argv, _argument_releases(facts, releases), facts.versions.vllm_build)
        | attention_facts(facts, releases)
        | runner_facts(facts, releases)
        | memory_facts(facts, releases)
        | quantization_facts(facts, releases)
        | architecture_facts(facts, releases)
    )


def runner_facts(facts: Facts, releases: Candidates) -> dict[str, Any]:
    """Which GPU model runner (V1/V2) the release uses for this model and flags, and the runner bug it hits."""
    model = facts.model
    if model is None or not releases.releases:
        return dict.fromkeys(fact_registry().names(produced_by="runner"))
    env = dict(facts.serve.env).get("VLLM_USE_V2_MODEL_RUNNER")
    from kvdoctor.vllm_pack.runner import model_runner, v2_unsupported_features  # reads runner_bugs.yaml on import

    unsupported = v2_unsupported_features(facts.serve)

    def choose(release):
        return model_runner(
            release,
            architectures=model.architectures, is_moe=model.is_moe, is_hybrid=model.is_hybrid, env=env,
            v2_unsupported_features=unsupported, kv_cache_dtype=facts.serve.kv_cache_dtype,
            layer_features=("sliding_window",) if model.sliding_window else (),
        )

    choices = {r.version: choose(r) for r in releases.releases}
    pick = lambda attr: agree(releases.releases, lambda r: attr(choices[r.version])).value  # noqa: E731
    return {
        "vllm.model_runner": pick(lambda c: c.runner),
        "vllm.runner_bug": pick(lambda c: c.bugs[0].message if c.bugs else ("none" if c.runner else None)),
        "vllm.runner_error": pick(lambda c: c.error or ("none" if c.runner else None)),
    }


# the pack loader has stripped '==' from exact pins: a bare version is exact, a range keeps its operators
_EXACT_PIN = re.compile(r"[0-9][0-9A-Za-z.+_-]*")


def exact_pin(spec: str | None) -> str | None:
    """The version an exact pin names ('2.11.0'), or None for a range ('~=3.8.0', '>=2.9,<3') or no pin."""
    return spec if spec and _EXACT_PIN.fullmatch(spec) else None


def pinned_stack_facts(facts: Facts, releases: Candidates) -> dict[str, Any]:
    """For a what-if release (not the installed one): the torch, Triton and FlashInfer its wheel pins. FlashInfer
    is a hard dependency of vLLM's CUDA wheel, so its presence is known once the release is."""
    if facts.versions.vllm_source == "installed":
        return {}
    # what the user stated of the target image (--target-package flashinfer=...) wins over the wheel's pins
    stated = facts.targets.value("flashinfer") == "present" if facts.targets.is_stated("flashinfer") else None
    if not releases.exact:  # version unknown: the image's FlashInfer is known when every candidate pins it
        pinned = agree(releases.releases, lambda r: "flashinfer-python" in r.pins).value if releases.releases else None
        installed = stated if stated is not None else pinned
        return {} if installed is None else {"flashinfer.installed": installed}
    pins = releases.releases[0].pins
    found = {
        "torch.version": facts.versions.torch or exact_pin(pins.get("torch")),
        "triton.version": exact_pin(pins.get("triton")) if facts.versions.triton is None else facts.versions.triton,
        "flashinfer.version": exact_pin(pins.get("flashinfer-python")) if stated is not False else None,
        # before 0.11 FlashInfer was no requirement of the wheel (the image may or may not ship it): unknown
        "flashinfer.installed": stated if stated is not None else (True if "flashinfer-python" in pins else None),
    }
    return {k: v for k, v in found.items() if v is not None}


def _argument_releases(facts: Facts, releases: Candidates) -> Candidates:
    """The releases the arguments are judged against: with an environment's vLLM of unknown age, every release whose
    parser kvdoctor read (0.4.2 on), so that a flag only older releases accept is undecided rather than refused; for
    a release the pack did not read between two it did (0.14.0), those two: what both refuse, it refuses."""
    if facts.versions.vllm is not None and not releases.releases:
        from kvdoctor.vllm_pack.candidates import releases_around

        around = tuple(r for r in releases_around(facts.versions.vllm) if r.serve_args)
        if len(around) == 2:
            return Candidates(around, exact=False, note=f"judged by {around[0].version} and {around[1].version}, the "
                                                        "releases kvdoctor read on either side")
        return releases
    if facts.versions.vllm is not None or facts.versions.vllm_source != ANY_RELEASE:
        return releases
    from kvdoctor.vllm_pack.release import load_release
    from kvdoctor.vllm_pack.store import pack_releases

    read = tuple(r for v in pack_releases() if (r := load_release(v)) is not None and r.serve_args)
    return Candidates(read, exact=False, note=releases.note) if read else releases


def _json_dicts(version: str) -> bool:
    """Whether this release's dict-valued options take JSON only (0.10.0+; 0.9 still read key=value)."""
    from packaging.version import Version

    return Version(version) >= Version("0.10.0")


def serve_args_facts(argv: tuple[str, ...], releases: Candidates, own_build: str | None = None) -> dict[str, Any]:
    """serve.args_accepted/_error/_closest/_rejected_by: what each release's own parser makes of the arguments. On an
    image's own build of vLLM (``own_build``), options no release has leave it undecided (serve.args_undecided) where
    some release refuses nothing else: the build may add them."""
    from kvdoctor.vllm_pack.option_values import own_option_releases
    from kvdoctor.vllm_pack.serve_parser import judge_argv

    verdicts = {r.version: judge_argv(list(argv), r.serve_args, r.allow_abbrev, r.flexible_parser,
                                      json_dicts=_json_dicts(r.version)) for r in releases.releases}
    rejected = [version for version, verdict in verdicts.items() if verdict.error]
    newest_error = next((verdicts[v] for v in reversed(rejected)), None)
    accepted = agree(releases.releases, lambda r: verdicts[r.version].error is None).value
    errors: dict[str, list[str]] = {}
    for version in rejected:
        errors.setdefault(verdicts[version].error, []).append(version)
    error = newest_error.error if newest_error else None
    closest = newest_error.closest if newest_error else None
    if closest and newest_error.ambiguous and own_option_releases(newest_error.ambiguous):
        closest = None  # an option of its own in other releases (`--device` to 0.9.2) is no spelling of either match
    if len(errors) > 1:  # the candidate releases refuse different flags: name each with the releases refusing it
        error = "; ".join(f"{text} ({describe_range(versions)})" for text, versions in reversed(errors.items()))
    undecided = _options_of_a_build(verdicts, own_build) if accepted is False and not closest else None
    taken = taken_option_facts([r for r in releases.releases if not verdicts[r.version].error],
                               {v: verdict.taken for v, verdict in verdicts.items()})
    # the releases disagree on the parse, but those whose parser accepts the arguments all stop on a value: every
    # release the image may run stops, each its own way
    stops_everywhere = accepted is None and bool(rejected) and taken["serve.value_refused"] is not None
    return {
        "serve.args_accepted": None if undecided else accepted,
        "serve.args_undecided": undecided,
        "serve.args_error": error,
        "serve.args_closest": closest,
        "serve.args_rejected_by": describe_range(rejected) if verdicts else None,
        "serve.args_accepted_by": describe_range([v for v in verdicts if v not in rejected]) if verdicts else None,
        "serve.args_stop_everywhere": stops_everywhere if verdicts and not undecided else None,
    } | taken


def _options_of_a_build(verdicts: dict, own_build: str | None) -> str | None:
    """Why the arguments are undecided on an image's own build: the options no release kvdoctor read has, and the
    releases that refuse nothing else (a build on one of them that adds those options starts); None otherwise."""
    if not own_build:
        return None
    from kvdoctor.vllm_pack.candidates import all_serve_options

    known = all_serve_options()
    unknown: list[str] = []
    fitting = []
    for version, verdict in verdicts.items():
        text = verdict.error or ""
        if not text.startswith(UNRECOGNIZED):
            continue
        options = [w.split("=", 1)[0] for w in text[len(UNRECOGNIZED):].split() if w.startswith("--")]
        foreign = [o for o in options if o not in known and "--" + o[2:].replace("_", "-") not in known]
        if options and foreign == options:
            fitting.append(version)
            unknown += [o for o in foreign if o not in unknown]
    if not fitting:
        return None
    return (f"{' '.join(unknown)}: in no vLLM release kvdoctor read, so {own_build} may carry its own build of "
            f"vLLM that adds {'it' if len(unknown) == 1 else 'them'} (a fork); on {describe_range(fitting)} nothing "
            "else is refused (decided by --vllm-version naming the release it runs, or by its own `vllm serve --help`)")


UNRECOGNIZED = "unrecognized arguments:"


def taken_option_facts(accepting: list, taken: dict[str, tuple]) -> dict[str, Any]:
    """serve.option_reassigned*/value_refused*: across the releases whose parser accepts the arguments, an option of
    other releases that the parser reads as the prefix of another (`--device` as `--device-ids`), and a value the
    option's parser keeps but vLLM refuses when it builds its configuration. Decided only when every accepting release
    agrees (the first such option or value)."""
    from kvdoctor.vllm_pack.option_values import own_option_releases, refused_value

    def reassigned(options) -> tuple[str, str] | None:
        for option in options:
            if option.abbreviated and (own := own_option_releases(option.typed)):
                values = "".join(" " + value for value in option.values)
                return f"`{option.typed}{values}` is read as `{option.option}{values}`", describe_range(own)
        return None

    def refused(options):
        return next((r for option in options if (r := refused_value(option.option, option.values))), None)

    moved = agree(accepting, lambda r: reassigned(taken[r.version])).value
    refusal = agree(accepting, lambda r: refused(taken[r.version])).value
    judged = describe_range(r.version for r in accepting)
    return {
        "serve.option_reassigned": moved[0] if moved else None,
        "serve.option_own_in": moved[1] if moved else None,
        "serve.option_reassigned_by": judged if moved else None,
        "serve.value_refused": f"{refusal.option} {refusal.value}" if refusal else None,
        "serve.value_refusal": refusal.refusal if refusal else None,
        "serve.value_takes": refusal.takes if refusal else None,
        "serve.value_refused_where": refusal.where if refusal else None,
        "serve.value_refused_by": judged if refusal else None,
    }


def derive_dryrun_facts(dry_run: DryRunReport | None, known_kinds: set[str]) -> dict[str, Any]:
    """Dry-run facts of the dry run's deciding kernel; all unknown when there was no dry run."""
    if dry_run is None:
        return dict.fromkeys(fact_registry().names(produced_by="dryrun"))
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
