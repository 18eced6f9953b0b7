"""verify behind TLS: a CA, a server certificate and a client certificate made here with the openssl CLI, a
TLS-terminating proxy (stdlib ssl, as a mutual-TLS sidecar fronts vLLM) in front of the real CPU vLLM server.
--cacert verifies the server, --cert/--key answer its request for a client certificate; without them verify exits 2
in one line naming the fix; --insecure is only taken when given, is stated in the report and never PASSes."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import threading
from pathlib import Path

import pytest
from .verify_support import kvdoctor

OPENSSL = shutil.which("openssl")


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """ca.pem/ca.key, server.pem/server.key (SAN IP 127.0.0.1), client.pem/client.key, rogue-ca.pem: signed here."""
    if OPENSSL is None:  # fails under KVDOCTOR_CI (ci_support): CI has openssl
        pytest.skip("the openssl CLI is not installed (apt-get install -y openssl); cryptography is not either")
    folder = tmp_path_factory.mktemp("pki")

    def run(*args: str) -> None:
        subprocess.run([OPENSSL, *args], cwd=folder, check=True, capture_output=True, timeout=60)

    for ca in ("ca", "rogue-ca"):
        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{ca}.key", "-out", f"{ca}.pem", "-days", "1",
            "-subj", f"/CN=kvdoctor test {ca}")  # fmt: skip
    (folder / "server.ext").write_text("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    (folder / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name in ("server", "client"):
        run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "1",
            "-out", f"{name}.pem", "-extfile", f"{name}.ext")  # fmt: skip
    return folder


class TlsProxy:
    """Accepts TLS on a loopback port (client certificate required, signed by the CA) and pipes the plain bytes to a
    backend; without one it closes after the handshake."""

    def __init__(self, pki: Path, backend: str | None):
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(pki / "server.pem", pki / "server.key")
        self.context.load_verify_locations(pki / "ca.pem")
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.backend = backend
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.handshakes: list[str] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            conn = self.context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            self.handshakes.append(f"refused: {exc}")
            raw.close()
            return
        self.handshakes.append("ok " + dict(x[0] for x in conn.getpeercert()["subject"])["commonName"])
        if self.backend is None:
            conn.close()
            return
        host, port = self.backend.removeprefix("http://").rsplit(":", 1)
        upstream = socket.create_connection((host, int(port)))
        threading.Thread(target=_pipe, args=(upstream, conn), daemon=True).start()
        _pipe(conn, upstream)

    def close(self) -> None:
        self.listener.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@pytest.fixture
def report(tmp_path) -> Path:
    path = tmp_path / "check.json"
    path.write_text(json.dumps({"command": "check", "verdict": "PASS", "facts": {"vllm.version": "0.32.0"}}))
    return path


def _exit_2_line(done) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("kvdoctor: error: ") and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    return done.stderr


def test_mutual_tls_to_the_real_server(pki, plain_server, check_report, tmp_path):
    proxy = TlsProxy(pki, plain_server.url)
    try:
        url = f"https://127.0.0.1:{proxy.port}"
        report = check_report(*plain_server.flags)
        done = kvdoctor("verify", url, "--report", str(report), "--cacert", str(pki / "ca.pem"), "--cert",
                        str(pki / "client.pem"), "--key", str(pki / "client.key"), "--format", "json", cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads(done.stdout)
        assert result["verdict"] == "PASS" and result["server"]["version"] == "0.32.0"
        assert result["tls"] == f"server certificate verified against {pki / 'ca.pem'}; client certificate {pki / 'client.pem'}"
        assert "ok client" in proxy.handshakes  # the server saw our certificate
        # the same server without a client certificate: the handshake is refused, exit 2 naming --cert/--key
        line = _exit_2_line(kvdoctor("verify", url, "--report", str(report), "--cacert", str(pki / "ca.pem"), cwd=tmp_path))
        assert "--cert FILE" in line and url in line
        # --insecure: taken because it was given, stated, and WARN (who answered is not proven), exit 1 under warning
        done = kvdoctor("verify", url, "--report", str(report), "--insecure", "--cert", str(pki / "client.pem"), "--key",
                        str(pki / "client.key"), "--fail-on", "warning", "--format", "json", cwd=tmp_path)  # fmt: skip
        result = json.loads(done.stdout)
        assert done.returncode == 1 and result["verdict"] == "WARN"
        assert result["tls"].startswith("server certificate NOT verified (--insecure)")
        assert [f["rule_id"] for f in result["targets"][0]["findings"]] == ["verify.server_identity"]
    finally:
        proxy.close()


def test_a_server_signed_by_another_ca_is_refused_without_cacert_and_with_the_wrong_one(pki, report, tmp_path):
    proxy = TlsProxy(pki, None)
    try:
        url = f"https://127.0.0.1:{proxy.port}"
        client = ("--cert", str(pki / "client.pem"), "--key", str(pki / "client.key"))
        for extra in ((), ("--cacert", str(pki / "rogue-ca.pem"))):
            line = _exit_2_line(kvdoctor("verify", url, "--report", str(report), *client, *extra, cwd=tmp_path))
            assert "TLS failed talking to" in line and "CERTIFICATE_VERIFY_FAILED" in line and "--cacert FILE" in line
        # an environment that other tools read to switch verification off changes nothing
        env = {"PYTHONHTTPSVERIFY": "0", "CURL_CA_BUNDLE": "", "REQUESTS_CA_BUNDLE": ""}
        line = _exit_2_line(kvdoctor("verify", url, "--report", str(report), *client, cwd=tmp_path, env=env))
        assert "CERTIFICATE_VERIFY_FAILED" in line
        assert not any(h.startswith("ok") for h in proxy.handshakes)
    finally:
        proxy.close()


@pytest.mark.parametrize("args,says", [
    (("https://127.0.0.1:1", "--insecure", "--cacert", "ca.pem"), "--insecure and --cacert both given"),
    (("http://127.0.0.1:1", "--insecure"), "TLS options given but http://127.0.0.1:1 is not https://"),
    (("https://127.0.0.1:1", "--key", "client.key"), "--key without --cert"),
    (("https://127.0.0.1:1", "--cacert", "missing.pem"), "--cacert missing.pem: No such file or directory"),
    (("https://127.0.0.1:1", "--cert", "ca.key"), "--cert ca.key: "),
])  # fmt: skip
def test_what_cannot_be_meant_is_one_line_exit_2(pki, report, tmp_path, args, says):
    for name in ("ca.pem", "ca.key", "client.key"):
        shutil.copy(pki / name, tmp_path / name)
    line = _exit_2_line(kvdoctor("verify", *args, "--report", str(report), cwd=tmp_path))
    assert says in line, line
