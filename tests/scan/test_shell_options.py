"""A container that runs a shell with -c among its short options (`bash -exc SCRIPT`, the shape of
vllm-project/production-stack examples/disaggregated_prefill_orchestrated/prefill-deploy.yaml) runs the script."""

from __future__ import annotations

import pytest

from kvdoctor.scan.run import read_manifests

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: prefill
spec:
  template:
    spec:
      containers:
        - name: app
          image: ubuntu:22.04
          env:
            - name: MAX_SEQ_LEN
              value: "512"
          command:
            - /bin/bash
            - "{option}"
            - |
              set -x
              apt-get update
              python -m vllm.entrypoints.openai.api_server \\
                --model /var/mdl/model \\
                --max-model-len ${{MAX_SEQ_LEN}}
"""


@pytest.mark.parametrize("option", ["-c", "-ec", "-exc", "-xec", "-lc"])
def test_a_shells_combined_options_with_c_run_the_script(tmp_path, option):
    path = tmp_path / "prefill.yaml"
    path.write_text(DEPLOYMENT.format(option=option))
    _, found, _, _ = read_manifests([str(path)])
    (workload,) = found
    assert [t.text for t in workload.argv] == ["--model", "/var/mdl/model", "--max-model-len", "512"]
    assert workload.expands_shell


@pytest.mark.parametrize("option", ["-e", "-x", "--norc"])
def test_options_without_c_run_no_script(tmp_path, option):
    path = tmp_path / "prefill.yaml"
    path.write_text(DEPLOYMENT.format(option=option))
    assert read_manifests([str(path)])[1] == []
