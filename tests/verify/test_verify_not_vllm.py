"""Exit 2, one line, for what is listening but is not a vLLM server to talk to: another HTTP server, a TLS
certificate nobody vouches for, a listener that never answers, metrics turned off. Real sockets, stdlib servers."""

from __future__ import annotations

import http.server
import json
import socket
import ssl
import subprocess
import threading
from pathlib import Path

import pytest
from .verify_support import kvdoctor


@pytest.fixture
def report(tmp_path) -> Path:
    path = tmp_path / "check.json"
    path.write_text(json.dumps({"command": "check", "verdict": "PASS", "facts": {"vllm.version": "0.32.0"}}))
    return path


class _Answers(http.server.BaseHTTPRequestHandler):
    """GET answers from the server's `answers` dict: path -> (status, body)."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        status, body = self.server.answers.get(self.path, (404, "Not Found"))
        self.send_response(status)
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


def _serve(answers: dict[str, tuple[int, str]], context: ssl.SSLContext | None = None):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    server.answers = answers
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _exit_2_line(done) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("kvdoctor: error: ") and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    return done.stderr


def test_another_http_server_is_not_vllm(tmp_path, report):
    server = _serve({"/health": (200, "")})
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        line = _exit_2_line(kvdoctor("verify", url, "--report", str(report), cwd=tmp_path))
        assert f"{url} is not a vLLM OpenAI server: GET /version answered 404" in line
    finally:
        server.shutdown()


def test_metrics_turned_off(tmp_path, report):
    server = _serve({"/health": (200, ""), "/version": (200, '{"version": "0.32.0"}'),
                     "/v1/models": (200, '{"data": []}')})  # fmt: skip
    try:
        line = _exit_2_line(kvdoctor("verify", f"http://127.0.0.1:{server.server_port}", "--report", str(report), cwd=tmp_path))
        assert "/metrics answered 404: metrics are disabled or routed elsewhere" in line
    finally:
        server.shutdown()


def test_a_certificate_nobody_vouches_for(tmp_path, report):
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = _serve({"/health": (200, "")}, context)
    try:
        line = _exit_2_line(kvdoctor("verify", f"https://127.0.0.1:{server.server_port}", "--report", str(report), cwd=tmp_path))
        assert "TLS failed talking to https://127.0.0.1:" in line and "CERTIFICATE_VERIFY_FAILED" in line
    finally:
        server.shutdown()


def test_a_listener_that_never_answers(tmp_path, report):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        line = _exit_2_line(kvdoctor("verify", url, "--report", str(report), "--timeout", "1", cwd=tmp_path))
    assert f"{url}/health did not answer within 1 s" in line
