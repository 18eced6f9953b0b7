"""Fetching a config.json missing from the HF cache, against a local stand-in for the hub."""

from __future__ import annotations

import hashlib
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import EXAMPLE_MODEL

CONFIG = (EXAMPLE_MODEL / "config.json").read_bytes()
COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHub(BaseHTTPRequestHandler):
    """Answers HEAD/GET for <repo>/resolve/<rev>/config.json the way the hub does; 404 for anything else."""

    requests: list[str] = []

    def _answer(self, body: bool) -> None:
        FakeHub.requests.append(f"{self.command} {self.path}")
        if not self.path.endswith("/resolve/main/config.json") or "/Org/Fetched-3B/" not in self.path:
            self.send_response(404)
            self.send_header("X-Error-Code", "RepoNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(CONFIG)))
        self.send_header("ETag", '"' + hashlib.sha1(CONFIG).hexdigest() + '"')
        self.send_header("X-Repo-Commit", COMMIT)
        self.end_headers()
        if body:
            self.wfile.write(CONFIG)

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self._answer(body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(body=True)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def fake_hub():
    FakeHub.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def online_env(cli_env, endpoint, tmp_path):
    for name in ("HF_HUB_OFFLINE", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        cli_env.pop(name, None)
    cli_env.update(HF_ENDPOINT=endpoint, NO_PROXY="*", HF_HOME=str(tmp_path / "hf-home"))


def test_missing_config_is_fetched_into_kvdoctors_cache_only(run_cli, cli_env, fake_hub, tmp_path):
    online_env(cli_env, fake_hub, tmp_path)
    result = run_cli("check", "--model", "Org/Fetched-3B", "--kv-cache-dtype", "turboquant_k8v4", "--gpu", "A100",
                     "--vllm-version", "0.25.1", "--no-compile", "--format", "json")
    assert result.code == 1, result.stderr
    document = result.json()
    assert document["facts"]["model.source"] == "hub:Org/Fetched-3B"
    assert "KVD101" in {f["rule_id"] for f in document["findings"]}
    fetched = list((tmp_path / "kvdoctor-cache" / "hf").rglob("config.json"))
    assert fetched and fetched[0].read_bytes() == CONFIG
    assert not (tmp_path / "hf-home").exists()
    # config.json, and the weights' size from the safetensors metadata (HEAD requests, header range reads): no weights
    assert all(r.endswith("/config.json") or r.startswith("HEAD ") and ".safetensors" in r for r in FakeHub.requests)
    # a second run finds it in kvdoctor's cache and asks the hub nothing
    FakeHub.requests.clear()
    assert run_cli("check", "--model", "Org/Fetched-3B", "--gpu", "A100", "--no-compile").code in (0, 1)
    assert FakeHub.requests == []


def test_unknown_repo_is_one_clear_line(run_cli, cli_env, fake_hub, tmp_path):
    online_env(cli_env, fake_hub, tmp_path)
    result = run_cli("check", "--model", "Org/Missing-1B", "--no-compile")
    assert result.code == 2
    assert result.stderr.strip().splitlines() == [
        "kvdoctor: error: Org/Missing-1B: no such model on the Hugging Face hub "
        "(check the id or set HF_TOKEN for a private model)"
    ]


# A sitecustomize.py for kvdoctor's process: each socket connect it attempts, one line in $CONNECT_LOG.
COUNT_CONNECTS = """
import os, socket
_connect = socket.socket.connect
def _logged(self, address):
    with open(os.environ["CONNECT_LOG"], "a") as log:
        log.write(f"{address}\\n")
    return _connect(self, address)
socket.socket.connect = _logged
"""


def test_no_network_fails_fast_without_retry_noise(run_cli, cli_env, tmp_path):
    with socket.socket() as probe:  # a port nobody listens on: connection refused at once
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    online_env(cli_env, f"http://127.0.0.1:{port}", tmp_path)
    shim, log = tmp_path / "shim", tmp_path / "connects.log"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(COUNT_CONNECTS)
    result = run_cli("check", "--model", "Org/Fetched-3B", "--no-compile",
                     env={"PYTHONPATH": f"{shim}:{cli_env['PYTHONPATH']}", "CONNECT_LOG": str(log)})
    # one attempt, then the error: hf_hub_download alone retries (8 refused connects measured, ~25 s)
    assert log.read_text().splitlines() == [f"('127.0.0.1', {port})"]
    assert result.code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "could not fetch config.json" in result.stderr and "Retrying" not in result.stderr
