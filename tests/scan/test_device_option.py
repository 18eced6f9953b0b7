"""`--device cpu` in a real manifest on an image whose vLLM reads it as `--device-ids cpu` (0.24.0-0.30.0) and stops
at start-up: KVD013 at the option's line (kvdoctor/vllm_pack/option_values.py; the check side is
tests/vllm_pack/test_option_values.py)."""

from __future__ import annotations

from conftest import EXAMPLE_MODEL
from scan_support import finding, scan, write_tree

MODEL = str(EXAMPLE_MODEL)


def test_scan_finds_device_cpu_on_a_pinned_image_that_reads_it_as_device_ids(tmp_path):
    root = write_tree(tmp_path / "repo", {"deploy.yaml": f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: vllm}}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.26.0
        args: ["--model", "{MODEL}", "--max-model-len", "2048",
               "--device", "cpu"]
        resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""})
    report = scan([str(root)], tmp_path)
    (served,) = report.workloads
    found = finding(served, "KVD013")
    assert (found.finding.status, found.finding.severity, found.location.line) == ("fired", "error", 11)
