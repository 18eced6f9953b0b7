"""Kinds that run no container are not named as unread workloads, however much they mention vLLM (a whole
kubernetes-sigs/lws checkout named 'Service vllm-leader mentions vLLM ... render it to the Deployment/Pod')."""

from __future__ import annotations

from kvdoctor.scan.run import read_manifests

FILE = """\
apiVersion: v1
kind: Service
metadata:
  name: vllm-leader
spec:
  selector: {app: vllm}
---
apiVersion: monitoring.coreos.com/v1
kind: PodMonitor
metadata:
  name: vllm
spec:
  selector: {matchLabels: {app: vllm}}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: start
data:
  start.sh: vllm serve Qwen/Qwen3-0.6B
---
apiVersion: inference.llmaz.io/v1alpha1
kind: BackendRuntime
metadata:
  name: vllm
spec:
  command: [python3, -m, vllm.entrypoints.openai.api_server]
"""


def test_podless_kinds_are_not_named_but_a_configmap_and_an_unknown_kind_still_are(tmp_path):
    path = tmp_path / "all.yaml"
    path.write_text(FILE)
    _, found, notes, _ = read_manifests([str(path)])
    assert found == []
    named = sorted(n.split(": ", 1)[1].split(" ", 1)[0] for n in notes)
    assert named == ["BackendRuntime", "ConfigMap"]  # not Service, not PodMonitor
