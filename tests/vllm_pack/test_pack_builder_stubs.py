"""The builder's device stub (issue 27, 3): every capability query a release makes answers the capability being
asked (the platform, `torch.cuda.get_device_capability`, `get_device_properties().major/minor`), also after the
builder switches the target; before, torch.cuda said 9.0 whatever the target."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
from dryrun_support import wheel_dir

from kvdoctor.builders.vllm_pack.wheel import extract, find_wheel, stub_versions

PACK_PYTHON = os.environ.get("KVDOCTOR_PACK_PYTHON")
ASK = """
import json, sys
sys.argv = ["child", {req!r}, "unused"]
import kvdoctor.builders.vllm_pack.child as child
import torch, vllm.platforms
platform = child.install_platform((7, 5))
answers = []
for cap in ((7, 5), (10, 0), (8, 9)):
    type(vllm.platforms._current_platform).capability_now = cap
    props = torch.cuda.get_device_properties(0)
    answers.append([list(cap), list(torch.cuda.get_device_capability()), [props.major, props.minor],
                    list(vllm.platforms.current_platform.get_device_capability())])
print(json.dumps(answers))
"""


@pytest.mark.vllm_wheel
def test_every_capability_query_answers_the_target(tmp_path):
    if not PACK_PYTHON:
        pytest.skip("KVDOCTOR_PACK_PYTHON (the builder's venv, made by .ci/run) is not set")
    wheel = find_wheel(wheel_dir(), "0.25.1")
    if wheel is None:
        pytest.skip("no vllm-0.25.1 wheel")
    src = tmp_path / "src"
    shipped = extract(wheel, src)
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"src": str(src), "tasks": [], "compiled_modules": shipped["compiled_modules"],
                               "stub_packages": stub_versions({n: s for n, s, _ in shipped["requirements"]})}))
    proc = subprocess.run([PACK_PYTHON, "-c", ASK.format(req=str(req))], capture_output=True, text=True, timeout=600,
                          cwd=tmp_path, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    for cap, torch_cap, props, platform in json.loads(proc.stdout.strip().splitlines()[-1]):
        assert torch_cap == props == platform == cap
