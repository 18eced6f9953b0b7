"""Find a vLLM release's wheel (URL and sha256) on the package index the user's pip is configured with.

pip's own configuration is read, not guessed: PIP_INDEX_URL / PIP_EXTRA_INDEX_URL / PIP_NO_INDEX / PIP_CERT,
then the pip.conf files pip reads (PIP_CONFIG_FILE, global, user, site). Each index is asked through the
simple API (PEP 691 JSON, else PEP 503 HTML). When that finds nothing (an index kvdoctor cannot read, a
netrc login, find-links only), `pip install --dry-run --report` answers with pip's own resolution (~3-4 s).
"""

from __future__ import annotations

import base64
import configparser
import json
import os
import re
import ssl
import subprocess
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

PYPI_SIMPLE = "https://pypi.org/simple"
TIMEOUT_S = 10.0
_JSON = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True)
class WheelLocation:
    """One wheel file of a release on an index."""

    filename: str
    """e.g. vllm-0.25.1-cp38-abi3-manylinux_2_28_x86_64.whl"""
    url: str
    """Where to read it (http(s) or file)."""
    sha256: str | None
    """The index's sha256 of the whole file, when it gives one."""


@dataclass(frozen=True)
class PipSettings:
    """The parts of pip's configuration that decide where packages come from."""

    index_urls: tuple[str, ...]
    """index-url first, then extra-index-urls; empty under no-index."""
    cert: str | None
    """CA bundle pip verifies TLS with (cert), or None for the system default."""


def _config_files() -> list[Path]:
    """pip.conf files in the order pip reads them (later ones win)."""
    chosen = os.environ.get("PIP_CONFIG_FILE")
    if chosen:
        return [] if chosen == os.devnull else [Path(chosen)]
    files = [Path(d) / "pip" / "pip.conf" for d in os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":") if d]
    files.append(Path("/etc/pip.conf"))
    home = Path.home()
    files += [home / ".pip" / "pip.conf", Path(os.environ.get("XDG_CONFIG_HOME", home / ".config")) / "pip" / "pip.conf"]
    files.append(Path(sys.prefix) / "pip.conf")
    return files


def read_pip_settings() -> PipSettings:
    """pip's index URLs and CA bundle from its environment variables and config files."""
    values: dict[str, str] = {}
    for path in _config_files():
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (OSError, configparser.Error):
            continue
        for section in ("global", "download", "install"):  # pip lets command sections override global
            if parser.has_section(section):
                values.update({k.lower(): v for k, v in parser.items(section)})
    for key in ("index-url", "extra-index-url", "no-index", "cert"):
        env = os.environ.get("PIP_" + key.upper().replace("-", "_"))
        if env is not None:
            values[key] = env
    if values.get("no-index", "").strip().lower() in ("1", "true", "yes", "on"):
        return PipSettings((), values.get("cert"))
    urls = [values.get("index-url", "").strip() or PYPI_SIMPLE]
    urls += values.get("extra-index-url", "").split()
    return PipSettings(tuple(u.rstrip("/") for u in urls if u), values.get("cert") or None)


def _opener_request(url: str, headers: dict[str, str]) -> tuple[urllib.request.Request, str]:
    """A request for url with credentials from its user:password@ part moved into a header."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is not None:
        auth = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers = {**headers, "Authorization": "Basic " + base64.b64encode(auth.encode()).decode()}
        netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
        url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return urllib.request.Request(url, headers=headers), url


def open_url(url: str, headers: dict[str, str] | None = None, cert: str | None = None):
    """urlopen with pip's CA bundle and the URL's credentials; raises OSError (URLError) on failure."""
    request, _ = _opener_request(url, dict(headers or {}))
    context = ssl.create_default_context(cafile=cert) if cert and Path(cert).is_file() else None
    return urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text = ""

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href, self._text = dict(attrs).get("href"), ""

    def handle_data(self, data):
        if self._href is not None:
            self._text += data

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.links.append((self._text.strip(), self._href))
            self._href = None


def _index_files(index_url: str, project: str, cert: str | None) -> list[tuple[str, str, str | None]]:
    """(filename, absolute url, sha256) of every file the index lists for project."""
    page = f"{index_url}/{project}/"
    with open_url(page, {"Accept": f"{_JSON}, text/html;q=0.1"}, cert) as response:
        body = response.read()
        kind = response.headers.get("Content-Type", "") if hasattr(response, "headers") else ""
        base = response.geturl() if hasattr(response, "geturl") else page
    if _JSON in kind or body[:1] == b"{":
        data = json.loads(body)
        return [(f["filename"], urllib.parse.urljoin(base, f["url"]), (f.get("hashes") or {}).get("sha256"))
                for f in data.get("files", [])]  # fmt: skip
    parser = _Links()
    parser.feed(body.decode("utf-8", "replace"))
    files = []
    for text, href in parser.links:
        url, _, fragment = urllib.parse.urljoin(base, href).partition("#")
        name = urllib.parse.unquote(url.rsplit("/", 1)[-1]) or text
        sha = fragment[len("sha256="):] if fragment.startswith("sha256=") else None
        files.append((name, url, sha))
    return files


def _preference(filename: str) -> tuple[int, int]:
    """Lower is better: the x86_64 manylinux wheel (the kernel files are the same in every wheel)."""
    return (0 if re.search(r"manylinux[^-]*x86_64\.whl$", filename) else 1, len(filename))


def find_wheel_on_indexes(version: str, settings: PipSettings, project: str = "vllm") -> WheelLocation | None:
    """The release's wheel from the first index that lists one; None when none does or none answers."""
    pattern = re.compile(rf"^{project}-{re.escape(version)}(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
    for index_url in settings.index_urls:
        try:
            files = _index_files(index_url, project, settings.cert)
        except (OSError, ValueError):
            continue
        wheels = sorted((f for f in files if pattern.match(f[0])), key=lambda f: _preference(f[0]))
        if wheels:
            name, url, sha = wheels[0]
            return WheelLocation(name, url, sha)
    return None


def find_wheel_with_pip(version: str, project: str = "vllm") -> WheelLocation | None:
    """pip's own answer (`pip install --dry-run --report`), for configurations kvdoctor cannot read."""
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
               "--quiet", "--report", "-", f"{project}=={version}"]  # fmt: skip
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        install = json.loads(done.stdout)["install"][0]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, IndexError):
        return None
    info = install.get("download_info") or {}
    url = info.get("url", "")
    if not url.endswith(".whl"):
        return None
    sha = ((info.get("archive_info") or {}).get("hashes") or {}).get("sha256")
    return WheelLocation(url.rsplit("/", 1)[-1], url, sha)


def find_wheel(version: str, project: str = "vllm") -> WheelLocation | None:
    """Where the release's wheel is, through the user's pip configuration; None when it cannot be found."""
    return find_wheel_on_indexes(version, read_pip_settings(), project) or find_wheel_with_pip(version, project)
