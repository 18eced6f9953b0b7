"""A local package index for the fetch tests: PEP 691 JSON and PEP 503 HTML pages, and wheel files served
with HTTP range support (threading http.server), counting requests and bytes so tests can prove what moved."""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class IndexServer:
    """Serves /simple/vllm/ for the given wheels and /files/<name> with ranges."""

    def __init__(self, wheels: list[Path], *, ranges: bool = True, html_only: bool = False) -> None:
        self.wheels = {w.name: w for w in wheels}
        self.hashes = {w.name: sha256_of(w) for w in wheels}
        self.ranges, self.html_only = ranges, html_only
        self.requests: list[str] = []
        self.bytes_sent = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # noqa: N802 - http.server's name
                server.requests.append(self.path)
                if self.path.rstrip("/") == "/simple/vllm":
                    return self._index()
                name = self.path.rsplit("/", 1)[-1]
                if self.path.startswith("/files/") and name in server.wheels:
                    return self._file(server.wheels[name])
                self.send_error(404)

            def _index(self):
                wants_json = "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", "")
                if wants_json and not server.html_only:
                    files = [{"filename": n, "url": f"/files/{n}", "hashes": {"sha256": server.hashes[n]}}
                             for n in server.wheels]  # fmt: skip
                    body = json.dumps({"meta": {"api-version": "1.0"}, "name": "vllm", "files": files}).encode()
                    kind = "application/vnd.pypi.simple.v1+json"
                else:
                    links = "".join(f'<a href="../../files/{n}#sha256={server.hashes[n]}">{n}</a>\n' for n in server.wheels)
                    body = f"<html><body>{links}</body></html>".encode()
                    kind = "text/html"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _file(self, path: Path):
                size = path.stat().st_size
                match = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
                if not server.ranges or not match:
                    body = b"whole file refused by the test server"
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                first, last = match.groups()
                start, end = (size - int(last), size - 1) if not first else (int(first), min(int(last or size - 1), size - 1))
                with path.open("rb") as handle:
                    handle.seek(start)
                    body = handle.read(end - start + 1)
                server.bytes_sent += len(body)
                self.send_response(206)
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def index_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/simple"

    def pip_env(self) -> dict[str, str]:
        """Environment that makes pip's configuration (as kvdoctor reads it) point at this index only."""
        return {"PIP_INDEX_URL": self.index_url, "PIP_EXTRA_INDEX_URL": "", "PIP_FIND_LINKS": "",
                "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "0"}  # fmt: skip

    def __enter__(self) -> "IndexServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
