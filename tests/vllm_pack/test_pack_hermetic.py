"""The pack builder's child is hermetic (issue 27): vLLM's probe of FlashInfer's TRT-LLM cubins answers the stated
modelled input, never the network, and no connection leaves the child."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

# a stand-in for vllm/utils/flashinfer.py's probes, as the releases write them (0.10.2-0.34.0): an HTTP request to
# NVIDIA's artifactory unless cubins are pre-installed, and FlashInfer's JIT toolchain looked up on PATH
FLASHINFER_PY = textwrap.dedent('''
    import functools, shutil, socket

    @functools.cache
    def has_nvidia_artifactory() -> bool:
        try:
            socket.create_connection(("edge.urm.nvidia.com", 443), timeout=5).close()
            return True
        except Exception:
            return False

    def supports_trtllm_attention() -> bool:
        return has_nvidia_artifactory()

    def nvcc():
        return shutil.which("nvcc")
''')

ASK = textwrap.dedent('''
    import socket, sys
    sys.path.insert(0, {tree!r})
    from kvdoctor.builders.vllm_pack.child_stubs import ModelledInputsFinder, no_network
    sys.meta_path.insert(0, ModelledInputsFinder({present}))
    no_network()
    from vllm.utils.flashinfer import has_nvidia_artifactory, nvcc, supports_trtllm_attention
    try:
        socket.create_connection(("pypi.org", 443), timeout=5)
        reached = True
    except OSError:
        reached = False
    print(has_nvidia_artifactory(), supports_trtllm_attention(), bool(nvcc()), reached)
''')


@pytest.mark.parametrize("present", [True, False])
def test_the_cubin_probe_answers_the_stated_value_and_nothing_reaches_the_network(tmp_path, present):
    utils = tmp_path / "vllm" / "utils"
    utils.mkdir(parents=True)
    (tmp_path / "vllm" / "__init__.py").write_text("")
    (utils / "__init__.py").write_text("")
    (utils / "flashinfer.py").write_text(FLASHINFER_PY)
    proc = subprocess.run([sys.executable, "-c", ASK.format(tree=str(tmp_path), present=present)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the importer's own name binds the modelled probe too (0.10.2 imports it by name elsewhere)
    assert proc.stdout.split() == [str(present), str(present), "True", "False"]
