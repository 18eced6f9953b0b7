"""Shapes found by scanning real public files gathered in round s136 (written here in their forms, not copied):
an interpolation whose default holds spaces, a wrapper module named for vLLM's server, words placed on their own
lines in a long script whose quoting the shell removes."""

from __future__ import annotations

from scan_support import by_name, scan, write_tree

from kvdoctor.check.run import CheckSettings
from kvdoctor.scan.command import script_commands, shell_split
from kvdoctor.scan.judge import ScanDefaults
from kvdoctor.scan.run import run_scan


def _scan_as(path, tmp_path, version: str):
    return run_scan([str(path)], ScanDefaults(gpu="A100", vllm_version=version, offline=True,
                                              cache_dir=tmp_path / "cache"), CheckSettings(compile=False))


def test_an_expansion_whose_default_holds_spaces_is_one_word():
    assert shell_split("--enable-chunked-prefill ${TOOL_FLAGS:- } --port 8000") == [
        "--enable-chunked-prefill", "${TOOL_FLAGS:- }", "--port", "8000"]
    assert shell_split("${ARGS-a b ${X:-c d}} 'q r'") == ["${ARGS-a b ${X:-c d}}", "q r"]


def test_compose_blank_default_is_the_hosts_words_and_a_default_with_spaces_is_split(tmp_path):
    """`${TOOL_FLAGS:- }` is no `}` argument (was a false KVD004 'unrecognized arguments: }'); `${EXTRA-a b}` gives its
    default's words, which vLLM's parser judges one by one."""
    root = write_tree(tmp_path / "repo", {"docker-compose.yml": """services:
  chat:
    image: vllm/vllm-openai:v0.23.0
    command: >
      --model openai/gpt-oss-20b
      --max-num-seqs ${MAX_SEQS:-2}
      --no-enable-prefix-caching
      ${TOOL_FLAGS:- }
  alt:
    image: vllm/vllm-openai:v0.23.0
    command: >-
      ${MODEL_ID:-Qwen/Qwen3-4B-AWQ}
      --max-model-len 8192
      ${EXTRA-'--enforce-eager --tool-call-parser hermes --not-a-vllm-flag'}
"""})
    served = by_name(scan([str(root / "docker-compose.yml")], tmp_path))
    chat = served["chat"]
    assert not any(p.finding.rule_id == "KVD004" and p.finding.status == "fired" for p in chat.placed)
    assert "${TOOL_FLAGS}" in [t.text for t in chat.workload.argv]
    alt = served["alt"]
    refused = [p.finding for p in alt.placed if p.finding.rule_id == "KVD004" and p.finding.status == "fired"]
    assert refused and "--not-a-vllm-flag" in refused[0].title and "--enforce-eager" not in refused[0].title


SKYRL_LIKE = """#!/usr/bin/env bash
set -euo pipefail
MODULE="${MODULE:-myrl.inference_servers.vllm_server_actor}"
split_csv() {
  local -a parts=()
  IFS=',' read -r -a parts <<<"$1"
  printf '%s\\n' "${parts[@]}"
}
# a long stretch of the script between
join_group() {
  local -a group=("$@")
  printf '%s\\n' "$(IFS=,; echo "${group[*]}")"
}
PORTS=(18000 18001)
for idx in "${!PORTS[@]}"; do
  SERVER_IDX="$idx" CUDA_VISIBLE_DEVICES="0,1" "$PYTHON_BIN" \\
    -m "$MODULE" \\
    --model /models/Qwen3-32B \\
    --tensor-parallel-size 2 \\
    --max-model-len 32768 \\
    --enable-prefix-caching \\
    --worker-extension-cls myrl.workers.Wrap \\
    --rollout-group "$idx" \\
    >"log.$idx" 2>&1 &
done
wait
"""


def test_a_module_named_for_vllms_server_run_with_vllms_flags_is_its_serve(tmp_path):
    root = write_tree(tmp_path / "repo", {"start_servers.sh": SKYRL_LIKE})
    (result,) = _scan_as(root / "start_servers.sh", tmp_path, "0.26.0").workloads
    assert result.workload.container == "$PYTHON_BIN -m myrl.inference_servers.vllm_server_actor"
    assert result.workload.line == 16
    assert result.report.facts["serve.tensor_parallel_size"] == 2
    # the option no vLLM release has is the wrapper's own: named, never judged
    assert not any(p.finding.rule_id == "KVD004" and p.finding.status == "fired" for p in result.placed)
    assert any("a wrapper of vLLM's server" in n and "--rollout-group" in n for n in result.workload.notes)


def test_another_module_with_the_same_flags_is_no_vllm_workload(tmp_path):
    root = write_tree(tmp_path / "repo", {"bench.sh": SKYRL_LIKE.replace("vllm_server_actor", "rollout_bench")})
    assert not _scan_as(root / "bench.sh", tmp_path, "0.26.0").workloads


def test_a_word_the_shell_unquoted_is_placed_near_the_last_one_not_where_it_recurs_below():
    commands = script_commands(SKYRL_LIKE, 1)
    read = next(c for c in commands if c[0].text == "IFS=,")
    assert read[0].line == 6  # not line 12's `$(IFS=,; echo ...)`
    launch = next(c for c in commands if c[0].text.startswith("SERVER_IDX="))
    assert launch[0].line == 16


PULUMI = """import * as pulumi from "@pulumi/pulumi";
import * as kubernetes from "@pulumi/kubernetes";

const config = new pulumi.Config();
const vllmVersion = "v0.8.5";
const modelId = "Qwen/Qwen2.5-32B-Instruct";
const ns = new kubernetes.core.v1.Namespace("llm", { metadata: { name: "llm" } });

export const server = new kubernetes.apps.v1.StatefulSet("vllm-server", {
    metadata: { namespace: ns.metadata.name, name: "vllm-qwen" },
    spec: {
        serviceName: "vllm",
        replicas: config.getNumber("replicas") ?? 1,
        selector: { matchLabels: { app: "vllm" } },
        template: {
            metadata: { labels: { app: "vllm" } },
            spec: {
                nodeSelector: { "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB" },
                containers: [{
                    name: "server",
                    image: `vllm/vllm-openai:${vllmVersion}`,
                    command: ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                    args: [
                        "--model", modelId,
                        "--tensor-parallel-size", "4",
                        "--max-model-len", "32768",
                        "--disable-log-requests",
                    ],
                    env: [{ name: "HF_TOKEN", valueFrom: { secretKeyRef: { name: "hf", key: "token" } } }],
                    resources: { limits: { "nvidia.com/gpu": 2 } },
                }],
            },
        },
    },
}, { provider: undefined });
"""


def test_a_pulumi_typescript_program_s_kubernetes_workload_is_read_as_the_object_it_creates(tmp_path):
    """@pulumi/kubernetes's `new kubernetes.apps.v1.StatefulSet(name, {...})`: its literal is the object's fields,
    the program's constants put in (a template string too), a value code computes left out (replicas)."""
    root = write_tree(tmp_path / "infra", {"index.ts": PULUMI})
    (result,) = scan([str(root / "index.ts")], tmp_path, gpu=None).workloads
    assert (result.workload.kind, result.workload.name) == ("StatefulSet", "vllm-qwen")
    assert result.workload.image == "vllm/vllm-openai:v0.8.5" and result.report.facts["vllm.version"] == "0.8.5"
    assert result.report.facts["gpu.name"].startswith("A100")
    lines = PULUMI.splitlines()
    parallel = next(p for p in result.placed if p.finding.rule_id == "KVD201")
    assert parallel.finding.status == "fired"
    assert lines[parallel.location.line - 1].strip().startswith('resources: { limits: { "nvidia.com/gpu": 2')


def test_a_program_that_declares_no_workload_object_is_named_not_read(tmp_path):
    root = write_tree(tmp_path / "infra", {"index.ts": 'const image = "vllm/vllm-openai:v0.9.2";\n'
                                                     'export const x = deployImage(image);\n'})
    report = scan([str(root / "index.ts")], tmp_path)
    assert not report.workloads and any("a TypeScript program that names a vLLM launch" in n for n in report.notes)


def test_a_cloud_config_user_data_that_pip_installs_vllm_runs_that_release_in_the_unit_it_writes(tmp_path):
    """Terraform's `user_data = templatefile("cloud-init.yaml.tpl", {...})`: the unit in write_files runs the vLLM
    the runcmd pip-installs (the module's variable default fills the template)."""
    root = write_tree(tmp_path / "infra", {
        "main.tf": 'module "vllm" {\n  source = "./modules/vllm"\n  model  = "Qwen/Qwen2.5-7B-Instruct"\n}\n',
        "modules/vllm/variables.tf": 'variable "model" { type = string }\nvariable "vllm_version" {\n'
                                     '  type    = string\n  default = "0.9.2"\n}\n',
        "modules/vllm/main.tf": 'resource "aws_instance" "vllm" {\n  instance_type = "g5.2xlarge"\n'
                                '  user_data = templatefile("${path.module}/cloud-init.yaml.tpl", {\n'
                                '    model = var.model\n    vllm_version = var.vllm_version\n  })\n}\n',
        "modules/vllm/cloud-init.yaml.tpl": """#cloud-config
write_files:
  - path: /etc/systemd/system/vllm.service
    content: |
      [Service]
      ExecStart=/opt/vllm/bin/vllm serve ${model} --port 8000 --max-model-len 8192
runcmd:
  - python3 -m venv /opt/vllm
  - /opt/vllm/bin/pip install vllm==${vllm_version}
  - systemctl enable --now vllm
"""})
    (result,) = scan([str(root)], tmp_path, gpu=None).workloads
    assert result.report.facts["vllm.version"] == "0.9.2"
    assert "Qwen/Qwen2.5-7B-Instruct" in [t.text for t in result.workload.argv]
    assert result.report.facts["gpu.name"].startswith("A10G")


def test_systemd_specifiers_are_the_values_systemd_puts_in_not_literal_words(tmp_path):
    """A template unit's `--port %i` is the instance name, unknown here (was a false KVD004 'invalid int value: %i');
    `%h` is the home directory; `%%` is a percent sign."""
    root = write_tree(tmp_path / "units", {"vllm@.service": """[Service]
Environment="MODEL=Qwen/Qwen2.5-7B-Instruct" "TP=2"
ExecStart=%h/.venv/bin/vllm serve ${MODEL} --port %i --tensor-parallel-size ${TP} \\
    --served-model-name qwen-%%i
"""})
    (result,) = scan([str(root / "vllm@.service")], tmp_path).workloads
    assert not any(p.finding.rule_id == "KVD004" and p.finding.status == "fired" for p in result.placed)
    assert any("--port takes its value from ${UNIT_INSTANCE}" in n for n in result.report.notes + result.workload.notes)
    words = [t.text for t in result.workload.argv]
    assert "qwen-%i" in words and result.report.facts["serve.tensor_parallel_size"] == 2


def test_a_kubernetes_object_written_as_json_is_read_by_a_directory_walk(tmp_path):
    root = write_tree(tmp_path / "k8s", {"vllm.json": """{
  "apiVersion": "apps/v1",
  "kind": "Deployment",
  "metadata": {"name": "vllm-json"},
  "spec": {"template": {"spec": {"containers": [{
    "name": "vllm", "image": "vllm/vllm-openai:v0.10.2",
    "args": ["--model", "Qwen/Qwen2.5-1.5B-Instruct", "--tensor-parallel-size", "2"],
    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
}
""", "package.json": '{"name": "ui", "dependencies": {"vllm-client": "1.0.0"}}\n'})
    (result,) = scan([str(root)], tmp_path).workloads
    assert result.workload.name == "vllm-json"
    assert next(p for p in result.placed if p.finding.rule_id == "KVD201").finding.status == "fired"  # 1 GPU, TP 2


def test_a_modal_class_parameter_s_default_is_the_model_its_llm_loads(tmp_path):
    """`model_id: str = modal.parameter(default="...")` read in `LLM(model=self.model_id)`: the default runs unless the
    caller names another; a name two classes give different values stays unknown."""
    root = write_tree(tmp_path / "app", {"app.py": '''import modal
app = modal.App("offline")
image = modal.Image.debian_slim().pip_install("vllm==0.9.2")

@app.cls(gpu="A100-80GB:2", image=image)
class Generator:
    model_id: str = modal.parameter(default="Qwen/Qwen2.5-72B-Instruct-AWQ")
    max_len = 32768

    @modal.enter()
    def start(self):
        from vllm import LLM
        self.llm = LLM(model=self.model_id, tensor_parallel_size=2, max_model_len=self.max_len)
'''})
    (result,) = scan([str(root / "app.py")], tmp_path, gpu=None).workloads
    words = [t.text for t in result.workload.argv]
    assert "Qwen/Qwen2.5-72B-Instruct-AWQ" in words and result.report.facts["serve.max_model_len"] == 32768


def test_a_case_block_that_picks_the_model_is_one_workload_per_arm(tmp_path):
    """`case "$SIZE" in small) ... ;; large) ... ;; esac` then `vllm serve "$MODEL" -tp "$TP"`: each arm's values, as an
    `if` block's branches are (an arm on one line too); the default arm that only exits sets nothing."""
    root = write_tree(tmp_path / "bin", {"serve.sh": """#!/bin/bash
SIZE=${1:-small}
case "$SIZE" in
  small)
    MODEL=Qwen/Qwen2.5-7B-Instruct
    TP=1
    ;;
  large) MODEL=Qwen/Qwen2.5-72B-Instruct; TP=4 ;;
  *) echo "unknown size"; exit 1 ;;
esac
vllm serve "$MODEL" --tensor-parallel-size "$TP" --max-model-len 16384
"""})
    results = scan([str(root / "serve.sh")], tmp_path).workloads
    seen = sorted((next(t.text for t in r.workload.argv if t.text.startswith("Qwen/")),
                   r.report.facts["serve.tensor_parallel_size"]) for r in results)
    assert seen == [("Qwen/Qwen2.5-72B-Instruct", 4), ("Qwen/Qwen2.5-7B-Instruct", 1)]
    assert all(any("`case` arm" in n and "SIZE=" in n for n in r.workload.notes) for r in results)


def test_a_for_loop_over_literal_models_is_one_workload_per_item(tmp_path):
    """`for model in A B; do vllm serve $model ...; done`: each item, its body's own assignments shared by all; a loop
    over words the script computes stays one workload with the variable unknown."""
    root = write_tree(tmp_path / "bin", {"serve_all.sh": """#!/bin/bash
PORT=8000
for model in Qwen/Qwen2.5-0.5B-Instruct Qwen/Qwen2.5-1.5B-Instruct; do
  nohup vllm serve $model --port $PORT --gpu-memory-utilization 0.4 > "log_$PORT.txt" 2>&1 &
  PORT=$((PORT+1))
done
wait
""", "computed.sh": """#!/bin/bash
for model in $(cat models.txt); do
  vllm serve $model --gpu-memory-utilization 0.4 &
done
"""})
    served = scan([str(root / "serve_all.sh")], tmp_path).workloads
    assert sorted(t.text for r in served for t in r.workload.argv if t.text.startswith("Qwen/")) == [
        "Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct"]
    assert len(scan([str(root / "computed.sh")], tmp_path).workloads) == 1


def test_a_pulumi_program_cut_short_at_its_end_is_no_traceback(tmp_path):
    root = write_tree(tmp_path / "infra", {"index.ts": 'import * as k8s from "@pulumi/kubernetes";\n'
                                                     'new k8s.apps.v1.Deployment(prefix + name + suffix'})
    report = scan([str(root / "index.ts")], tmp_path)
    assert not report.workloads and report.unread == ()
