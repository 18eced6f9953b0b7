"""Helpers of the verify tests, imported by their conftest and modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from kvdoctor.verify.metrics import parse_metrics
from kvdoctor.verify.probe import CompletionResult, ServedModel, ServerFacts

REPO = Path(__file__).resolve().parents[2]
H200 = Path(__file__).parent / "fixtures" / "server-0.25.1-h200"


@dataclass(frozen=True)
class Served:
    """A running server and what it was started with."""

    url: str
    flags: tuple[str, ...]
    model: Path
    api_key: str | None = None


def kvdoctor(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the kvdoctor CLI in a subprocess (offline, private cache, no GPU)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KVDOCTOR_"))}
    base.update(KVDOCTOR_CACHE_DIR=str(cwd / "cache"), HF_HUB_OFFLINE="1", CUDA_VISIBLE_DEVICES="",
                PYTHONPATH=str(REPO), **(env or {}))  # fmt: skip
    return subprocess.run([sys.executable, "-m", "kvdoctor", *args], cwd=cwd, env=base, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def h200_server(metrics_text: str | None = None) -> ServerFacts:
    models = json.loads((H200 / "v1_models.txt").read_text())["data"]
    served = tuple(ServedModel(m["id"], m["root"], m["max_model_len"]) for m in models)
    metrics = parse_metrics(metrics_text if metrics_text is not None else (H200 / "metrics.txt").read_text())
    done = CompletionResult(True, 200, "dense-fp8", "token ids", 4, 4, finish_reason="length", ttft_s=0.01, total_s=0.02)
    return ServerFacts("http://h200:8011", 200, json.loads((H200 / "version.txt").read_text())["version"], served,
                       metrics, done)  # fmt: skip
