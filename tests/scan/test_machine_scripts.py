"""Two shapes of batch s46 (spent): a Terraform `helm_release` of a chart in the repository (rendered as the helm
provider installs it: its name, namespace, values and set entries; the chart not also rendered with its defaults),
and a script a cloud machine runs at boot held in an object scan does not read (a Crossplane claim's userData, a
Terraform aws_instance's user_data heredoc, cloud-init's runcmd inside it), read as a script with the machine's
instance type naming its GPU. Written from the helm provider's helm_release documentation and cloud-init's."""

from __future__ import annotations

from scan_support import scan, write_tree

from kvdoctor.scan.run import read_manifests

CHART = {
    "vllm-chart/Chart.yaml": "apiVersion: v2\nname: vllm-chart\nversion: 0.1.0\n",
    "vllm-chart/values.yaml": "image: {repository: vllm/vllm-openai, tag: v0.25.1}\n"
                              "command: vllm serve __MODEL__\ngpus: 1\n",
    "vllm-chart/templates/deployment.yaml": """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-{{ .Chart.Name }}
  namespace: {{ .Release.Namespace }}
spec:
  template:
    spec:
      containers:
        - name: {{ .Chart.Name }}
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
          command: ["/bin/sh", "-c"]
          args: [{{ .Values.command | quote }}]
          resources:
            limits:
              nvidia.com/gpu: {{ .Values.gpus | quote }}
""",
}

HELM_TF = """\
resource "helm_release" "gpu" {
  name      = "qwen"
  chart     = "./vllm-chart"
  namespace = "llm"
  values = [
    <<-EOT
    command: "vllm serve Qwen/Qwen3-8B --max-model-len 8192 --swap-space 4"
    EOT
  ]
  set {
    name  = "gpus"
    value = "2"
  }
}

resource "helm_release" "other" {
  name       = "remote"
  chart      = "vllm"
  repository = "https://charts.example.com"
  values     = [file("${path.module}/remote-values.yaml")]
}
"""


def test_a_terraform_helm_release_of_a_chart_in_the_tree_is_rendered_with_its_values(tmp_path):
    root = write_tree(tmp_path, CHART | {"helm.tf": HELM_TF, "remote-values.yaml": "model: vllm\n"})
    _, workloads, notes, unread = read_manifests([str(root)])
    assert not unread
    (workload,) = workloads  # the chart is not also rendered alone with its placeholder model
    assert (workload.name, workload.namespace, workload.container) == ("qwen-vllm-chart", "llm", "vllm-chart")
    assert workload.gpu_limit == 2  # the `set` block over the heredoc values over the chart's
    assert "Qwen/Qwen3-8B" in [t.text for t in workload.argv]
    assert any("by Terraform helm_release gpu" in n for n in workload.notes)
    assert any("the chart is rendered as Terraform helm_release gpu installs it" in n for n in notes)
    assert any("helm_release other installs chart vllm from https://charts.example.com" in n for n in notes)


def test_the_rendered_release_is_judged(tmp_path):
    root = write_tree(tmp_path, CHART | {"helm.tf": HELM_TF})
    report = scan([str(root)], tmp_path, gpu=None)
    (result,) = report.workloads
    refused = [p for p in result.placed if p.finding.rule_id == "KVD004" and p.finding.status == "fired"]
    assert refused and "--swap-space" in refused[0].finding.title + str(refused[0].finding.evidence)


CROSSPLANE = """\
apiVersion: aws.example.io/v1alpha1
kind: XInstance
metadata: {name: vllm-8b}
spec:
  instanceType: g5.xlarge
  userData: |
    #!/bin/bash
    dnf install -y docker && systemctl enable --now docker
    docker run -d --gpus all -p 8000:8000 vllm/vllm-openai:v0.25.1 \\
      --model meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192
"""


def test_a_script_in_the_user_data_of_an_unread_kind_is_read_on_its_lines(tmp_path):
    path = tmp_path / "vllm-8b.yaml"
    path.write_text(CROSSPLANE)
    _, (workload,), notes, _ = read_manifests([str(path)])
    assert (workload.name, workload.container, workload.line) == ("vllm-8b.yaml", "docker run", 9)
    assert workload.image == "vllm/vllm-openai:v0.25.1"
    assert [(s.key, s.values) for s in workload.gpu_selectors] == [("node.kubernetes.io/instance-type",
                                                                    ("g5.xlarge",))]  # fmt: skip
    assert not any("does not read kind XInstance" in n for n in notes)
    report = scan([str(path)], tmp_path, gpu=None)
    assert report.workloads[0].report.facts["gpu.name"] == "A10G"


def test_cloud_config_runcmd_in_a_terraform_instance_user_data(tmp_path):
    path = tmp_path / "main.tf"
    path.write_text("""\
resource "aws_instance" "vllm" {
  instance_type = "g6e.xlarge"
  user_data     = <<-EOF
    #cloud-config
    runcmd:
      - [docker, run, --gpus, all, vllm/vllm-openai:v0.25.1, --model, Qwen/Qwen3-8B, --swap-space, "4"]
  EOF
}
""")
    _, (workload,), _, _ = read_manifests([str(path)])
    assert workload.line == 6 and workload.image == "vllm/vllm-openai:v0.25.1"
    assert [t.text for t in workload.argv][:2] == ["--model", "Qwen/Qwen3-8B"]


def test_a_configmap_script_is_not_read_twice(tmp_path):
    path = tmp_path / "cm.yaml"
    path.write_text("""\
apiVersion: v1
kind: ConfigMap
metadata: {name: start}
data:
  start.sh: |
    vllm serve Qwen/Qwen3-8B
""")
    _, workloads, _, _ = read_manifests([str(path)])
    assert workloads == []  # a ConfigMap's script runs where a pod mounts it (mounted_scripts.py), not here


APP_TEMPLATE_RELEASE = """\
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: vllm}
spec:
  chartRef: {kind: OCIRepository, name: app-template}
  values:
    defaultPodOptions:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-L40S}
    controllers:
      vllm:
        containers:
          app:
            image: {repository: vllm/vllm-openai, tag: v0.25.1}
            args: [--model, Qwen/Qwen3-8B, --swap-space, "4"]
            env:
              HF_HOME: /cache
            resources:
              limits: {nvidia.com/gpu: 1}
      embed:
        containers:
          main:
            image: {repository: vllm/vllm-openai, tag: v0.25.1}
            command: [vllm, serve, BAAI/bge-m3]
"""


def test_a_flux_release_of_bjw_s_app_template_is_read_from_its_values(tmp_path):
    path = tmp_path / "helmrelease.yaml"
    path.write_text(APP_TEMPLATE_RELEASE)
    _, workloads, _, unread = read_manifests([str(path)])
    assert not unread
    named = {(w.name, w.container): w for w in workloads}
    # two controllers: release-IDENTIFIER, except the one whose identifier is the release's name
    assert set(named) == {("vllm", "app"), ("vllm-embed", "main")}
    app = named[("vllm", "app")]
    assert app.image == "vllm/vllm-openai:v0.25.1" and app.gpu_limit == 1 and app.line == 11  # the container
    assert [(e.name, e.value) for e in app.env] == [("HF_HOME", "/cache")]
    assert [(s.key, s.values) for s in app.gpu_selectors] == [("nvidia.com/gpu.product", ("NVIDIA-L40S",))]
    report = scan([str(path)], tmp_path, gpu=None)
    fired = {r.workload.container: {p.finding.rule_id for p in r.placed if p.finding.status == "fired"}
             for r in report.workloads}  # fmt: skip
    assert "KVD004" in fired["app"]  # --swap-space, gone from 0.25.1's parser


PRODUCTION_STACK_APP = """\
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: stack}
spec:
  destination: {namespace: llm}
  source:
    repoURL: https://vllm-project.github.io/production-stack
    chart: vllm-stack
    helm:
      values: |
        servingEngineSpec:
          modelSpec:
          - name: qwen
            repository: vllm/vllm-openai
            tag: v0.25.1
            modelURL: Qwen/Qwen3-8B
            requestGPU: 1
"""


def test_an_argo_application_of_a_remote_production_stack_chart_reads_its_inline_values(tmp_path):
    path = tmp_path / "app.yaml"
    path.write_text(PRODUCTION_STACK_APP)
    _, (workload,), notes, _ = read_manifests([str(path)])
    assert (workload.name, workload.container, workload.line) == ("qwen", "vllm", 13)
    assert any("its inline values read as that chart's values" in n for n in workload.notes)
    assert not any("not checked" in n for n in notes)


def test_an_umbrella_chart_over_a_dependency_not_fetched_reads_its_values(tmp_path):
    root = write_tree(tmp_path, {
        "chart/Chart.yaml": "apiVersion: v2\nname: wrapper\nversion: 0.1.0\ndependencies:\n"
                            "  - {name: vllm-stack, version: 0.1.10, repository: https://example.com/charts}\n",
        "chart/values.yaml": "vllm-stack:\n  servingEngineSpec:\n    modelSpec:\n    - name: llama\n"
                             "      repository: vllm/vllm-openai\n      tag: v0.25.1\n"
                             "      modelURL: meta-llama/Llama-3.1-8B-Instruct\n      requestGPU: 1\n",
        "chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
    })  # fmt: skip
    _, (workload,), _, unread = read_manifests([str(root / "chart")])
    assert not unread  # the dependency is read by its values, not reported unrendered
    assert (workload.name, workload.line) == ("llama", 4)
    assert any("dependency vllm-stack of chart" in n for n in workload.notes)


def test_a_systemd_unit_that_starts_vllm_is_read_on_its_lines(tmp_path):
    path = tmp_path / "vllm.service"
    path.write_text("""\
[Unit]
Description=vLLM
ExecStart=/bin/false

[Service]
Environment="CUDA_VISIBLE_DEVICES=0,1" "MODEL=Qwen/Qwen3-8B"
ExecStart=-/opt/vllm/.venv/bin/vllm serve ${MODEL} \\
  --tensor-parallel-size 2 \\
  --swap-space 4
Restart=always
""")
    _, (workload,), _, _ = read_manifests([str(tmp_path)])  # found by a directory walk too
    assert (workload.name, workload.container, workload.line) == ("vllm.service", "vllm serve", 7)
    assert "Qwen/Qwen3-8B" in [t.text for t in workload.argv]  # systemd expands ${MODEL} from Environment=
    assert next(t.line for t in workload.argv if t.text == "--swap-space") == 9


def test_a_backslash_followed_by_blanks_ends_execstart_as_systemd_reads_it(tmp_path):
    # stop 60 (sistematico/dotfiles): systemd joins a unit's line with the next only when the backslash is its last
    # character; after `\\   ` ExecStart ends (an escaped blank is one more word) and the next lines are no setting
    path = tmp_path / "vllm.service"
    path.write_text("[Service]\nExecStart=/opt/venv/bin/vllm serve Qwen/Qwen3-8B \\\n  --port 8000 \\   \n"
                    "  --max-model-len 2048 \\\n  --gpu-memory-utilization 0.5\n")
    _, (workload,), _, _ = read_manifests([str(path)])
    words = [t.text for t in workload.argv]
    assert "--port" in words and "--max-model-len" not in words and "--gpu-memory-utilization" not in words
    assert any("line 3 of the unit ends in a backslash followed by blanks" in n for n in workload.notes)
    report = scan([str(path)], tmp_path, gpu=None)
    (result,) = report.workloads
    assert any(p.finding.rule_id == "KVD004" and p.finding.status == "fired" for p in result.placed)


def test_nohup_and_exec_run_the_container_command_after_them(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("""\
#!/bin/bash
nohup singularity exec --nv vllm.sif vllm serve Qwen/Qwen3-8B --max-model-len 8192 &
exec docker run --gpus all vllm/vllm-openai:v0.25.1 --model Qwen/Qwen3-4B
""")
    _, workloads, _, _ = read_manifests([str(path)])
    assert sorted((w.container, w.line) for w in workloads) == [("docker run", 3), ("singularity", 2)]


def test_bash_optional_array_expansion_is_left_to_the_environment(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("""\
#!/bin/bash
passthrough=()
for a in "$@"; do passthrough+=("$a"); done
args=(Qwen/Qwen3-8B --max-model-len 8192)
docker run --gpus all vllm/vllm-openai:v0.25.1 "${args[@]}" "${passthrough[@]+"${passthrough[@]}"}"
""")
    report = scan([str(path)], tmp_path, gpu=None)
    (result,) = report.workloads
    assert not [p for p in result.placed if p.finding.rule_id == "KVD004" and p.finding.status == "fired"]


def test_a_systemd_unit_whose_execstart_runs_a_script_kept_beside_it(tmp_path):
    """`ExecStart=/home/u/app/vllm-server.sh` (a host path) and the repository keeps vllm-server.sh beside the unit
    (a real DGX Spark unit of manifest batch s49): the script's vllm serve, with the unit's Environment= values; a
    walk reads the script through the unit, not twice."""
    write_tree(tmp_path, {"vllm.service": """[Service]
Environment=MODEL_REPO=Qwen/Qwen3-8B
Environment=MAX_MODEL_LEN=32768
ExecStart=/home/u/app/vllm-server.sh
""", "vllm-server.sh": """#!/bin/bash
source .venv/bin/activate
exec vllm serve "$MODEL_REPO" --max-model-len "$MAX_MODEL_LEN"
"""})
    _, (workload,), _, _ = read_manifests([str(tmp_path)])
    assert (workload.name, workload.container) == ("vllm.service", "vllm serve")
    assert [t.text for t in workload.argv] == ["Qwen/Qwen3-8B", "--max-model-len", "32768"]
    assert workload.file.endswith("vllm-server.sh") and workload.line == 3
    assert any("read from the vllm-server.sh the repository keeps beside the unit" in n for n in workload.notes)


def test_a_unit_whose_execstart_runs_its_script_through_env_bash(tmp_path):
    """`ExecStart=/usr/bin/env bash /home/%i/app/deploy/start_vllm.sh` (manifest batch s118, a unit in deploy/systemd/):
    env and bash run the script, which the checkout keeps at deploy/start_vllm.sh."""
    write_tree(tmp_path, {"deploy/systemd/vllm.service": """[Service]
Environment=MODEL=Qwen/Qwen3-8B
ExecStart=/usr/bin/env bash /home/%i/app/deploy/start_vllm.sh
""", "deploy/start_vllm.sh": """#!/bin/bash
exec vllm serve "$MODEL" --tensor-parallel-size 2
"""})
    _, (workload,), _, _ = read_manifests([str(tmp_path)])
    assert [t.text for t in workload.argv] == ["Qwen/Qwen3-8B", "--tensor-parallel-size", "2"]
    assert workload.file.endswith("deploy/start_vllm.sh")


def test_a_terraform_helm_release_of_the_remote_production_stack_chart_reads_its_values(tmp_path):
    """A helm_release of vllm-stack from production-stack's repository (not in the tree) with yamlencode() values
    and `set` entries from locals (a real EKS stack of manifest batch s49): the modelSpec its values give."""
    write_tree(tmp_path, {"locals.tf": 'locals {\n  model_name = "llama3-3b"\n  tag = "v0.25.1"\n}\n',
                          "vllm.tf": """resource "helm_release" "stack" {
  name       = "vllm"
  repository = "https://vllm-project.github.io/production-stack"
  chart      = "vllm-stack"
  values = [yamlencode({
    servingEngineSpec = { runtimeClassName = "" }
  })]
  set = [
    { name = "servingEngineSpec.modelSpec[0].name", value = local.model_name },
    { name = "servingEngineSpec.modelSpec[0].repository", value = "vllm/vllm-openai" },
    { name = "servingEngineSpec.modelSpec[0].tag", value = local.tag },
    { name = "servingEngineSpec.modelSpec[0].modelURL", value = "Qwen/Qwen2.5-3B-Instruct" },
    { name = "servingEngineSpec.modelSpec[0].requestGPU", value = "1" },
  ]
}
"""})
    _, (workload,), notes, _ = read_manifests([str(tmp_path / "vllm.tf")])
    assert workload.name == "llama3-3b" and workload.image == "vllm/vllm-openai:v0.25.1"
    assert workload.gpu_limit == 1 and workload.line == 1
    assert not any("not rendered here" in n for n in notes)


def test_a_unit_running_a_vllm_launcher_not_in_the_tree_is_named_not_checked(tmp_path):
    # batch s61 (MasonGillDev/SLYDInference): the launcher was deleted upstream, its JSON config kept
    unit = ("[Unit]\nDescription=vLLM\n[Service]\nExecStart=/usr/bin/python3 /root/app/launch_vllm_server.py "
            "--config /root/app/vllm_config.json\n[Install]\nWantedBy=multi-user.target\n")
    root = write_tree(tmp_path / "repo", {"vllm-server.service": unit})
    files, found, notes, unread = read_manifests([str(root)])
    assert found == [] and any("runs /root/app/launch_vllm_server.py" in n and "not checked" in n for n in notes)


UNIT_BODY = """\
[Unit]
Description=vLLM
[Service]
ExecStart=/opt/vllm/bin/vllm serve mistralai/Mistral-7B-Instruct-v0.3 --tensor-parallel-size 4
Restart=always
[Install]
WantedBy=multi-user.target
"""


def test_a_script_that_pip_installs_vllm_and_writes_its_unit_runs_that_release(tmp_path):
    """`pip install vllm==X`, then `tee /etc/systemd/system/vllm.service <<EOF`: the unit runs release X."""
    path = tmp_path / "setup.sh"
    path.write_text("#!/bin/bash\npython3 -m venv /opt/vllm && /opt/vllm/bin/pip install vllm==0.8.5\n"
                    f"sudo tee /etc/systemd/system/vllm.service > /dev/null <<EOF\n{UNIT_BODY}EOF\n"
                    "sudo systemctl enable --now vllm\n")
    _, (workload,), _, _ = read_manifests([str(path)])
    assert workload.vllm_pin == "0.8.5" and workload.vllm_pin_line == 2


def test_a_boot_script_that_pip_installs_vllm_and_writes_its_unit_in_terraform_user_data(tmp_path):
    indented = "".join(f"    {line}\n" for line in UNIT_BODY.splitlines())
    path = tmp_path / "main.tf"
    path.write_text('resource "aws_instance" "vllm" {\n  instance_type = "g5.12xlarge"\n  user_data = <<-EOT\n'
                    "    #!/bin/bash\n    pip install vllm==0.10.2\n"
                    f"    cat > /etc/systemd/system/vllm.service <<EOF\n{indented}    EOF\n"
                    "    systemctl enable --now vllm\n  EOT\n}\n")
    (result,) = scan([str(path)], tmp_path, gpu=None).workloads
    assert result.report.facts["vllm.version"] == "0.10.2" and result.report.facts["gpu.name"] == "A10G"
