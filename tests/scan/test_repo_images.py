"""Batch s71 (stop 42): a Kubernetes container that gives no command and runs an image the repository builds is read
on the Dockerfile near the manifest that runs vLLM (the only one, or the only one named like the image), within the
scanned paths or the git checkout; an ENTRYPOINT script that ends in `exec "$@"` runs the image's CMD."""

from __future__ import annotations

from scan_support import write_tree

from kvdoctor.scan.run import read_manifests

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: chat
spec:
  template:
    spec:
      containers:
      - name: server
        image: registry.example.com/team/IMAGE:v3
        args: ARGS
        resources:
          limits:
            nvidia.com/gpu: 1
      - name: metrics
        image: registry.example.com/team/exporter:v1
"""
DOCKERFILE = """\
FROM vllm/vllm-openai:v0.10.1.1
ENV VLLM_LOGGING_LEVEL=INFO
CMD ["--model", "Qwen/Qwen2.5-0.5B-Instruct", "--max-model-len", "4096"]
"""


def _deployment(image: str = "chat-server", args: str = "[]") -> str:
    return DEPLOYMENT.replace("IMAGE", image).replace("ARGS", args)


def test_a_container_without_a_command_runs_the_dockerfile_beside_its_manifest(tmp_path):
    root = write_tree(tmp_path / "repo", {"k8s/deploy.yaml": _deployment(), "docker/Dockerfile": DOCKERFILE})
    (workload,) = read_manifests([str(root)])[1]  # the exporter (no GPU, no vLLM in its names) is not taken
    assert (workload.container, workload.image, workload.platform) == ("server", "vllm/vllm-openai:v0.10.1.1",
                                                                       "kubernetes")
    assert [t.text for t in workload.argv] == ["--model", "Qwen/Qwen2.5-0.5B-Instruct", "--max-model-len", "4096"]
    assert workload.gpu_limit == 1
    assert "is taken to be built from" in workload.notes[0] and "docker/Dockerfile" in workload.notes[0]


def test_the_containers_args_replace_the_images_cmd(tmp_path):
    root = write_tree(tmp_path / "repo", {"deploy.yaml": _deployment(args='["--model", "Qwen/Qwen3-8B"]'),
                                          "Dockerfile": DOCKERFILE})  # fmt: skip
    (workload,) = read_manifests([str(root)])[1]
    assert [t.text for t in workload.argv] == ["--model", "Qwen/Qwen3-8B"]


def test_of_several_vllm_dockerfiles_the_one_named_like_the_image_is_taken_and_none_when_no_name_tells(tmp_path):
    other = DOCKERFILE.replace("Qwen2.5-0.5B-Instruct", "meta-llama/Llama-3.1-8B")
    tree = {"k8s/deploy.yaml": _deployment("qwen-chat"), "images/qwen/Dockerfile": DOCKERFILE,
            "images/llama/Dockerfile": other}  # fmt: skip
    def pods(root):  # each Dockerfile is a workload of the walk too: the Deployment's is the one asked about
        return [w for w in read_manifests([str(root)])[1] if w.platform == "kubernetes"]

    (workload,) = pods(write_tree(tmp_path / "a", tree))
    assert workload.argv[1].text == "Qwen/Qwen2.5-0.5B-Instruct"
    tree["k8s/deploy.yaml"] = _deployment("chat-server")
    assert pods(write_tree(tmp_path / "b", tree)) == []


def test_a_dockerfile_outside_the_scanned_paths_and_the_checkout_is_not_taken(tmp_path):
    root = write_tree(tmp_path / "repos", {"one/k8s/deploy.yaml": _deployment(), "two/Dockerfile": DOCKERFILE})
    assert read_manifests([str(root / "one" / "k8s" / "deploy.yaml")])[1] == []
    (root / "one" / ".git").mkdir()  # the checkout's root is one/: its Dockerfiles count, two/'s never
    write_tree(root / "one", {"Dockerfile": DOCKERFILE})
    assert len(read_manifests([str(root / "one" / "k8s" / "deploy.yaml")])[1]) == 1


def test_an_entrypoint_script_that_execs_its_arguments_runs_the_cmd(tmp_path):
    dockerfile = """\
FROM nvcr.io/nvidia/pytorch:24.10-py3
RUN pip install vllm==0.10.1.1
COPY entrypoint.sh /usr/local/bin/entrypoint.sh
ENTRYPOINT ["/usr/local/bin/entrypoint.sh"]
CMD ["python", "-m", "vllm.entrypoints.openai.api_server", "--model=google/gemma-3-1b-it", "--max-model-len=2048"]
"""
    tree = {"deploy.yaml": _deployment(), "image/Dockerfile": dockerfile,
            "image/entrypoint.sh": '#!/bin/bash\nldconfig\nexec "$@"\n'}  # fmt: skip
    (workload,) = read_manifests([str(write_tree(tmp_path / "repo", tree))])[1]
    assert [t.text for t in workload.argv] == ["--model=google/gemma-3-1b-it", "--max-model-len=2048"]
    assert 'exec "$@"' in " ".join(workload.notes)


def test_a_shell_cmd_takes_the_containers_configmap_value_and_an_exec_form_does_not(tmp_path):
    """Batch s79 (mohaimenz/K3DvLLMDockerFastApiSideCar): the image's `CMD ["sh", "-c", "vllm serve \\"$MODEL_ID\\""]`
    runs under a shell, so the container's MODEL_ID (a ConfigMap's value) fills it; an exec-form CMD is not expanded."""
    deployment = _deployment().replace("        args: []\n", "        env:\n        - name: MODEL_ID\n          valueFrom:\n"
                                       "            configMapKeyRef:\n              name: models\n              key: model-id\n")
    config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: models\ndata:\n  model-id: Qwen/Qwen3-8B\n"
    for cmd, model in (('["sh", "-c", "vllm serve \\"$MODEL_ID\\" --port 8001"]', "Qwen/Qwen3-8B"),
                       ('["vllm", "serve", "$MODEL_ID", "--port", "8001"]', "$MODEL_ID")):
        tree = {"k8s/deploy.yaml": deployment, "k8s/configmap.yaml": config_map,
                "inference/Dockerfile": f"FROM python:3.12-slim\nRUN pip install vllm\nCMD {cmd}\n"}
        (workload,) = read_manifests([str(write_tree(tmp_path / model.strip("$/"), tree))])[1]
        assert workload.argv[0].text == model


ENTRYPOINT_IMAGE = """\
FROM vllm/vllm-openai:v0.27.1
COPY entrypoint.sh /usr/local/bin/entrypoint.sh
ENTRYPOINT ["/usr/local/bin/entrypoint.sh"]
"""
ENTRYPOINT_SCRIPT = """\
#!/usr/bin/env bash
set -euo pipefail
args=(--model "${MODEL_PATH:-Qwen/Qwen2.5-7B-Instruct}" --max-model-len 8192)
if [[ "${DISABLE_LOG_REQUESTS:-true}" == "true" ]]; then
  args+=(--disable-log-requests)
fi
exec vllm serve "${args[@]}"
"""
CHART = {
    "Chart.yaml": "apiVersion: v2\nname: vllm\nversion: 0.1.0\n",
    "values.yaml": "image:\n  repository: REGISTRY/support-vllm\n  tag: latest\ngpus: 1\n",
    "templates/deployment.yaml": """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Chart.Name }}
spec:
  template:
    spec:
      containers:
        - name: vllm
          image: "{{ .Values.image.repository }}:{{ .Values.image.tag }}"
          resources:
            limits:
              nvidia.com/gpu: {{ .Values.gpus }}
""",
}


def test_a_charts_container_runs_the_image_the_repository_builds_with_its_entrypoint_scripts_lines(tmp_path):
    """Stop 60: a chart's rendered Deployment (no command, an image built from serving/Dockerfile.vllm four folders
    away, the checkout's root found however deep the chart sits) runs that image's ENTRYPOINT script; a flag the
    script adds is placed on the script's line, not on the template's."""
    tree = {f"deploy/helm/vllm/{path}": text for path, text in CHART.items()}
    tree |= {"serving/Dockerfile.vllm": ENTRYPOINT_IMAGE, "serving/entrypoint.sh": ENTRYPOINT_SCRIPT}
    root = write_tree(tmp_path / "repo", tree)
    (root / ".git").mkdir()
    (workload,) = read_manifests([str(root / "deploy" / "helm" / "vllm" / "values.yaml")])[1]
    assert (workload.container, workload.image) == ("vllm", "vllm/vllm-openai:v0.27.1")
    flag = next(t for t in workload.argv if t.text == "--disable-log-requests")
    assert workload.where(flag.line) == (str(root / "serving" / "entrypoint.sh"), 5)
