"""Fetching a release's kernel files by HTTP range requests into its real wheel, from a local index."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from dryrun_support import vllm_wheels  # noqa: F401 - fixture
from index_server import IndexServer
from kvdoctor.dryrun import wheel_fetch
from kvdoctor.dryrun.kernel_source import KERNEL_FILES, tree_source
from kvdoctor.dryrun.package_index import find_wheel, read_pip_settings

STORE = "vllm/v1/attention/ops/triton_turboquant_store.py"


@pytest.fixture
def wheel(vllm_wheels):  # noqa: F811
    return vllm_wheels["0.25.1"]


@pytest.fixture
def pip_env(monkeypatch):
    """Point pip's configuration (as kvdoctor reads it) at a server; returns a setter."""
    def use(server: IndexServer) -> None:
        for key, value in server.pip_env().items():
            monkeypatch.setenv(key, value)
    return use


def _cache_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def test_fetches_only_the_kernel_files_verified_and_byte_identical(wheel, pip_env, tmp_path):
    with IndexServer([wheel]) as server:
        pip_env(server)
        result = wheel_fetch.fetch_release("0.25.1", tmp_path, KERNEL_FILES, offline=False)
        assert result.root is not None, result.note
        assert result.fetched and result.note is None
        with zipfile.ZipFile(wheel) as zf:
            for rel in KERNEL_FILES:
                assert (result.root / rel).read_bytes() == zf.read(rel), rel
        # a few hundred KB of a 250 MB wheel, in a handful of requests
        assert server.bytes_sent < 2_000_000 < wheel.stat().st_size
        assert len([r for r in server.requests if r.startswith("/files/")]) <= len(KERNEL_FILES) + 5
    assert _cache_bytes(result.root) < 1_000_000
    source = tree_source(result.root)
    assert source.version == "0.25.1" and set(source.files) == set(KERNEL_FILES)
    assert "fetched from the package index" in source.label and "vllm-0.25.1-" in source.label


def test_second_fetch_and_offline_use_the_cache_without_network(wheel, pip_env, tmp_path):
    with IndexServer([wheel]) as server:
        pip_env(server)
        first = wheel_fetch.fetch_release("0.25.1", tmp_path, KERNEL_FILES, offline=False)
        asked = len(server.requests)
        again = wheel_fetch.fetch_release("0.25.1", tmp_path, KERNEL_FILES, offline=False)
        offline = wheel_fetch.fetch_release("0.25.1", tmp_path, KERNEL_FILES, offline=True)
        assert len(server.requests) == asked
    assert again.root == first.root == offline.root and not again.fetched and not offline.fetched


def test_offline_without_cache_asks_nobody_and_says_why(wheel, pip_env, tmp_path):
    with IndexServer([wheel]) as server:
        pip_env(server)
        result = wheel_fetch.fetch_release("0.25.1", tmp_path, KERNEL_FILES, offline=True)
        assert server.requests == []
    assert result.root is None and "--offline" in result.note


def test_pep503_html_index_with_sha256_fragment(wheel, pip_env, tmp_path):
    with IndexServer([wheel], html_only=True) as server:
        pip_env(server)
        location, why = find_wheel("0.25.1")
        assert location is not None, why
        assert location.filename == wheel.name and location.sha256 and location.url.startswith("http://127.0.0.1")
        assert wheel_fetch.fetch_release("0.25.1", tmp_path, KERNEL_FILES, offline=False).root is not None


def test_a_member_that_does_not_match_record_is_refused(wheel, pip_env, tmp_path, monkeypatch):
    real = wheel_fetch.record_hashes
    monkeypatch.setattr(wheel_fetch, "record_hashes", lambda text: {**real(text), STORE: "0" * 64})
    with IndexServer([wheel]) as server:
        pip_env(server)
        result = wheel_fetch.fetch_release("0.25.1", tmp_path, KERNEL_FILES, offline=False)
    assert result.root is None and "RECORD" in result.note and STORE in result.note
    assert wheel_fetch.cached_release("0.25.1", tmp_path) is None  # nothing half-written is kept


def test_a_server_without_range_support_is_said_not_downloaded(wheel, pip_env, tmp_path):
    with IndexServer([wheel], ranges=False) as server:
        pip_env(server)
        result = wheel_fetch.fetch_release("0.25.1", tmp_path, KERNEL_FILES, offline=False)
    assert result.root is None and "range" in result.note


def test_unreachable_index_is_one_line(pip_env, tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # discard port: nothing listens
    for key in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.setenv(key, "")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    result = wheel_fetch.fetch_release("0.25.1", tmp_path, KERNEL_FILES, offline=False)
    assert result.root is None and "cannot be reached" in result.note and "\n" not in result.note


def test_pip_settings_follow_env_over_config(tmp_path, monkeypatch):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://mirror.example/simple\nextra-index-url = https://extra.example/simple\n"
                    "cert = /etc/ssl/corp.pem\n")  # fmt: skip
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CERT", "PIP_NO_INDEX", "PIP_FIND_LINKS"):
        monkeypatch.delenv(key, raising=False)
    settings = read_pip_settings()
    assert settings.index_urls == ("https://mirror.example/simple", "https://extra.example/simple")
    assert settings.cert == "/etc/ssl/corp.pem"
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.example/simple/")
    assert read_pip_settings().index_urls[0] == "https://env.example/simple"
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    assert read_pip_settings().index_urls == ()


def test_cli_what_if_compiles_the_fetched_release_then_works_offline(wheel, run_cli, tmp_path):
    with IndexServer([wheel]) as server:
        env = {**server.pip_env(), "HF_HUB_OFFLINE": "0", "KVDOCTOR_VLLM_WHEELS": str(tmp_path / "no-wheels")}
        args = ("check", "--model", "examples/qwen2.5-3b-instruct", "--kv-cache-dtype", "turboquant_k8v4",
                "--gpu", "A100", "--vllm-version", "0.25.1")  # fmt: skip
        first = run_cli(*args, env=env)
        assert first.code == 1, first.stdout + first.stderr
        assert "vLLM 0.25.1 kernels from vllm-0.25.1-" in first.stdout and "fetched from the package index" in first.stdout
        assert "convert_custom_float8" in first.stdout and "kvdoctor probe kernel" not in first.stdout.split("Fixes")[0]
        asked = len(server.requests)
        again = run_cli(*args, "--offline", env=env)
        assert len(server.requests) == asked
    assert again.code == 1 and "fetched from the package index" in again.stdout and "convert_custom_float8" in again.stdout


@pytest.mark.network
@pytest.mark.skipif(os.environ.get("KVDOCTOR_TEST_REAL_INDEX") != "1", reason="set KVDOCTOR_TEST_REAL_INDEX=1 to ask the real index")
def test_real_index_fetch_is_fast_and_small(tmp_path):
    result = wheel_fetch.fetch_release("0.26.0", tmp_path, KERNEL_FILES, offline=False)
    assert result.root is not None, result.note
    assert result.seconds <= 3.0, result.seconds
    assert _cache_bytes(result.root) < 1_000_000
