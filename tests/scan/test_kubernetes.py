"""Kubernetes objects: which containers are vLLM workloads, their argv, GPU, counts and lines."""

from __future__ import annotations

from pathlib import Path

import pytest
from scan_support import by_name, finding, line_of, rel, scan

from kvdoctor.scan.run import find_workloads

KINDS = "kinds.yaml"


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    return by_name(scan([rel(KINDS)], tmp_path_factory.mktemp("kinds"), gpu=None))


def test_each_kind_yields_its_vllm_containers_only():
    _, workloads, _ = find_workloads([rel(KINDS)])
    titles = [w.title for w in workloads]
    assert titles == [
        "StatefulSet/llm/qwen-sts (container vllm)",  # not the kvdoctor initContainer, not the metrics sidecar
        "CronJob/nightly-eval (container server)",
        "Pod/qwen-pod (container vllm)",  # inside a kind: List; the ConfigMap's Jinja is not a Helm template
        "LeaderWorkerSet/qwen-multinode (container leader)",  # the worker only starts ray
        "InferenceService/qwen-kserve (container kserve-container)",
    ]


def test_shell_script_words_keep_their_own_lines(kinds):
    sts = kinds["qwen-sts"]
    assert sts.report.facts["serve.kv_cache_dtype"] == "turboquant_4bit_nc"
    assert sts.sources["serve.kv_cache_dtype"].line == line_of(KINDS, "--kv-cache-dtype turboquant_4bit_nc")
    assert sts.sources["serve.tensor_parallel_size"].line == line_of(KINDS, "--tensor-parallel-size 2")


def test_gke_accelerator_label_names_the_gpu(kinds):
    sts = kinds["qwen-sts"]
    assert sts.report.facts["gpu.name"] == "L4"
    assert sts.sources["gpu."].line == line_of(KINDS, "cloud.google.com/gke-accelerator")


def test_gpu_limit_below_tensor_parallel_is_an_error_at_the_limit_line(kinds):
    sts = kinds["qwen-sts"]
    short = finding(sts, "KVD201")
    assert short.finding.severity == "error" and short.finding.gates
    assert "gets 1 GPU(s) but vLLM needs 2" in short.finding.title
    assert short.location.line == line_of(KINDS, "limits: {nvidia.com/gpu: 1}")
    assert sts.verdict == "FAIL"


def test_gpu_limit_above_need_is_a_warning(kinds):
    cron = kinds["nightly-eval"]
    idle = finding(cron, "KVD202")
    assert idle.finding.severity == "warning" and "8 GPUs but vLLM uses only 4" in idle.finding.title
    assert not any(p.finding.rule_id == "KVD201" for p in cron.placed)


def test_python_module_launcher_and_kubernetes_variable_expansion(kinds):
    cron = kinds["nightly-eval"]
    assert cron.report.facts["model.model_id"] == "qwen2.5-3b-instruct"  # --model $(MODEL) from env
    assert cron.report.facts["serve.tensor_parallel_size"] == 4  # -tp 4
    assert cron.report.facts["vllm.version"] == "0.26.0"  # a registry host in front of vllm/vllm-openai


def test_instance_types_in_affinity_the_weakest_decides(kinds):
    cron = kinds["nightly-eval"]
    assert cron.report.facts["gpu.name"] == "A10G"  # p5.48xlarge (H100) or g5.12xlarge (A10G)
    assert any("the weakest, A10G, decides" in n for n in cron.report.notes)


def test_preferred_affinity_counts_when_nothing_is_required(kinds):
    pod = kinds["qwen-pod"]
    assert pod.report.facts["gpu.name"] == "Tesla T4"
    assert pod.report.facts["serve.dtype"] == "float16"


def test_leaderworkerset_and_kserve(kinds):
    leader = kinds["qwen-multinode"]
    assert leader.report.facts["serve.pipeline_parallel_size"] == 2
    assert leader.report.facts["gpu.name"] == "H100 80GB"
    kserve = kinds["qwen-kserve"]
    assert kserve.report.facts["gpu.name"] == "A10G"  # Karpenter's instance-gpu-name
    assert kserve.report.facts["serve.kv_cache_dtype"] == "fp8_e5m2"
    assert kserve.sources["serve.kv_cache_dtype"].what == "--kv-cache-dtype fp8_e5m2"


def test_a_container_without_gpu_limit_gets_no_count_finding(kinds):
    assert not any(p.finding.rule_id in ("KVD201", "KVD202") for p in kinds["qwen-kserve"].placed)


OPENSHIFT_TEMPLATE = """\
apiVersion: template.openshift.io/v1
kind: Template
metadata:
  name: vllm-runtime-template
objects:
  - apiVersion: serving.kserve.io/v1alpha1
    kind: ServingRuntime
    metadata:
      name: vllm-runtime
    spec:
      containers:
        - name: kserve-container
          image: $(vllm-image)
          command: [python, -m, vllm.entrypoints.openai.api_server]
          args: ["--model=/mnt/models", "--port=8080"]
      workerSpec:
        containers:
          - name: worker-container
            image: $(vllm-image)
            args: [/mnt/models, --tensor-parallel-size=2, --headless]
            command:
              - bash
              - -c
              - |
                NODE_RANK=1
                exec vllm serve "$@" --node-rank=${NODE_RANK}
              - --
parameters:
  - name: UNUSED
"""


def test_an_openshift_templates_objects_are_read_under_their_own_kind_and_name(tmp_path):
    path = tmp_path / "template.yaml"
    path.write_text(OPENSHIFT_TEMPLATE)
    _, workloads, _ = find_workloads([str(path)])
    assert [(w.kind, w.name, w.container) for w in workloads] == [
        ("ServingRuntime", "vllm-runtime", "kserve-container"),
        ("ServingRuntime", "vllm-runtime", "worker-container"),  # a multi-node runtime's workerSpec
    ]


def test_a_scripts_dollar_at_is_the_words_after_its_dollar_zero(tmp_path):
    path = tmp_path / "template.yaml"
    path.write_text(OPENSHIFT_TEMPLATE)
    _, workloads, _ = find_workloads([str(path)])
    worker = workloads[1]
    # `bash -c SCRIPT -- ARGS`: "--" is $0, so "$@" is the args; the script's own words follow them
    assert [t.text for t in worker.argv][:3] == ["/mnt/models", "--tensor-parallel-size=2", "--headless"]
    args_line = "            args: [/mnt/models, --tensor-parallel-size=2, --headless]"
    assert worker.argv[0].line == OPENSHIFT_TEMPLATE.splitlines().index(args_line) + 1


LWS_SHELL = """\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: decode}
spec:
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        containers:
        - name: vllm-worker
          image: vllm/vllm-openai:v0.25.1
          command: [/bin/bash, -c]
          args:
          - |-
            exec vllm serve deepseek-ai/DeepSeek-R1-0528 \\
              --tensor-parallel-size $TP_SIZE \\
              --data-parallel-size $((LWS_GROUP_SIZE * DP_SIZE_LOCAL)) \\
              --data-parallel-size-local $DP_SIZE_LOCAL
          env:
          - {name: DP_SIZE_LOCAL, value: "8"}
          - {name: TP_SIZE, value: "1"}
          resources: {limits: {nvidia.com/gpu: "8"}}
"""


def test_a_leaderworkerset_groups_size_and_shell_arithmetic_give_the_data_parallel_size(tmp_path):
    # batch s34 (llm-d wide-ep decode.yaml): DP = LWS_GROUP_SIZE x DP_SIZE_LOCAL = 16 over 2 pods of 8 GPUs
    path = tmp_path / "lws.yaml"
    path.write_text(LWS_SHELL)
    (result,) = scan([str(path)], tmp_path, gpu="H100").workloads
    words = [t.text for t in result.workload.argv]
    assert words[words.index("--data-parallel-size") + 1] == "16"
    assert not [p for p in result.placed if p.finding.rule_id in ("KVD201", "KVD202")]


def test_a_parallel_size_from_an_unknown_variable_leaves_the_gpu_count_uncompared(tmp_path):
    path = tmp_path / "lws.yaml"
    path.write_text(LWS_SHELL.replace("LWS_GROUP_SIZE * DP_SIZE_LOCAL", "NODES * DP_SIZE_LOCAL"))
    (result,) = scan([str(path)], tmp_path, gpu="H100").workloads
    assert not [p for p in result.placed if p.finding.rule_id in ("KVD201", "KVD202")]  # was "16 GPUs, uses 1"
    assert any("--data-parallel-size takes its value from $((NODES * DP_SIZE_LOCAL))" in n for n in result.report.notes)
    assert any("the GPU count is not compared" in n for n in result.report.notes)


def test_a_deployment_container_without_an_image_is_a_fragment_named_not_an_error(tmp_path):
    # a Kustomize patch (patch.yaml beside its kustomization.yaml): vLLM flags, no image, no model
    patch = tmp_path / "patch.yaml"
    patch.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: vllm}\nspec:\n  template:\n    spec:\n"
                     "      containers:\n      - name: vllm\n        args: [--max-model-len=8192, "
                     "--gpu-memory-utilization=0.95, --enable-prefix-caching]\n")  # fmt: skip
    report = scan([str(patch)], tmp_path, gpu=None)
    assert not report.workloads  # was an ERROR: "nothing to judge: no model given"
    assert any("a fragment such as a Kustomize patch" in n for n in report.notes)


CONFIG_MAP_VALUES = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: vllm-config, namespace: serving}
data:
  MODEL_NAME: Qwen/Qwen2.5-7B-Instruct
  TP: "2"
"""

CONFIG_MAP_USER = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm, namespace: serving}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.10.2
        command: [sh, -c, "vllm serve $MODEL_NAME --tensor-parallel-size $(TP) --max-model-len $LEN"]
        env:
        - name: TP
          valueFrom: {configMapKeyRef: {name: vllm-config, key: TP}}
        envFrom:
        - configMapRef: {name: vllm-config}
        resources: {limits: {nvidia.com/gpu: 1}}
"""


def test_env_from_a_config_map_in_another_scanned_file_gives_its_values_on_its_lines(tmp_path):
    (tmp_path / "config.yaml").write_text(CONFIG_MAP_VALUES)
    (tmp_path / "deploy.yaml").write_text(CONFIG_MAP_USER)
    (result,) = scan([str(tmp_path)], tmp_path, gpu="L4").workloads
    words = [t.text for t in result.workload.argv]
    assert words[:3] == ["Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "2"]
    assert any("--max-model-len takes its value from $LEN" in n for n in result.report.notes)  # not in the ConfigMap
    (short,) = [p for p in result.placed if p.finding.rule_id == "KVD201"]  # TP 2 (the ConfigMap's) on 1 GPU
    tp = next(e for e in result.workload.env if e.name == "TP")
    file, line = result.workload.where(tp.line)
    assert (tp.value, Path(file).name, line) == ("2", "config.yaml", 6)  # config.yaml's line, where it is written
    alone = scan([str(tmp_path / "deploy.yaml")], tmp_path, gpu="L4").workloads[0]  # the ConfigMap not scanned
    assert not [p for p in alone.placed if p.finding.rule_id == "KVD201"]
    assert any("--tensor-parallel-size takes its value from $(TP)" in n for n in alone.report.notes)


def test_a_vllm_image_run_without_a_command_serves_the_releases_default_model(tmp_path):
    """A Compose service that runs vllm/vllm-openai with no command (a real public file): vLLM serves its parser's
    `--model` default, so the workload is checked with it (said in a note), not an input error."""
    from kvdoctor.check.run import CheckSettings
    from kvdoctor.scan.judge import ScanDefaults
    from kvdoctor.scan.run import run_scan

    compose = tmp_path / "docker-compose.yml"
    compose.write_text("services:\n  llm:\n    image: vllm/vllm-openai:v0.8.5\n"
                       "  llm-new:\n    image: vllm/vllm-openai:v0.25.1\n")
    report = run_scan([str(compose)], ScanDefaults(offline=True, cache_dir=tmp_path / "cache"), CheckSettings(compile=False))
    results = {r.workload.name: r for r in report.workloads}
    assert set(results) == {"llm", "llm-new"}
    for name, default in (("llm", "facebook/opt-125m"), ("llm-new", "Qwen/Qwen3-0.6B")):
        result = results[name]
        assert result.error is None and result.report is not None, result.error
        assert any(f"serves its parser's default, {default}" in n for n in result.workload.notes + result.report.notes)
        assert result.sources["model."].what == f"model {default} (vLLM's default)"


def test_an_unread_release_between_two_read_ones_serves_their_agreeing_default(tmp_path):
    """vLLM 0.11.1 (not read; 0.11.0 and 0.11.2 are) run with no model: both neighbours' parsers default to
    Qwen/Qwen3-0.6B, so that is the model, said with where it comes from; a release past the newest read has no
    neighbour above it and stays an input error (no model to judge)."""
    from kvdoctor.check.run import CheckSettings
    from kvdoctor.scan.judge import ScanDefaults
    from kvdoctor.scan.run import run_scan

    compose = tmp_path / "docker-compose.yml"
    compose.write_text("services:\n  between:\n    image: vllm/vllm-openai:v0.11.1\n"
                       "  beyond:\n    image: vllm/vllm-openai:v9.0.0\n")
    report = run_scan([str(compose)], ScanDefaults(offline=True, cache_dir=tmp_path / "cache"), CheckSettings(compile=False))
    results = {r.workload.name: r for r in report.workloads}
    between = results["between"]
    assert between.error is None and between.report is not None, between.error
    assert any("serves its parser's default, Qwen/Qwen3-0.6B (the default of 0.11.0 and 0.11.2" in n
               for n in between.workload.notes + between.report.notes)
    assert results["beyond"].error is not None and "no model given" in str(results["beyond"].error)


WRAPPED = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: wrapped
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: {image}
          command: ["/scripts/startup.sh"]
          args: ["--served-model-name=chat", "--kv-cache-dtype=fp8", "--max-model-len=8192"]
          resources:
            limits:
              nvidia.com/gpu: 1
"""


def test_a_wrapper_script_given_vllm_options_on_a_vllm_image_is_vllm_with_its_model_unknown(tmp_path):
    # castai's hosted-model chart: command /scripts/startup.sh (a ConfigMap's `exec vllm serve --model=X "$@"`)
    (tmp_path / "d.yaml").write_text(WRAPPED.format(image="vllm/vllm-openai:v0.11.2"))
    _, (wrapped,), _ = find_workloads([str(tmp_path / "d.yaml")])
    assert [t.text for t in wrapped.argv][1:] == ["--served-model-name=chat", "--kv-cache-dtype=fp8",
                                                 "--max-model-len=8192"]  # fmt: skip
    assert any("runs /scripts/startup.sh with vLLM serve options" in n for n in wrapped.notes)
    (result,) = scan([str(tmp_path / "d.yaml")], tmp_path).workloads
    assert result.report.facts["serve.kv_cache_dtype"] == "fp8"
    # the script names the model (unknown here), never vLLM's default (Qwen/Qwen3-0.6B for 0.11.2)
    assert [u.split(" not read")[0] for u in result.unjudged] == ["model unknown: $(/scripts/startup.sh)"]
    (tmp_path / "d.yaml").write_text(WRAPPED.format(image="nginx:1.27"))  # the same command on another image
    assert find_workloads([str(tmp_path / "d.yaml")])[1] == []


def test_an_unquoted_variable_of_options_under_sh_c_is_split_into_its_words(tmp_path):
    # take566/kubernetes' cpu overlay: exec python3 -m vllm.entrypoints.openai.api_server ... ${VLLM_EXTRA_ARGS}
    path = tmp_path / "d.yaml"
    path.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: v}\nspec:\n  template:\n    spec:\n"
                    "      containers:\n      - name: vllm\n        image: vllm/vllm-openai:v0.10.2\n"
                    "        command: [sh, -c, 'exec vllm serve \"$MODEL\" ${EXTRA}']\n"
                    "        env: [{name: MODEL, value: facebook/opt-125m},"
                    " {name: EXTRA, value: '--max-model-len 1024 --enforce-eager'}]\n")  # fmt: skip
    (result,) = scan([str(path)], tmp_path).workloads
    assert [t.text for t in result.workload.argv] == ["facebook/opt-125m", "--max-model-len", "1024", "--enforce-eager"]
    assert result.error is None and not [p for p in result.placed if p.finding.rule_id == "KVD004"]


def test_vllm_options_given_as_command_replace_the_entrypoint_an_error_the_rest_still_judged(tmp_path):
    """`command: ["--model", M, ...]` (not args) replaces the image's ENTRYPOINT: the container execs "--model"
    (KVD211 at the command, a real public Deployment of manifest batch s47); the options are still judged as vllm
    serve's (a refused flag is KVD004). `args` alone, or a command that starts with a program, is no KVD211."""
    path = rel("command-as-options.yaml")
    results = {r.workload.container: r for r in scan([path], tmp_path).workloads}
    execs = finding(results["vllm"], "KVD211")
    assert execs.finding.status == "fired" and execs.location.line == 11 and "--model" in execs.finding.title
    assert any(p.finding.rule_id == "KVD004" and p.finding.status == "fired" for p in results["vllm"].placed)
    for name in ("fine", "launcher"):
        assert not any(p.finding.rule_id == "KVD211" and p.finding.status == "fired" for p in results[name].placed)


DP_RANK_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: dp-rank-0}
spec:
  containers:
  - name: engine
    image: vllm/vllm-openai:v0.25.1
    command: [python3, -m, vllm.entrypoints.openai.api_server, --model, Qwen/Qwen3-8B,
              --data-parallel-address, $(ENTRY_ADDRESS), --data-parallel-rank, "0", --data-parallel-size, "2"RANK_EXTRA]
    resources: {limits: {nvidia.com/gpu: "1"}}
"""


def test_a_data_parallel_rank_launched_on_its_own_needs_the_gpus_of_one_rank(tmp_path):
    # batch s69 (volcano-sh/kthena data-parallel-deployment.yaml): DP 2 over two pods, one rank and one GPU each
    path = tmp_path / "dp.yaml"
    path.write_text(DP_RANK_POD.replace("RANK_EXTRA", ""))
    (result,) = scan([str(path)], tmp_path, gpu="H100").workloads
    assert not [p for p in result.placed if p.finding.rule_id == "KVD201"]
    path.write_text(DP_RANK_POD.replace("RANK_EXTRA", "").replace(", --data-parallel-rank, \"0\"", ""))
    (result,) = scan([str(path)], tmp_path, gpu="H100").workloads  # no rank: this pod runs both ranks, on 1 GPU
    assert [p.finding.status for p in result.placed if p.finding.rule_id == "KVD201"] == ["fired"]
