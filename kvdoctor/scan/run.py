"""The scan: read every file first (an unreadable one is set aside with its reason), then judge each workload."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable

from kvdoctor.check.run import CheckSettings
from pathlib import Path

from kvdoctor.scan import (ansible_tasks, ansible_templates, apptainer_defs, chart_values, cloud_build, compose, compose_include,
                           configmap_scripts, dockerfile, dstack, dynamo, ecs, embedded_scripts, github_actions, hcl,
                           helm_release, helm_values, kaito, kserve_huggingface, kserve_runtimes, kubernetes, llmaz,
                           makefiles, markdown, nix_containers, nodes, nomad, ome_runtimes, pm2, project_pins,
                           pulumi_programs, python_apps, python_engine_args, quadlets, ray_job, repo_images, scripts,
                           serving_crds, sibling_runtimes, singularity_compose, skypilot, source_tree, sparkrun,
                           supervisord, systemd_units, terraform, terraform_helm, terraform_modules, vllm_runtime)  # fmt: skip
from kvdoctor.scan.chart_reader import chart_workloads
from kvdoctor.scan.config_maps import ConfigMap, config_maps_of, with_config_maps
from kvdoctor.scan.command import heredoc_bodies, only_serve_flags, words_of
from kvdoctor.scan.documents import (HCL_SUFFIXES, Document, ManifestError, SourceFile, compose_documents, discover,
                                     display_path)  # fmt: skip
from kvdoctor.scan.helm_chart import ChartSource
from kvdoctor.scan.kustomize import KustomizationSource, rendered_instead, through_their_kustomization
from kvdoctor.scan.kustomize import workloads_of as kustomized_workloads
from kvdoctor.scan.judge import ScanDefaults, judge
from kvdoctor.scan.marks import marked, placed_document
from kvdoctor.scan.result import ScanReport, UnreadFile, WorkloadResult
from kvdoctor.scan.workload import Workload

# (is this document of the kind, its reader); first match wins, documents of no kind are skipped silently.
HEREDOC_NOTE = "written by the shell script's here-document (cat <<EOF ... EOF), read as the manifest it applies"
READERS = (
    (dynamo.is_dynamo_graph, dynamo.workloads),
    (serving_crds.is_kubeai_vllm_model, serving_crds.kubeai_workloads),
    (vllm_runtime.is_vllm_runtime, vllm_runtime.workloads),
    (ome_runtimes.is_ome_runtime, ome_runtimes.workloads),
    (serving_crds.is_ray_serve_llm, serving_crds.ray_serve_workloads),
    (llmaz.is_vllm_playground, llmaz.workloads),
    (kaito.is_kaito_inference, kaito.workloads),
    (ray_job.is_ray_job, ray_job.workloads),
    (kserve_runtimes.has_lone_container, kserve_runtimes.lone_container_workloads),
    (kubernetes.is_kubernetes, kubernetes.workloads),
    (compose.is_compose, compose.workloads),
    (helm_values.is_production_stack_values, helm_values.workloads),
    (helm_values.is_vllm_chart_values, helm_values.vllm_chart_workloads),
    (skypilot.is_skypilot_task, skypilot.workloads),
    (sparkrun.is_sparkrun_recipe, sparkrun.workloads),
    (dstack.is_dstack_run, dstack.workloads),
    (singularity_compose.is_singularity_compose, singularity_compose.workloads),
    (github_actions.is_github_actions, github_actions.workloads),
    (cloud_build.is_cloud_build, cloud_build.workloads),
    (ecs.is_task_definition, ecs.task_definition_workloads),
    (ansible_tasks.is_tasks, lambda doc, text: ansible_tasks.workloads(doc, text, read_document)),
    (chart_values.is_container_values, chart_values.workloads),  # last: any other kind's reader first
)


VALUES_READERS = (helm_values.is_production_stack_values, helm_values.is_vllm_chart_values)


def find_workloads(paths: list[str]) -> tuple[list[str], list[Workload], list[str]]:
    """(files read, vLLM workloads in them, notes); raises ManifestError for the first file that cannot be read."""
    files, found, notes, unread = read_manifests(paths)
    if unread:
        raise ManifestError(unread[0].message, unread[0].hint)
    return files, found, notes


REFUSED_DEFAULTS = re.compile(r"error calling (?:fail|required)\b")
"""A template that stops its chart on purpose (`{{ fail ... }}`, `{{ required ... }}`): values it asks for are missing."""


def read_manifests(paths: list[str], values_files: tuple[Path, ...] = ()) -> tuple[list[str], list[Workload],
                                                                                  list[str], list[UnreadFile]]:
    """(files read, vLLM workloads in them, notes, files that could not be read); a file that cannot be read is
    set aside with its one-line reason, never stopping the others; Helm charts are rendered, `values_files` over
    each chart's values (helm -f). Raises ManifestError for a missing path."""
    sources, notes = discover(paths)
    sources, through = through_their_kustomization(sources, paths)
    sources = rendered_instead(sources)
    sources, left_out, given = helm_release.installed_charts_left_out(sources)
    notes += through + left_out
    called_modules = terraform_modules.called_directories(
        [(s.path, s.text) for s in sources if isinstance(s, SourceFile) and s.path.endswith(".tf")])
    found: list[Workload] = []
    unread: list[UnreadFile] = []
    config_maps: dict[str, list[ConfigMap]] = {}

    def read_rendered(doc, text):  # a chart's rendered document: its ConfigMaps count as the tree's
        for name, maps in config_maps_of(doc.root, doc.file).items():
            config_maps.setdefault(name, []).extend(maps)
        workloads = read_document(doc, text)
        if kubernetes.is_kubernetes(doc.root) and doc.file:  # a container running an image the repository builds
            workloads += repo_images.built_here(doc.root, doc.file, workloads, scanned_roots)
        return workloads

    rendered_files: list[str] = []  # the files a kustomization takes in, read through it
    # a chart whose own values.yaml makes it refuse to render (`fail`, `required`) but that a values file of the tree
    # renders: its default render is no unread file, its values are meant to come from that file
    refused_defaults: dict[Path, list[UnreadFile]] = {}
    rendered_by_values: dict[Path, str] = {}
    scanned_roots = tuple(Path(p).resolve() for p in paths)
    runs_scripts: list[tuple[Document, tuple, tuple[str, ...]]] = []  # pods running a script a ConfigMap holds

    runtimes: list[kserve_runtimes.Runtime] = []  # KServe serving runtimes, for the models that run on them
    on_runtimes: list[tuple[Document, str, tuple[str, ...], tuple[str, ...]]] = []

    def read_object(doc, text, undecided=(), with_notes=(), name_unread=True):
        """A file's (or a kustomization's rendered) object: its workloads (with what its render left ``undecided``)
        and notes; a KServe model is read once every serving runtime of the tree is known."""
        for name, maps in config_maps_of(doc.root, doc.file, doc.line_files).items():
            config_maps.setdefault(name, []).extend(maps)
        runtimes.extend(kserve_runtimes.runtimes_of(doc, text))
        if kserve_runtimes.runs_on_a_runtime(doc.root):
            on_runtimes.append((doc, text, undecided, with_notes))
            return [], []
        if helm_release.is_helm_release(doc.root, doc.file):  # Argo CD, Flux, helmfile: the chart they install
            own = placed_document(marked(doc.root, doc.file, text), doc.index)  # in its own file, not a render's
            workloads, failures, why = helm_release.release_workloads(own, read_document, text)
            unread.extend(failures)
            return with_context(workloads, undecided, with_notes), why
        if (legacy := compose.legacy_services(doc)) is not None:
            unread.append(UnreadFile.of(ManifestError(legacy)))
            return [], []
        workloads = with_context(read_document(doc, text), undecided, with_notes)
        if kubernetes.is_kubernetes(doc.root) and configmap_scripts.script_runs(doc.root):
            runs_scripts.append((doc, undecided, with_notes))  # read once every ConfigMap of the tree is known
        if kubernetes.is_kubernetes(doc.root) and doc.file:  # a container running an image the repository builds
            built = repo_images.built_here(doc.root, doc.file, workloads, scanned_roots)
            workloads += with_context(built, undecided, with_notes)
        why = unseen_notes(doc, workloads)
        unread_why = unread_kind(doc) if not workloads and name_unread and Path(doc.file).resolve() not in given \
            else None
        if unread_why and not kaito.is_config_read(doc.root, text):  # KAITO's config is its Workspace's arguments
            if unread_kind_runs_scripts(doc):  # user data a machine runs at boot, cloud-init's runcmd
                workloads = with_context(embedded_scripts.workloads(doc.root, doc.file, text), undecided, with_notes)
            if not workloads:
                why.append(unread_why)
        return workloads, why

    def each_rendered(sources):
        """Each source, an Ansible template once per inventory and host it is rendered with (its notes taken); the
        workloads read from one rendering carry that inventory's and host's names once its reading is done."""
        for source in sources:
            if not (isinstance(source, SourceFile) and ansible_templates.is_template(source)):
                yield source
                continue
            for rendering in ansible_templates.renderings(source):
                notes.extend(rendering.notes)
                start = len(found)
                yield rendering.source
                found[start:] = [ansible_templates.named_for(w, rendering) for w in found[start:]]

    for source in each_rendered(sources):
        if isinstance(source, ManifestError):
            unread.append(UnreadFile.of(source))
            continue
        if isinstance(source, KustomizationSource):
            workloads, failures, why, taken_in = kustomized_workloads(source, read_object)
            rendered_files += [f for f in taken_in if f not in rendered_files]
            found += workloads
            unread += failures
            notes += why
            continue
        if isinstance(source, ChartSource):
            workloads, failures = chart_workloads(source, read_rendered, values_files)
            # an object rendered without a name (a value such as the model left empty) is one Kubernetes refuses
            workloads = [w for w in workloads if w.name != UNNAMED] or values_workloads(source)
            found += workloads
            if not workloads and not failures and (why := silent_chart_note(source)):
                notes.append(why)
            if source.values_files and workloads:
                rendered_by_values.setdefault(source.chart.resolve(), display_path(source.values_files[-1]))
            refused = failures and all(REFUSED_DEFAULTS.search(f.message) for f in failures)
            if refused and not source.values_files + values_files:
                refused_defaults[source.chart.resolve()] = failures  # decided once every chart source is read
                continue
            unread += [f for f in failures if f.message not in {u.message for u in unread}]  # one chart, many renders
            continue
        if markdown.is_markdown(source):
            workloads, unseen = markdown.read(source, read_document)
            found += workloads
            notes += unseen
            continue
        if makefiles.is_makefile(source):
            workloads, unseen = makefiles.read(source)
            found += workloads
            notes += unseen
            continue
        if nix_containers.is_nix(source):
            workloads, unseen = nix_containers.read(source, nix_containers.same_configuration(source, sources, paths))
            found += workloads
            notes += unseen
            continue
        if supervisord.is_supervisord(source):
            workloads, unseen = supervisord.read(source)
            found += workloads
            notes += unseen
            continue
        if quadlets.is_quadlet(source):
            workloads, unseen = quadlets.read(source)
            found += workloads
            notes += unseen
            continue
        if systemd_units.is_unit(source):
            workloads, unseen = systemd_units.read(source)
            found += workloads
            notes += unseen
            continue
        if apptainer_defs.is_definition(source):
            workloads, unseen = apptainer_defs.read(source)
            found += workloads
            notes += unseen
            continue
        if scripts.is_shell_script(source):
            written, why = heredoc_workloads(source)
            workloads, unseen = scripts.read(source)
            found += workloads + written
            notes += why + unseen
            continue
        if dockerfile.is_dockerfile(source):
            found += dockerfile.workloads(source)
            continue
        if source.path.endswith(".tf") and (caller := called_modules.get(Path(source.path).parent.resolve())):
            notes.append(f"{source.path}: a module the scan's {caller} calls: read through that call, not alone")
            continue
        if source.path.endswith(HCL_SUFFIXES):
            try:
                workloads, why, failures = hcl_workloads(source)
            except hcl.HclError as exc:
                unread.append(UnreadFile.of(exc))
                continue
            found += workloads
            notes += why
            unread += failures
            continue
        if pm2.is_ecosystem(source):
            workloads, unseen = pm2.read(source)
            found += workloads
            notes += unseen
            continue
        if pm2.is_program(source):
            declared = pulumi_programs.workloads(source, read_document) \
                if pulumi_programs.declares_kubernetes(source) else []
            found += declared
            notes += [note] if not declared and (note := pm2.unread_note(source)) else []
            continue
        if python_apps.is_python_app(source):
            launched = python_apps.workloads(source) + python_engine_args.workloads(source)
            found += launched
            notes += [] if launched else python_engine_args.unread_notes(source)
            continue
        try:
            documents = compose_documents(source)
        except ManifestError as exc:
            if source.data_of is None:
                unread.append(UnreadFile.of(exc))
            else:  # its actions are filled by the chart's tpl: what it holds is read in the chart's render
                notes.append(f"{exc.message.split(' (render it first')[0]}: data of chart {source.data_of}, which fills "
                             "it at render: read through the chart, not on its own")  # fmt: skip
            continue
        for doc in documents:
            included, why = compose_include.included_sources(doc, sources)
            sources += included  # read after this file, each with its own directory and .env
            notes += why
            workloads, why = read_object(doc, source.text, name_unread=source.data_of is None)  # data: the chart's
            found += workloads
            notes += why
    used_runtimes: set[tuple[str, str, str]] = set()
    for doc, text, undecided, with_notes in on_runtimes:
        read = kserve_runtimes.model_workloads(doc, text, runtimes, read_document) \
            or kserve_huggingface.model_workloads(doc, text, runtimes) \
            or beside_it(doc, text, {s.path for s in sources if not isinstance(s, ManifestError)})
        workloads = with_context(read, undecided, with_notes)
        found += workloads
        if workloads and (used := kserve_runtimes.used_runtime(doc.root, runtimes)) is not None:
            used_runtimes.add(used)
        if not workloads and (why := unread_kind(doc)):
            notes.append(why)
    for chart, failures in refused_defaults.items():
        if chart in rendered_by_values:
            notes.append(f"Helm chart {display_path(chart)} refuses to render with its own values.yaml alone "
                         f"({failures[0].message.split(': ', 2)[-1]}): read with {rendered_by_values[chart]}")
        else:
            unread += [f for f in failures if f.message not in {u.message for u in unread}]
    for doc, undecided, with_notes in runs_scripts:
        read = [w for w in configmap_scripts.workloads(doc.root, doc.file, config_maps)
                if not any((w.file, w.name, w.container) == (v.file, v.name, v.container) for v in found)]
        found += with_context(read, undecided, with_notes)
        held = {n.split(" (", 1)[0] for w in read for n in w.notes[:1]}  # '{kind} {name} runs KEY of ConfigMap NAME'
        notes = [n for n in notes if not any(f"ConfigMap {h.rsplit(' ', 1)[-1]} mentions vLLM" in n for h in held)]
    # a serving runtime an InferenceService of the scan runs on is that model's pod, read there: not a workload too
    # (a Kustomize render reads it as the kustomization's, with the runtime's own file among its line files)
    found = [w for w in found if not any((w.kind, w.name, f) in used_runtimes for f in (w.file, *w.line_files))]
    files = [s.path for s in sources if not isinstance(s, ManifestError)]
    files += [f for f in rendered_files if f not in files]
    found, through = not_alone(found)
    found = [source_tree.with_source_tree(project_pins.with_project_pin(w)) for w in found]
    return files, with_config_maps(found, config_maps), notes + through, unread


READ_THROUGH_PLATFORMS = ("script", "dockerfile", "compose", "nomad")


def not_alone(found: list[Workload]) -> tuple[list[Workload], list[str]]:
    """The workloads without a script's or Dockerfile's own reading when another workload of the scan runs that file
    (a SkyPilot task's `bash serve.sh`, a deploy of the image it builds), and a note for each file so read."""
    through = {str(Path(path).resolve()): w for w in found for path in w.read_through}
    if not through:
        return found, []
    kept, notes = [], []
    for workload in found:
        runner = through.get(str(Path(workload.file).resolve())) if workload.platform in READ_THROUGH_PLATFORMS else None
        if runner is None or runner is workload or workload.read_through:  # a workflow's reading of the file is kept
            kept.append(workload)
        elif Path(runner.file).resolve() == Path(workload.file).resolve():  # a template, read with its values
            notes.append(f"{workload.file}: read with the values the file that renders it gives ({runner.title}), "
                         "not alone")  # fmt: skip
        else:
            notes.append(f"{workload.file}: read through {runner.title} ({runner.file}), which runs its command, "
                         "not alone")  # fmt: skip
    return kept, list(dict.fromkeys(notes))


def beside_it(doc: Document, text: str, scanned: set[str]) -> list[Workload]:
    """A KServe model whose runtime is in no scanned file, read on the runtime a YAML file beside it holds."""
    runtime = sibling_runtimes.sibling_runtime(doc.file, *sibling_runtimes.model_of(doc.root), scanned)
    if runtime is None:
        return []
    note = sibling_runtimes.SIBLING_NOTE.format(kind=runtime.kind, name=runtime.name, file=runtime.root.start_mark.name)
    return [replace(w, notes=w.notes + (note,)) for w in kserve_runtimes.model_workloads(doc, text, [runtime], read_document)]


def with_context(workloads: list[Workload], unrendered: tuple, notes: tuple[str, ...]) -> list[Workload]:
    """The workloads with what their render left out that may change each (kustomize_render.Unrendered) as
    undecided, and the render's notes (a kustomization's)."""
    if not unrendered and not notes:
        return workloads
    return [replace(w, undecided=w.undecided + tuple(u.why for u in unrendered if u.may_change(w)), notes=w.notes + notes)
            for w in workloads]  # fmt: skip


UNNAMED = "(unnamed)"
"""The name of a workload whose object has no metadata.name."""


def values_workloads(source: ChartSource) -> list[Workload]:
    """A chart that rendered no vLLM workload, whose values file is one the values readers know (production-stack,
    vLLM's chart): the workloads read from the values alone, as before charts were rendered."""
    path = (source.values_files or (source.chart / "values.yaml",))[-1]
    try:
        text = path.read_text(encoding="utf-8")
        documents = compose_documents(SourceFile(source.path if source.values_files else str(path), text))
    except (OSError, UnicodeDecodeError, ManifestError):
        return []
    return [w for doc in documents for applies, read in READERS if applies in VALUES_READERS and applies(doc.root)
            for w in read(doc, text)]  # fmt: skip


def silent_chart_note(source: ChartSource) -> str | None:
    """A chart that rendered no vLLM workload although its values name vLLM (a runtime behind `enabled: false`,
    values meant to be given with -f), named so that its silence is not taken for a pass."""
    path = (source.values_files or (source.chart / "values.yaml",))[-1]
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    line = next((n for n, text in enumerate(lines, 1) if "vllm" in text.lower() and not text.lstrip().startswith("#")),
                None)  # fmt: skip
    if line is None:
        return None
    return (f"{source.path}: the chart renders no vLLM workload with these values, though they name vLLM "
            f"({display_path(path)}:{line}): a switch off by default or values meant for -f FILE; not checked "
            "(kvdoctor scan CHART_DIR --values FILE)")  # fmt: skip


def hcl_workloads(source: SourceFile, given: dict[str, str] | None = None,
                  depth: int = 0) -> tuple[list[Workload], list[str], list[UnreadFile]]:  # fmt: skip
    """The workloads of a Terraform or Nomad file, the notes on what it deploys unchecked and the templates of the
    charts it installs that cannot be rendered; ``given``: the values a module call gives its variables (the
    calling depth ``depth``); raises HclError."""
    root = hcl.parse(source.text, source.path)
    found: list[Workload] = []
    notes: list[str] = []
    unread: list[UnreadFile] = []
    read_by_values: set[int | None] = set()  # the lines of helm_releases whose remote chart was read by its values
    defaults = terraform.module_defaults(root, source.path, given)  # read once: it parses the module's other files
    for doc, defaults_note in terraform.documents(root, source.path, defaults, set(given or ())):
        workloads = read_document(doc, source.text)
        found += [replace(w, notes=w.notes + (defaults_note,)) if defaults_note else w for w in workloads]
        notes += unseen_notes(doc, workloads)
    for labels, body in hcl.blocks(root, "resource"):
        if labels[:1] == ["helm_release"]:
            workloads, failures = terraform_helm.release_workloads(labels, body, source.path, read_document)
            by_values = terraform_helm.remote_values_workloads(labels, body, source.path, read_document)
            read_by_values |= {nodes.line(body)} if by_values else set()
            found += workloads + by_values
            unread += failures
        elif labels and not terraform.is_read(labels[0]):  # an instance's user_data, a startup script
            found += embedded_scripts.workloads(body, source.path, source.text)
            found += embedded_scripts.rendered_workloads(body, source.path, defaults)
    tasks = nomad.workloads(root, source.path) + terraform.nomad_workloads(root, source.path, defaults) \
        + ecs.terraform_workloads(root, source.path, defaults, set(given or ()))
    notes += nomad.unseen_notes(root, source.path, tasks) + terraform.notes(root, source.path, read_by_values)
    called, why, failures = terraform_modules.call_workloads(root, source.path, defaults, _module_file, depth)
    return found + tasks + called, notes + why, unread + failures


def _module_file(path: str, text: str, given: dict[str, str], depth: int) -> tuple[list[Workload], list[str], list]:
    """A called module's file read with the call's values (terraform_modules.py); one that is no HCL is unread."""
    try:
        return hcl_workloads(SourceFile(path, text), given, depth)
    except hcl.HclError as exc:
        return [], [], [UnreadFile.of(exc)]


def heredoc_workloads(source: SourceFile) -> tuple[list[Workload], list[str]]:
    """The workloads of the YAML a script writes with a here-document (`cat <<EOF > vllm.yaml` ... `EOF`, then
    `kubectl apply -f vllm.yaml`) or of a systemd unit it writes so, on the script's own lines, and the notes for its
    documents that mention vLLM but are not read (as for a manifest file); a body that is no YAML is no manifest."""
    found, notes = systemd_units.written_by_script(source)  # a unit the script writes (tee vllm.service <<EOF)
    for first_line, body in heredoc_bodies(source.text):
        try:
            documents = compose_documents(SourceFile(source.path, "\n" * (first_line - 1) + body))
        except ManifestError:
            continue
        for doc in documents:
            workloads = read_document(doc, source.text)
            found += [replace(w, notes=w.notes + (HEREDOC_NOTE,)) for w in workloads]
            if not workloads and kubernetes.is_kubernetes(doc.root) and (why := unread_kind(doc)):
                notes.append(why)  # only objects: a heredoc of Python or text that names vLLM is no manifest
    return found, notes


def unseen_notes(doc: Document, read: list[Workload]) -> list[str]:
    """Notes for what in a document deploys vLLM with a command kvdoctor cannot see (an image whose entrypoint builds
    it, a gcloud run deploy of an image built elsewhere)."""
    if github_actions.is_github_actions(doc.root):
        return github_actions.unseen_notes(doc)
    if cloud_build.is_cloud_build(doc.root):
        return cloud_build.unseen_notes(doc)
    if compose.is_compose(doc.root):
        return compose.unseen_notes(doc, read)
    reader = next((read_with for applies, read_with in READERS if applies(doc.root)), None)
    if reader is kubernetes.workloads:  # not the kinds other readers take (Dynamo graphs, KubeAI models, ...)
        return kubernetes.unseen_notes(doc.root, doc.file, read)
    return []


def read_document(doc: Document, source_text: str) -> list[Workload]:
    for applies, read in READERS:
        if applies(doc.root):
            return read(doc, source_text)
    return []


# kinds whose controller runs vLLM even when the object names neither vLLM nor a container (KServe's
# LLMInferenceService: llm-d's vLLM config template serves spec.model.uri)
SERVES_VLLM_ITSELF = ("LLMInferenceService",)


UNREAD_KIND_HINTS = {
    "Kustomization": "scan its folder, kvdoctor scan DIR, which renders it with the files it names",
    "ConfigMap": "its values are read where a container's env or envFrom takes them; a script it holds is not",
    "Secret": "its values are read where a container's env or envFrom takes them",
}
"""What to do about a kind scan does not read, where it is not a controller creating pods."""


def unread_kind(doc: Document) -> str | None:
    """A document that mentions vLLM but is of a kind the scan does not read (an LLMInferenceService, a chart's
    raw values), named so that nobody takes its silence for a pass."""
    kind = nodes.text(nodes.get(doc.root, "kind"))
    if kind in kubernetes.PODLESS_KINDS and nodes.get(doc.root, "apiVersion") is not None \
            and not kubernetes.has_pod_template(doc.root):
        return None  # a Service named vllm, a PodMonitor of vLLM's pods: nothing runs there
    where = f"{doc.file}:{nodes.line(doc.root)}"
    if kind in SERVES_VLLM_ITSELF and nodes.get(doc.root, "apiVersion") is not None:
        return (f"{where}: {kind} {nodes.text(nodes.get(doc.root, 'metadata', 'name')) or ''} runs vLLM from its "
                "controller's own pod template, which is not in this file: not checked (give it a spec.template "
                "with the vLLM container, or scan the pods it creates)")  # fmt: skip
    if not any("vllm" in text.lower() for text in nodes.scalars(doc.root)) and not _has_serve_flags(doc.root):
        return None
    if kind is not None and nodes.get(doc.root, "apiVersion") is not None:
        if (ray := kubernetes.ray_start_note(doc.root, where)) is not None:
            return ray
        if (sdk := dynamo.sdk_note(doc.root, where)) is not None:
            return sdk
        if kind == "InferenceService" and (model := nodes.get(doc.root, "spec", "predictor", "model")) is not None:
            runtime = nodes.text(nodes.get(model, "runtime")) or \
                f"the runtime of model format {nodes.text(nodes.get(model, 'modelFormat', 'name'))}"
            return (f"{where}: InferenceService {nodes.text(nodes.get(doc.root, 'metadata', 'name')) or ''} mentions "
                    f"vLLM; its spec.predictor.model runs on {runtime}, which is not in the scanned files (a KServe "
                    "built-in or the cluster's ServingRuntime): not read, not checked (scan it with the runtime's "
                    "manifest)")  # fmt: skip
        # a kind it reads (a Knative Service too): a fragment is named, other containers do not run vLLM
        if kind in kubernetes.POD_SPECS or kubernetes.has_pod_template(doc.root):
            return kubernetes.fragment_note(doc.root, where)
        named = " ".join(filter(None, (kind, nodes.text(nodes.get(doc.root, "metadata", "name")))))
        return (f"{where}: {named} mentions vLLM, but kvdoctor scan does not read kind {kind} "
                f"({UNREAD_KIND_HINTS.get(kind, 'render it to the Deployment/Pod it creates')})")  # fmt: skip
    if skypilot.is_skypilot_task(doc.root):  # `vllm bench latency` in run: vLLM's engine, but no server to check
        return (f"{where}: SkyPilot task {nodes.text(nodes.get(doc.root, 'name')) or '(unnamed)'} mentions vLLM, "
                "but its run script starts no vLLM server (vllm serve, vLLM's OpenAI server): not checked")
    if serving_crds.is_serve_config_file(doc.root):
        apps = ", ".join(f"{nodes.text(nodes.get(a, 'name')) or '(unnamed)'} ({nodes.text(nodes.get(a, 'import_path'))})"
                         for a in nodes.items(nodes.get(doc.root, "applications")))  # fmt: skip
        return (f"{where}: a Ray Serve config, application {apps}: its vLLM engine arguments are not given as data "
                "kvdoctor reads (llm_configs, a `model` mapping in args or user_config, MODEL_ID in the app's "
                "runtime_env): not checked")  # fmt: skip
    if nodes.is_map(nodes.get(doc.root, "build")) and nodes.text(nodes.get(doc.root, "predict")):
        return (f"{where}: a Replicate Cog config: vLLM runs in its predictor "
                f"{nodes.text(nodes.get(doc.root, 'predict'))}, read as a Python app when scanned with its folder "
                "(with the vllm pin of build.python_packages)")  # fmt: skip
    if compose.is_compose(doc.root) or helm_values.is_production_stack_values(doc.root) or dstack.is_dstack_run(doc.root) \
            or singularity_compose.is_singularity_compose(doc.root) \
            or github_actions.is_github_actions(doc.root) or cloud_build.is_cloud_build(doc.root) \
            or _is_test_suite_or_form(doc.root):
        return None
    return (f"{where}: a YAML document that mentions vLLM but is no Kubernetes object, Compose file or "
            "production-stack values (a chart's raw values?): not read; scan it with its chart: kvdoctor scan CHART_DIR "
            "--values FILE")  # fmt: skip


def unread_kind_runs_scripts(doc: Document) -> bool:
    """A document of a kind scan does not read whose strings may be scripts a machine runs (not a pod's
    ConfigMap or a workload whose pod template was read)."""
    kind = nodes.text(nodes.get(doc.root, "kind"))
    return kind not in kubernetes.PODLESS_KINDS and kind not in kubernetes.POD_SPECS and \
        kind not in {"ConfigMap", "Secret"} and not kubernetes.has_pod_template(doc.root)  # fmt: skip


def _is_test_suite_or_form(root) -> bool:
    """A helm-unittest suite (`suite`, `templates`, `tests`: a chart's unit tests) or a GitHub issue form (`body`, a
    list of `type:` fields): they quote vLLM's flags, they deploy nothing."""
    if nodes.get(root, "suite") is not None and nodes.is_seq(nodes.get(root, "tests")):
        return True
    body = nodes.get(root, "body")
    return nodes.is_seq(body) and bool(nodes.items(body)) and all(nodes.get(i, "type") is not None
                                                                  for i in nodes.items(body))  # fmt: skip


def _has_serve_flags(root) -> bool:
    """Whether some `args` list under the node is vLLM serve options (llm-d's LLMInferenceService template)."""
    stack = [root]
    while stack:
        node = stack.pop()
        for key, _, value in nodes.pairs(node):
            if key == "args" and nodes.is_seq(value) and only_serve_flags(words_of(value, "")):
                return True
            stack.append(value)
        stack += [item for item in nodes.items(node) if nodes.is_map(item)]
    return False


def run_scan(paths: list[str], defaults: ScanDefaults, settings: CheckSettings,
             on_workload: Callable[[WorkloadResult], None] | None = None,
             allow_none: bool = False, values_files: tuple[Path, ...] = (), debug: bool = False) -> ScanReport:  # fmt: skip
    """Every workload of the files judged; a kvdoctor bug while judging one is that workload's error (exit 3), and the
    others are still judged (with ``debug`` it is raised, for its traceback)."""
    files, workloads, notes, unread = read_manifests(paths, values_files)
    results = []
    for workload in workloads:
        try:
            result = judge(workload, defaults, settings)
        except Exception as exc:  # noqa: BLE001 - one workload's bug never hides the others
            if debug:
                raise
            result = WorkloadResult(workload, None, error=f"kvdoctor internal error: {type(exc).__name__}: "
                                    f"{' '.join(str(exc).split())[:300]} (a kvdoctor bug: rerun with --debug for the "
                                    "traceback and report it)", error_location=workload.at(workload.line), internal=True)
        results.append(result)
        if on_workload is not None:
            on_workload(result)
    if not workloads:
        notes.append(f"no vLLM workload in {len(files)} file(s): nothing runs vllm serve or vLLM's OpenAI server, "
                     "so nothing was checked")  # fmt: skip
    return ScanReport(tuple(files), tuple(results), tuple(notes), tuple(unread), allow_none)
