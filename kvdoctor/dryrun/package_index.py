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
    find_links: tuple[str, ...] = ()
    """find-links locations (local directories are searched for the wheel too)."""


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
    for key in ("index-url", "extra-index-url", "no-index", "cert", "find-links"):
        env = os.environ.get("PIP_" + key.upper().replace("-", "_"))
        if env is not None:
            values[key] = env
    links = tuple(values.get("find-links", "").split())
    if values.get("no-index", "").strip().lower() in ("1", "true", "yes", "on"):
        return PipSettings((), values.get("cert") or None, links)
    urls = [values.get("index-url", "").strip() or PYPI_SIMPLE]
    urls += values.get("extra-index-url", "").split()
    return PipSettings(tuple(u.rstrip("/") for u in urls if u), values.get("cert") or None, links)


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
    if page.startswith("file:"):  # a local PEP 503 tree: pip reads the directory's index.html
        folder = Path(urllib.request.url2pathname(urllib.parse.urlsplit(page).path))
        page = (folder / "index.html").as_uri()
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


def _wheel_pattern(project: str, version: str) -> re.Pattern[str]:
    return re.compile(rf"^{project}-{re.escape(version)}(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


def find_wheel_on_indexes(version: str, settings: PipSettings,
                          project: str = "vllm") -> tuple[WheelLocation | None, int]:  # fmt: skip
    """(the release's wheel from the first place that has one, how many indexes answered at all).

    Local find-links directories first (no network), then the indexes in pip's order."""
    pattern = _wheel_pattern(project, version)
    for link in settings.find_links:
        directory = Path(urllib.request.url2pathname(urllib.parse.urlsplit(link).path) if link.startswith("file:") else link)
        if directory.is_dir():
            for wheel in sorted(directory.glob(f"{project}-{version}-*.whl"), key=lambda p: _preference(p.name)):
                if pattern.match(wheel.name):
                    return WheelLocation(wheel.name, wheel.resolve().as_uri(), None), 0
    answered = 0
    for index_url in settings.index_urls:
        try:
            files = _index_files(index_url, project, settings.cert)
        except (OSError, ValueError):
            continue
        answered += 1
        wheels = sorted((f for f in files if pattern.match(f[0])), key=lambda f: _preference(f[0]))
        if wheels:
            name, url, sha = wheels[0]
            return WheelLocation(name, url, sha), answered
    return None, answered


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


def find_wheel(version: str, project: str = "vllm") -> tuple[WheelLocation | None, str | None]:
    """(where the release's wheel is, through the user's pip configuration, None) or (None, why not).

    pip itself is asked only when some index answered without the wheel or none could be read for a reason
    other than the network (a login, a format kvdoctor does not read); with no network it would fail too."""
    settings = read_pip_settings()
    found, answered = find_wheel_on_indexes(version, settings, project)
    if found is not None:
        return found, None
    if not settings.index_urls and not settings.find_links:
        return None, "pip is configured with no index (no-index)"
    if answered == 0 and settings.index_urls and not _reachable(settings.index_urls[0], settings.cert):
        host = urllib.parse.urlsplit(settings.index_urls[0]).netloc or settings.index_urls[0]
        return None, f"the package index ({host}) cannot be reached"
    found = find_wheel_with_pip(version, project)
    if found is None:
        return None, f"no {project} {version} wheel on the package index pip is configured with"
    return found, None


def _reachable(url: str, cert: str | None) -> bool:
    """Whether the index host answers at all (any HTTP status counts)."""
    import urllib.error

    if not url.startswith(("http://", "https://")):
        return Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path)).exists()
    try:
        with open_url(url + "/", cert=cert):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
