"""The facts stage: from command-line options to one frozen Facts object."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from kvdoctor.inputs.validate import validate_check_inputs
from kvdoctor.base.errors import UsageError
from kvdoctor.model.facts import ANY_RELEASE, Facts, GpuFacts, ModelFacts, ServeFacts, VersionFacts
from kvdoctor.facts.probes.serve_args import parse_serve_command


@dataclass(frozen=True)
class CheckOptions:
    """What the user asked `kvdoctor check` (flags win over a pasted serve command only when they agree)."""

    model: str | None = None
    serve_argv: tuple[str, ...] = ()
    """A pasted `vllm serve ...` command (what followed `--`)."""
    loose_flags: tuple[str, ...] = ()
    """Tokens before `--` that are not kvdoctor's own flags: accepted only where they are vLLM serve flags."""
    own_flags: tuple[str, ...] = ()
    """kvdoctor check's own option strings, to name the right one when a flag is mistyped or misplaced."""
    kv_cache_dtype: str | None = None
    dtype: str | None = None
    attention_backend: str | None = None
    tensor_parallel_size: int | None = None
    gpu: str | None = None
    vllm_version: str | None = None
    vllm_source: str | None = None
    revision: str | None = None
    offline: bool = False
    torch_check: bool = False
    """Also ask torch.cuda and note where it disagrees with NVML (imports torch: seconds)."""
    cache_dir: Path | None = None
    resolve_kernels: bool = True
    """Look up which vLLM kernel files the dry run would compile (False under --no-compile: no wheel lookups)."""
    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    skip_model: str | None = None
    """Why the model is not read (scan: it is on a volume or in the image): its facts stay unknown."""
    target_packages: tuple[str, ...] = ()
    """NAME=present|absent items stating the target image's modelled packages (--target-package; the command adds
    KVDOCTOR_TARGET_PACKAGES): kvdoctor/model/modelled.py."""
    any_release: bool = False
    """The target's vLLM is an environment's of unknown age (scan: vllm serve run from a venv, no image): with the
    version unknown, arguments that a release kvdoctor read only in part accepts are not taken as refused."""
    own_build: str | None = None
    """With any_release: what may carry its own build of vLLM, in words ("image X": another project's image, the host's
    choice, a fork's; "the vLLM source tree at DIR" in the scanned checkout), whose options no release kvdoctor read
    has are then undecided, not refused."""
    serves: bool = False
    """The command is a deployment's (scan), even one that is only the image's entrypoint: without a model in it,
    vLLM serves its parser's default model. A command pasted to check without one is refused (likely a slip)."""
    local_packages: bool = True
    """Whether the target is this machine; False (scan: the image's packages and the node's GPU are unknown) reads
    no installed vLLM or FlashInfer, and no local GPU when --gpu names none."""


def collect_facts(options: CheckOptions) -> Facts:
    """Probe everything the rules need; raises KvdoctorError subclasses on bad input."""
    from kvdoctor.inputs.flags import refuse_misplaced_flags
    from kvdoctor.model.modelled import parse_target_packages

    targets = parse_target_packages(options.target_packages)
    loose = refuse_misplaced_flags(options.serve_argv, options.loose_flags, options.own_flags)
    versions = _version_facts(options)
    from kvdoctor.vllm_pack.on_the_fly import ensure_for_versions

    ensure_for_versions(versions)  # a vLLM newer than the pack: its facts built on the fly when possible
    argv = _as_vllm_reads_it([*options.serve_argv, *loose], versions.vllm)
    command = parse_serve_command(argv, options.environ)
    serve = _merge_flags(command.serve, options)
    model_arg = _one_model(options.model, command.model)
    if not model_arg and options.serves:  # a deployment's vLLM serves its parser's default model
        model_arg = release_default_model(versions.vllm)
    if not model_arg:
        raise UsageError(
            "nothing to judge: no model given",
            "pass --model MODEL (a directory, a config.json or a Hugging Face id), or paste the command after `--`: "
            "kvdoctor check --gpu A100 -- vllm serve MODEL ...",
        )
    # a target that is not this machine and names no GPU: the GPU is unknown, not the local one
    gpu = _gpu_facts(options.gpu, options.torch_check) if options.gpu or options.local_packages else GpuFacts("none")
    model = _model_facts(model_arg, options, gpu, serve, versions.vllm) if not options.skip_model else None
    memory = _memory_probe(model_arg, model, options)
    return Facts(gpu=gpu, model=model, versions=versions, serve=serve, derived=memory, targets=targets)


def _memory_probe(model_arg: str, model: ModelFacts | None, options: CheckOptions) -> dict:
    """The checkpoint's memory facts (length keys, rope scaling, layer kinds, weights' bytes): probes/model_memory."""
    from kvdoctor.facts.probes.model_memory import probe_model_memory
    from kvdoctor.facts.probes.model_source import locate_config, offline_requested

    offline = offline_requested(options.offline)
    location = None
    if model is not None:  # found a moment ago: a local file, the HF cache, or kvdoctor's own download
        download_dir = options.cache_dir / "hf" if options.cache_dir else None
        location = locate_config(model_arg, revision=options.revision, offline=offline, download_dir=download_dir)
    return probe_model_memory(model, location.path if location else None, location.model_dir if location else None,
                              offline=offline, cache_dir=options.cache_dir, revision=options.revision)


def _as_vllm_reads_it(tokens: list[str], vllm_version: str | None) -> list[str]:
    """Abbreviated or `_`-spelt options spelt out as the release's parser resolves them, word by word: a word every
    candidate release spells the same way is spelt so, any other stays as typed (serve.args_* say which releases
    refuse it), so one word the releases disagree on leaves the others read."""
    if not any(t.startswith("--") for t in tokens):
        return tokens
    from kvdoctor.vllm_pack.candidates import candidates
    from kvdoctor.vllm_pack.serve_parser import canonical_argv

    spellings = [canonical_argv(tokens, r.serve_args, r.allow_abbrev, r.flexible_parser)
                 for r in candidates(vllm_version).releases]  # fmt: skip
    if not spellings:
        return tokens
    return [words[0] if len(set(words)) == 1 and not _own_option_elsewhere(typed, words[0]) else typed
            for typed, *words in zip(tokens, *spellings)]


def _own_option_elsewhere(typed: str, spelt: str) -> bool:
    """Whether an option the parser spells out as a longer one is an option of its own in other releases (`--device`
    of 0.4.2-0.9.2, `--device-ids` to 0.24.0's parser): kept as typed, so serve.option_reassigned can say so."""
    if typed == spelt or not typed.startswith("--"):
        return False
    from kvdoctor.vllm_pack.candidates import all_serve_options

    return typed.partition("=")[0].partition(".")[0] in all_serve_options()


def release_default_model(version: str | None) -> str | None:
    """The model `vllm serve` serves when its command names none: the `--model` default of that release's parser
    (facebook/opt-125m to 0.9.2, Qwen/Qwen3-0.6B from 0.10.2), or of every candidate release when they agree."""
    from kvdoctor.vllm_pack.candidates import candidates, releases_around

    releases = candidates(version).releases or releases_around(version)
    defaults = {getattr(r.serve_args.get("--model"), "default", None) for r in releases}
    return defaults.pop() if len(defaults) == 1 else None


def _one_model(flag: str | None, pasted: str | None) -> str | None:
    if flag and pasted and flag != pasted:
        raise UsageError(f"conflicting models: --model {flag!r} but the serve command serves {pasted!r}")
    return flag or pasted


def _merge_flags(serve: ServeFacts, options: CheckOptions) -> ServeFacts:
    overrides = {
        "kv_cache_dtype": options.kv_cache_dtype,
        "dtype": options.dtype,
        "attention_backend": options.attention_backend.upper() if options.attention_backend else None,
        "tensor_parallel_size": options.tensor_parallel_size,
    }
    defaults = ServeFacts()
    changes = {}
    for name, value in overrides.items():
        if value is None:
            continue
        pasted = getattr(serve, name)
        if pasted != getattr(defaults, name) and pasted != value:
            raise UsageError(f"conflicting values for {name}: {value!r} here, {pasted!r} in the serve command")
        changes[name] = value
    validate_check_inputs(dtype=options.dtype, tensor_parallel_size=options.tensor_parallel_size)
    if options.attention_backend:
        changes["attention_backend_source"] = "--attention-backend"
    flag_tokens = [(f"--{name.replace('_', '-')}", str(v)) for name, v in overrides.items() if v is not None]
    changes["argv"] = serve.argv + tuple(t for pair in flag_tokens for t in pair)
    return replace(serve, **changes)


def _gpu_facts(target: str | None, torch_check: bool) -> GpuFacts:
    if target is not None:
        from kvdoctor.data.gpus import resolve_gpu_target

        return GpuFacts("target", (resolve_gpu_target(target),))
    from kvdoctor.facts.probes.gpu import probe_gpu

    return probe_gpu(cross_check=torch_check)


def _version_facts(options: CheckOptions) -> VersionFacts:
    from kvdoctor.facts.probes.versions import probe_versions, version_of_source

    from kvdoctor.facts.probes.vllm_sources import source_for_version

    versions = probe_versions()
    if not options.local_packages:
        versions = replace(versions, vllm=None, vllm_source=None, flashinfer=None)
    installed = "installed" if versions.vllm else None
    validate_check_inputs(vllm_version=options.vllm_version, vllm_source=options.vllm_source)
    if options.vllm_source:
        version = version_of_source(Path(options.vllm_source))
        return replace(versions, vllm=version, vllm_source="--vllm-source", vllm_kernels=options.vllm_source)
    if options.vllm_version:
        if options.vllm_version == versions.vllm:
            kernels = installed
        elif not options.resolve_kernels:
            kernels = None
        else:
            kernels = source_for_version(options.vllm_version, options.cache_dir)
        return replace(versions, vllm=options.vllm_version, vllm_source="--vllm-version", vllm_kernels=kernels)
    if options.any_release and versions.vllm is None:
        return replace(versions, vllm_source=ANY_RELEASE, vllm_kernels=installed, vllm_build=options.own_build)
    return replace(versions, vllm_kernels=installed)


def _model_facts(model: str, options: CheckOptions, gpu: GpuFacts, serve: ServeFacts,
                 vllm_version: str | None) -> ModelFacts:
    from kvdoctor.facts.probes.model_config import read_model_facts
    from kvdoctor.facts.probes.model_dtype import resolve_model_dtype
    from kvdoctor.facts.probes.model_source import locate_config, offline_requested

    download_dir = options.cache_dir / "hf" if options.cache_dir else None
    location = locate_config(
        model, revision=options.revision, offline=offline_requested(options.offline), download_dir=download_dir
    )
    facts = read_model_facts(location)
    weakest = gpu.weakest
    capability = weakest.capability if weakest else None
    from_pack = _dtype_from_releases(facts, serve.dtype, capability, vllm_version, weakest.name if weakest else None)
    if from_pack is not None:
        fixes = () if from_pack[2] is None else tuple(
            dtype for dtype in DTYPE_CHOICES if dtype != serve.dtype and (answer := _dtype_from_releases(
                facts, dtype, capability, vllm_version, weakest.name)) is not None and answer[2] is None)
        return replace(facts, dtype=from_pack[0], dtype_note=from_pack[1], dtype_error=from_pack[2], dtype_fixes=fixes)
    unread = _dtype_not_read(vllm_version)
    if unread is not None:  # the judged release's own resolution was not read: never kvdoctor's reading instead
        return replace(facts, dtype=None, dtype_note=unread, dtype_undecided=unread)
    dtype, note = resolve_model_dtype(facts.config_dtype, serve.dtype, capability)
    return replace(facts, dtype=dtype, dtype_note=note)


DTYPE_CHOICES = ("auto", "float16", "bfloat16", "float32")
"""The --dtype values a refused dtype's fix is asked among (vLLM's aliases half / float name the same)."""


def _dtype_not_read(vllm_version: str | None) -> str | None:
    """Why the judged release's dtype resolution is unknown (a named release the pack lacks, or holds without its
    dtype resolution: the builder's reason), or None when every candidate release holds it."""
    from kvdoctor.vllm_pack.candidates import candidates, describe_range
    from kvdoctor.vllm_pack.store import pack_releases

    remedy = "name a release it read with --vllm-version (docs/vllm-pack.md)"
    judged = candidates(vllm_version)
    if vllm_version is not None and not judged.releases:
        return f"kvdoctor did not read vLLM {vllm_version} (it read {describe_range(pack_releases())}); {remedy}"
    for release in judged.releases:
        if not release.has("dtype_resolution"):
            why = (release.data.get("not_read") or {}).get("dtype_resolution")
            return (f"kvdoctor did not read vLLM {release.version}'s dtype resolution"
                    + (f" ({why})" if why else "") + f"; {remedy}")
    return None


def _dtype_from_releases(facts: ModelFacts, requested: str, capability, vllm_version: str | None,
                         gpu_name: str | None = None):
    """(dtype, note, error) as the judged release resolves it (every candidate release must agree), or None
    when the pack cannot say (then kvdoctor's own reading of `--dtype auto` applies)."""
    from kvdoctor.vllm_pack.candidates import agree, candidates
    from kvdoctor.vllm_pack.dtypes import resolve_dtype

    releases = candidates(vllm_version).releases
    if not releases or capability is None:
        return None
    answer = agree(releases, lambda r: resolve_dtype(r, facts.config_dtype, requested, capability, facts.model_type))
    if answer.value is None:
        return None
    dtype, note, error = answer.value
    if error and "{device_name}" in error:
        error = error.replace("{device_name}", gpu_name or "this")
    if dtype is None and error is None:
        return None
    origin = f"config.json declares {facts.config_dtype}" if facts.config_dtype else "config.json declares no dtype"
    return dtype, "; ".join(p for p in (origin, note) if p), error
