"""Judge one workload: deployment facts -> CheckOptions -> run_check -> the deployment's own rules -> located findings."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from kvdoctor.check.run import CheckSettings, run_check
from kvdoctor.facts.collect import CheckOptions
from kvdoctor.facts.probes.serve_args import parse_serve_command
from kvdoctor.base.errors import KvdoctorError, ModelConfigError
from kvdoctor.model.report import Finding, Report
from kvdoctor.scan.accelerator import without_nvidia_checks
from kvdoctor.scan.command import without_launcher_options, without_unresolved
from kvdoctor.scan.config_maps import config_file_option, is_scanned_copy
from kvdoctor.scan.facts import DeploymentFacts, canonical_flag, deployment_facts, is_scan_fact_name
from kvdoctor.scan.image import (chosen_by_the_host, command_extension, is_fork_image, names_no_vllm_release,
                                 pins_an_unknown_build, repository_path)
from kvdoctor.scan.result import PlacedFinding, WorkloadResult
from kvdoctor.scan.translated_options import refused_words, translation_note
from kvdoctor.scan.workload import Location, Token, Workload

# Which fact points at the line to change, most specific first: the flag, the env, the model, the image, the GPU.
LOCATION_ORDER = ("serve.kv_cache_dtype", "kv.", "dryrun.", "attention.", "serve.attention_backend", "serve.dtype", "serve.",
                  "env.", "model.", "vllm.", "gpu.", "deploy.")  # fmt: skip


@dataclass(frozen=True)
class ScanDefaults:
    """What a workload's manifest does not say."""

    gpu: str | None = None
    """--gpu: the GPU for workloads whose node labels name none."""
    vllm_version: str | None = None
    """--vllm-version: for images whose tag pins no vLLM release."""
    offline: bool = False
    cache_dir: Path | None = None
    model_paths: dict[str, str] = field(default_factory=dict)
    """--model-path MODEL=DIR: a local directory (or config.json) for a model as the manifests write it."""
    target_packages: tuple[str, ...] = ()
    """--target-package NAME=VALUE: the images' modelled packages (kvdoctor/model/modelled.py)."""


PARALLEL_SIZES = ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size")


def _parallel_sizes(argv) -> set[str]:
    """The parallel-size options the argv sets (long or short spelling), by their long name."""
    return {option for token in argv if (option := canonical_flag(token.text.partition("=")[0])) in PARALLEL_SIZES}


def _without_count_comparison(workload: Workload, unknown: set[str]) -> Workload:
    """A parallel size whose value is unknown here leaves the GPUs vLLM needs unknown: the pod's count is not
    compared (a default of 1 in its place would be a false finding)."""
    if not unknown or (workload.gpu_limit is None and workload.group_gpus is None and workload.cluster_gpus is None):
        return workload
    note = (f"the GPU count is not compared with -tp x -pp x -dp: {', '.join(sorted(unknown))} "
            "takes its value from a variable unknown here")  # fmt: skip
    return replace(workload, gpu_limit=None, gpu_limit_line=None, group_gpus=None, cluster_gpus=None,
                   notes=workload.notes + (note,))


def deploy_rules():
    """kvdoctor/data/rules/scan.yaml: rules about the deployment (KVD2xx), over scan's facts (deploy.* too)."""
    from kvdoctor.rules.loader import bundled_rules

    return bundled_rules("scan", is_scan_fact_name)


def judge(workload: Workload, defaults: ScanDefaults, settings: CheckSettings) -> WorkloadResult:
    """A full `kvdoctor check` of the workload, its findings placed on the manifest's lines."""
    workload = _without_extension_options(_without_unread_config_file(_without_launcher_refusals(workload)))
    argv, unresolved = without_unresolved(list(workload.argv))
    if unresolved:
        workload = _without_count_comparison(replace(workload, argv=tuple(argv), notes=workload.notes + tuple(unresolved)),
                                             _parallel_sizes(workload.argv) - _parallel_sizes(argv))
    try:
        deployment = deployment_facts(workload, defaults, settings)
        options = CheckOptions(
            serve_argv=tuple(t.text for t in _with_local_model(workload.argv, deployment)),
            gpu=deployment.gpu,
            vllm_version=deployment.vllm_version,
            # a venv's vLLM, an image pinned to a build of no known release, built here or left to the host: of any age
            any_release=deployment.vllm_version is None and (workload.image is None or chosen_by_the_host(workload.image)
                                                              or pins_an_unknown_build(workload.image)
                                                              or names_no_vllm_release(workload.image)
                                                              or workload.built_here),  # fmt: skip
            own_build=_own_build(workload) if deployment.vllm_version is None else None,
            serves=True,
            offline=defaults.offline,
            cache_dir=defaults.cache_dir,
            environ=deployment.environ,
            local_packages=False,  # the image's vLLM and FlashInfer are not this machine's
            target_packages=defaults.target_packages,
        )
        report, unread = _checked(options, settings, deployment)
    except KvdoctorError as exc:
        where = _error_location(workload, exc)
        rest = _without_refused_value(workload, exc)
        if rest is None:
            return WorkloadResult(workload, None, error=exc.one_line(), error_location=where)
        # one bad flag value never hides the rest: the others are checked, the workload stays ERROR at its line
        return replace(judge(rest, defaults, settings), workload=workload, error=exc.one_line(), error_location=where)
    report = _with_deploy_rules(report, deployment, workload, settings)
    if deployment.values.get("deploy.accelerator"):
        report = without_nvidia_checks(report)
    if workload.gpu_slice is not None:
        report = on_a_mig_slice(report, workload.gpu_slice)
    sources = deployment.sources | flag_sources(workload)
    placed = tuple(_place(f, sources, report, workload) for f in report.sorted_findings())
    unjudged = deployment.unjudged + ((unread,) if unread else ()) + workload.undecided
    return WorkloadResult(workload, report, placed, sources, unjudged=unjudged)


def _own_build(workload: Workload) -> str | None:
    """What may carry its own build of vLLM, whose options no release has are undecided: an image of another project,
    the host's choice or a fork's, or a vLLM source tree in the scanned checkout that the host's Python runs."""
    if workload.image is None:
        return workload.vllm_tree
    if names_no_vllm_release(workload.image) or chosen_by_the_host(workload.image) \
            or is_fork_image(repository_path(workload.image)):  # fmt: skip
        return f"image {workload.image}"
    return None


def _without_unread_config_file(workload: Workload) -> Workload:
    """`--config PATH` whose file is inside the container (no scanned ConfigMap holds it): left out and named, since
    the flags it holds are unknown here; a file of the same path on this machine is not the container's."""
    found = config_file_option(workload.argv)
    if found is None or is_scanned_copy(found[2]):
        return workload
    index, taken, path = found
    argv = workload.argv[:index] + workload.argv[index + taken :]
    note = f"--config {path}: a file inside the container, not in the scanned files: the options it sets are not judged"
    if parse_serve_command([t.text for t in argv], {}).model is None:  # the file may name it: not vLLM's default
        argv = (Token(f"<the model {path} names>", workload.argv[index].line),) + argv
        note += ", nor the model it names (the command names none)"
    return replace(workload, argv=argv, notes=workload.notes + (note,))


def _without_launcher_refusals(workload: Workload) -> Workload:
    """The words a translating launcher (TRL's server) refuses moved out of vLLM's argv, its own words it does not pass
    to vLLM left out, and what was read as what named in a note."""
    note = translation_note(workload.argv)
    if note is None:
        return workload
    kept = tuple(t for t in workload.argv if t.via is None or not (t.via.refused or t.via.left_out))
    return replace(workload, argv=kept, launcher_refused=refused_words(workload.argv), notes=workload.notes + (note,))


def _without_extension_options(workload: Workload) -> Workload:
    """The workload without the options its image's project adds to `vllm serve` (vLLM-Omni's --omni), named."""
    extension = command_extension(workload.image, [t.text for t in workload.argv])
    if extension is None:
        return workload
    own = [t.text for t in workload.argv if t.text.startswith("-") and extension.owns(t.text.partition("=")[0])]
    if not own:
        return workload
    note = (f"image {workload.image}: {extension.name}'s own serve options are not vLLM's, left out and not judged: "
            f"{' '.join(own)}")  # fmt: skip
    return replace(workload, argv=tuple(without_launcher_options(list(workload.argv), extension)),
                   notes=workload.notes + (note,))  # fmt: skip


def _without_refused_value(workload: Workload, exc: KvdoctorError) -> Workload | None:
    """The workload without the serve flag (and its value) whose value kvdoctor's flag parser refused, or None."""
    match = re.match(r"serve flag (--?[\w-]+)", exc.message)
    if match is None:
        return None
    flag = canonical_flag(match.group(1))
    argv = list(workload.argv)
    for index, token in enumerate(argv):
        if token.text.startswith("-") and canonical_flag(token.text.partition("=")[0]) == flag:
            has_value = "=" not in token.text and index + 1 < len(argv) and not argv[index + 1].text.startswith("-")
            return replace(workload, argv=tuple(argv[:index] + argv[index + 1 + has_value :]))
    return None


CHECK_MODEL_HINT = re.compile(r"pass --model(?![-\w])[^;]*")
"""check's way of asking for the model (pass --model with a directory ...), which scan asks as --model-path."""
def memory_fit_rules() -> dict:
    """The check rules that weigh the GPU's memory: those whose conditions read a `memory.*` fact (the context
    length rule reads only `context.*`, which a MIG slice does not change)."""
    from kvdoctor.rules import load_all_rules

    return {r.id: r for r in load_all_rules([])
            if r.when is not None and any(f.startswith("memory.") for f in r.when.facts_used())}


def on_a_mig_slice(report: Report, profile: str) -> Report:
    """A pod on a MIG slice has the slice's memory, not the GPU's that check's fit model takes: every memory fit rule
    is undecided (fired or not), naming the slice, and the fit note is replaced by why it is not judged."""
    from kvdoctor.rules.engine import finding_for

    gpu = report.facts.get("gpu.name") or "the GPU"
    why = (f"GPU memory: the pod gets a MIG slice ({profile}), not the whole {gpu} "
           f"({report.facts.get('gpu.memory_gib')} GiB) that the fit model weighs; judge it on a whole GPU")  # fmt: skip
    rules = memory_fit_rules()
    kept = [f for f in report.findings if f.rule_id not in rules]
    opened = [replace(f, status="undecided", decided_by=(why,)) for f in report.findings if f.rule_id in rules]
    missing = [rule for rid, rule in rules.items() if rid not in {f.rule_id for f in opened}]
    opened += [replace(finding_for(rule, report.facts, status="undecided"), decided_by=(why,)) for rule in missing]
    notes = tuple(n for n in report.notes if not n.startswith("KV cache fits"))
    return replace(report, findings=tuple(kept + opened), notes=notes + (f"whether the KV cache fits is not judged: {why}",))


def _checked(options: CheckOptions, settings: CheckSettings, deployment: DeploymentFacts) -> tuple[Report, str | None]:
    """run_check; when the model cannot be read here (a volume, the image, no hub access), the check of everything
    that does not depend on it (flags, KV dtypes, GPU count, forced backends) and why the model was not read."""
    try:
        return run_check(options, settings), None
    except ModelConfigError as exc:
        unread = f"model {deployment.model} not read here ({exc.message})"
        report = run_check(replace(options, skip_model=unread), settings)
        why = (f"model unknown: {deployment.model} not read here ({exc.message}); the checks that need its config.json "
               f"are undecided: pass --model-path {deployment.model}=DIR")  # fmt: skip
        return _model_undecided(report, deployment.model), why


def _model_undecided(report: Report, model: str | None) -> Report:
    """Findings the model decides say so in scan's words: the model's config is what --model-path supplies."""
    hint = f"the model's config.json: pass --model-path {model}=DIR (a local copy of its config.json)"

    def said(line: str) -> str:
        if line.startswith("model."):
            return hint
        # a line that names a model fact among others ("... and model.layer_kinds, the model: pass --model ...")
        return CHECK_MODEL_HINT.sub(f"pass --model-path {model}=DIR", line) if "model." in line else line

    findings = tuple(
        replace(f, decided_by=tuple(dict.fromkeys(said(line) for line in f.decided_by))) if f.status == "undecided" else f
        for f in report.findings
    )  # fmt: skip
    return replace(report, findings=findings)


def _with_local_model(argv: tuple[Token, ...], deployment: DeploymentFacts) -> list[Token]:
    """The argv with the model rewritten to the local path it resolves to, when there is one."""
    model, local = deployment.model, deployment.model_path
    if model is None or local is None:
        return list(argv)
    out, done = [], False
    for token in argv:
        if not done and token.text in (model, f"--model={model}"):
            out.append(Token(token.text.replace(model, local), token.line))
            done = True
        else:
            out.append(token)
    return out


def _with_deploy_rules(report: Report, deployment: DeploymentFacts, workload: Workload, settings) -> Report:
    from kvdoctor.rules.engine import evaluate_rules

    rules = list(deploy_rules())
    deploy = deployment.flat(report.facts)
    found = [f for f in evaluate_rules(rules, report.facts | deploy) if f.status == "fired"]
    found = [replace(f, ignored_reason=settings.ignored[f.rule_id]) if f.rule_id in settings.ignored else f
             for f in found]  # fmt: skip
    return replace(
        report,
        findings=report.findings + tuple(found),
        facts=report.facts | deploy,
        notes=tuple(workload.notes) + deployment.notes + report.notes,
        rules_checked=report.rules_checked + tuple(r.id for r in rules),
    )


def flag_sources(workload: Workload) -> dict[str, Location]:
    """serve.<flag name> -> the line of the flag, for every flag in the argv."""
    sources: dict[str, Location] = {}
    argv = workload.argv
    for index, token in enumerate(argv):
        if not token.text.startswith("-") or token.text == "-":
            continue
        flag, has_value, inline = token.text.partition("=")
        flag = canonical_flag(flag)
        nxt = argv[index + 1].text if index + 1 < len(argv) else ""
        value = inline if has_value else (nxt if not nxt.startswith("-") else "")
        name = flag[5:] if flag.startswith("--no-") else flag[2:]
        sources.setdefault("serve." + name.replace("-", "_"), workload.at(token.line, f"{flag} {value}".strip()))
    return sources


def _source_for(fact: str, sources: dict[str, Location], facts: dict) -> Location | None:
    # the parser's words, or the option as typed, name the flag: point at its own line
    named = {"serve.args_": ("serve.args_error",),
             "serve.value_refused": ("serve.option_reassigned", "serve.value_refused")}
    texts = next((names for prefix, names in named.items() if fact.startswith(prefix)), ())
    if texts:
        for flag in re.findall(r"--[A-Za-z0-9][\w-]*", " ".join(str(facts.get(t) or "") for t in texts)):
            flag = canonical_flag(flag)
            name = flag[5:] if flag.startswith("--no-") else flag[2:]
            if "serve." + name.replace("-", "_") in sources:
                return sources["serve." + name.replace("-", "_")]
    if fact == "serve.attention_backend" and facts.get("serve.attention_backend_source") == "VLLM_ATTENTION_BACKEND":
        return sources.get("env.VLLM_ATTENTION_BACKEND")
    if fact.startswith("attention.") and facts.get("serve.attention_backend"):  # the forced backend's line
        return _source_for("serve.attention_backend", sources, facts)
    if fact.startswith(("kv.", "dryrun.", "attention.")):
        return sources.get("serve.kv_cache_dtype")
    if fact == "deploy.gpus_needed":
        return sources.get("serve.tensor_parallel_size") or sources.get("serve.pipeline_parallel_size")
    if fact in sources:
        return sources[fact]
    prefix = fact.split(".", 1)[0] + "."
    return sources.get(prefix)


def _flag_locations(facts: dict, sources: dict[str, Location]) -> list[Location]:
    """The lines of every flag the parser's error names (`unrecognized arguments: --a x --b`), in its order."""
    found = []
    for flag in re.findall(r"--[A-Za-z0-9][\w-]*", str(facts.get("serve.args_error") or "")):
        flag = canonical_flag(flag)
        key = "serve." + (flag[5:] if flag.startswith("--no-") else flag[2:]).replace("-", "_")
        if key in sources and sources[key] not in found:
            found.append(sources[key])
    return found


def _place(finding: Finding, sources: dict[str, Location], report: Report, workload: Workload) -> PlacedFinding:
    """The finding's location: the most specific fact it was judged on that the manifest states."""
    names = [line.split(" = ", 1)[0] for line in finding.evidence if " = " in line]
    order = ("deploy.",) + LOCATION_ORDER if finding.rule_id in {r.id for r in deploy_rules()} else LOCATION_ORDER

    def rank(name: str) -> int:
        return next((i for i, prefix in enumerate(order) if name.startswith(prefix)), len(order))

    located: list[Location] = []
    for name in sorted(names, key=rank):
        where = _source_for(name, sources, report.facts)
        if where is not None and where not in located:
            located.append(where)
        if name.startswith("serve.args_"):  # every flag the parser's words name, each at its own line
            located += [w for w in _flag_locations(report.facts, sources) if w not in located]
    if not located:
        located.append(workload.at(workload.command_line, "command"))
    return PlacedFinding(finding, located[0], tuple(located[1:]))


def _error_location(workload: Workload, exc: KvdoctorError) -> Location:
    """The flag or word a one-line error names, else the command."""
    for token in workload.argv:
        word = canonical_flag(token.text.partition("=")[0]) if token.text.startswith("-") else token.text
        if len(word) > 1 and f"{word} " in exc.message + " " and (word.startswith("-") or "/" in word or "." in word):
            return workload.at(token.line, token.text)
    return workload.at(workload.command_line, "command")
