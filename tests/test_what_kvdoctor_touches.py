"""The promises in README's "What kvdoctor may touch", each tested through the real CLI.

- it reads the model directory and never executes code from it, whatever the flags say;
- YAML goes through a safe loader only;
- files over a size cap are refused with a message;
- nothing is written outside its cache directory and the files the user names;
- the only network use is fetching a config.json missing from the local HF cache, none when offline.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import threading
from pathlib import Path

import pytest
from conftest import EXAMPLE_MODEL, REPO

QUICK = ["--gpu", "A100", "--vllm-version", "0.25.1", "--no-compile"]


# --- never executes code from the model directory -------------------------------------------------

TRAP = "import pathlib\npathlib.Path({marker!r}).write_text('executed')\n"


def trapped_model(tmp_path: Path) -> tuple[Path, Path]:
    """A model directory whose config.json points auto_map at modules that write a marker when imported."""
    model = tmp_path / "evil-model"
    model.mkdir()
    marker = tmp_path / "MARKER"
    config = json.loads(EXAMPLE_MODEL.joinpath("config.json").read_text())
    config["auto_map"] = {"AutoConfig": "configuration_evil.EvilConfig", "AutoModelForCausalLM": "modeling_evil.Evil"}
    (model / "config.json").write_text(json.dumps(config))
    for name in ("configuration_evil.py", "modeling_evil.py", "__init__.py", "tokenizer_config.py"):
        (model / name).write_text(TRAP.format(marker=str(marker)))
    return model, marker


def test_the_trap_works_when_imported(tmp_path):
    import subprocess
    import sys

    model, marker = trapped_model(tmp_path)
    subprocess.run([sys.executable, "-c", "import modeling_evil"], cwd=model, check=True)
    assert marker.read_text() == "executed"


@pytest.mark.parametrize("argv", [
    lambda m: ["check", "--model", str(m), *QUICK, "--format", "json"],
    lambda m: ["check", *QUICK, "--format", "json", "--", "vllm", "serve", str(m), "--trust-remote-code"],
    lambda m: ["check", "--gpu", "A100", "--vllm-version", "0.25.1", "--kv-cache-dtype", "turboquant_k8v4",
               "--format", "json", "--", "vllm", "serve", str(m), "--trust-remote-code"],
    lambda m: ["matrix", "--model", str(m), "--gpus", "A100", "--kv-cache-dtypes", "auto,turboquant_k8v4", "--vllm-version", "0.25.1"],
], ids=["plain", "trust-remote-code", "trust-remote-code-with-dry-run", "matrix"])
def test_remote_code_is_never_executed(run_cli, tmp_path, argv):
    model, marker = trapped_model(tmp_path)
    result = run_cli(*argv(model), env={"KVDOCTOR_TEST_CWD": str(model)})
    assert result.code in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
    assert not marker.exists(), "kvdoctor executed code from the model directory"
    if argv(model)[0] == "check":
        facts = result.json()["facts"]
        assert facts["model.has_remote_code"] is True


# --- YAML only through a safe loader --------------------------------------------------------------

def unsafe_yaml(marker: Path) -> str:
    return f"rules: !!python/object/apply:os.system ['touch {marker}']\n"


def test_python_tags_in_rules_are_refused(run_cli, tmp_path):
    marker = tmp_path / "MARKER"
    rules = tmp_path / "org.yaml"
    rules.write_text(unsafe_yaml(marker))
    result = run_cli("check", "--model", str(EXAMPLE_MODEL), *QUICK, "--rules", str(rules))
    assert result.code == 2 and "not valid YAML" in result.stderr
    assert not marker.exists()


def test_python_tags_in_serve_config_are_refused(run_cli, tmp_path):
    marker = tmp_path / "MARKER"
    config = tmp_path / "serve.yaml"
    config.write_text(f"kv-cache-dtype: !!python/object/apply:os.system ['touch {marker}']\n")
    result = run_cli("check", *QUICK, "--", "vllm", "serve", str(EXAMPLE_MODEL), "--config", str(config))
    assert result.code == 2 and "cannot read it as YAML (ConstructorError)" in result.stderr
    assert not marker.exists()


def test_kvdoctor_source_loads_yaml_only_through_yaml_safe():
    loaders = re.compile(r"yaml\.(load|unsafe_load|full_load|load_all)\(|Loader=yaml\.(Loader|FullLoader|UnsafeLoader)")
    offenders = [str(p.relative_to(REPO)) for p in (REPO / "kvdoctor").rglob("*.py")
                 if p.name != "yaml_safe.py" and loaders.search(p.read_text())]
    assert offenders == []
    import yaml

    from kvdoctor.base.yaml_safe import safe_loader

    assert safe_loader() in (yaml.SafeLoader, getattr(yaml, "CSafeLoader", None))


# --- size caps ------------------------------------------------------------------------------------

def sparse(path: Path, size: int, head: bytes = b"") -> Path:
    with path.open("wb") as handle:
        handle.write(head)
        handle.truncate(size)
    return path


def test_oversized_config_json_is_refused(run_cli, tmp_path):
    (tmp_path / "m").mkdir()
    sparse(tmp_path / "m" / "config.json", 6 * 2**20, b"{")
    result = run_cli("check", "--model", str(tmp_path / "m"), *QUICK)
    assert result.code == 2 and "over 5 MiB, not a config.json" in result.stderr


def test_oversized_rules_file_is_refused(run_cli, tmp_path):
    rules = sparse(tmp_path / "org.yaml", 3 * 2**20, b"rules: []\n#")
    result = run_cli("rules", "--rules", str(rules))
    assert result.code == 2 and "rules file is over 2048 KiB" in result.stderr


def test_oversized_serve_config_is_refused(run_cli, tmp_path):
    config = sparse(tmp_path / "serve.yaml", 2 * 2**20, b"dtype: half\n#")
    result = run_cli("check", *QUICK, "--", "vllm", "serve", str(EXAMPLE_MODEL), "--config", str(config))
    assert result.code == 2 and "file is over 1 MiB" in result.stderr


def test_oversized_log_is_refused(run_cli, tmp_path):
    log = sparse(tmp_path / "vllm.log", 201 * 2**20, b"INFO start\n")
    result = run_cli("explain", str(log))
    assert result.code == 2 and "is over 200 MB" in result.stderr and "tail -c" in result.stderr


# --- writes only to its cache directory and the named --output -----------------------------------

def snapshot(root: Path) -> dict[str, tuple[int, int] | str]:
    """Every file with its size and mtime, every directory by name (temporary files that come and go only
    touch a directory's mtime, which is allowed)."""
    return {str(p.relative_to(root)): "dir" if p.is_dir() else (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if not p.is_symlink()}


@pytest.mark.parametrize("cache_setting", ["KVDOCTOR_CACHE_DIR", "HOME default"])
def test_writes_nothing_outside_cache_and_output(run_cli, cli_env, tmp_path, cache_setting):
    world = tmp_path / "world"
    home, cwd, scratch = world / "home", world / "cwd", world / "tmp"
    for directory in (home, cwd, scratch):
        directory.mkdir(parents=True)
    model = world / "model"
    shutil.copytree(EXAMPLE_MODEL, model)
    log = world / "vllm.log"
    log.write_text(next((REPO / "tests" / "fixtures").rglob("*.log")).read_text())
    cli_env.update(HOME=str(home), TMPDIR=str(scratch), KVDOCTOR_TEST_CWD=str(cwd))
    cli_env.pop("XDG_CACHE_HOME", None)
    if cache_setting == "KVDOCTOR_CACHE_DIR":
        cache = world / "kv-cache"
        cli_env["KVDOCTOR_CACHE_DIR"] = str(cache)
    else:
        cache = home / ".cache" / "kvdoctor"
        cli_env.pop("KVDOCTOR_CACHE_DIR")
    hf_cache = Path(cli_env["HF_HUB_CACHE"])
    before, hf_before = snapshot(world), snapshot(hf_cache)
    output = world / "out" / "report.json"
    output.parent.mkdir()
    runs = [
        ("check", "--model", str(model), "--kv-cache-dtype", "turboquant_k8v4", "--gpu", "A100",
         "--vllm-version", "0.25.1", "--format", "json", "--output", str(output)),
        ("check", "--model", "Qwen/Qwen2.5-3B-Instruct", "--kv-cache-dtype", "fp8", "--gpu", "H100"),
        ("explain", str(log), "--format", "sarif"),
        ("matrix", "--model", str(model), "--gpus", "A100", "--kv-cache-dtypes", "auto,turboquant_k8v4", "--vllm-version", "0.25.1"),
    ]
    for argv in runs:
        result = run_cli(*argv)
        assert result.code in (0, 1), (argv, result.stderr[-1000:])
    after = snapshot(world)
    changed = {path for path in set(after) | set(before) if after.get(path) != before.get(path)}
    allowed = {str(output.relative_to(world)), str(output.parent.relative_to(world))}
    cache_rel = str(cache.relative_to(world))
    stray = sorted(p for p in changed if p not in allowed and not (p == cache_rel or p.startswith(cache_rel + os.sep))
                   and not (cache_setting == "HOME default" and p in ("home/.cache",)))
    assert stray == [], stray
    assert any(p.startswith(cache_rel + os.sep) for p in changed), "the dry run should have used its cache"
    assert snapshot(hf_cache) == hf_before
    assert json.loads(output.read_text())["command"] == "check"


# --- network: only for a missing config.json, never when offline ---------------------------------

class Listener:
    """A TCP server standing in for the Hugging Face hub: records each request line and hangs up."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.requests: list[str] = []
        self.heads: list[str] = []  # each request's whole head (request line and headers)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    head = conn.recv(4096).decode("latin-1")
                    self.heads.append(head)
                    self.requests.append(head.split("\r\n", 1)[0])
                except OSError:
                    self.requests.append("<no request line>")

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def hub():
    listener = Listener()
    yield listener
    listener.close()


NETWORK_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")


def hub_env(cli_env: dict[str, str], hub: Listener, offline: bool) -> None:
    for name in NETWORK_ENV + ("HF_HUB_OFFLINE",):
        cli_env.pop(name, None)
    cli_env.update(HF_ENDPOINT=hub.url, NO_PROXY="*", HF_HUB_ETAG_TIMEOUT="5", HF_HUB_DOWNLOAD_TIMEOUT="5")
    if offline:
        cli_env["HF_HUB_OFFLINE"] = "1"


@pytest.mark.parametrize("how", ["HF_HUB_OFFLINE=1", "--offline"])
def test_offline_never_touches_the_network(run_cli, cli_env, hub, how):
    hub_env(cli_env, hub, offline=how == "HF_HUB_OFFLINE=1")
    extra = ["--offline"] if how == "--offline" else []
    result = run_cli("check", "--model", "Org/Uncached-1B", *QUICK, *extra)
    assert result.code == 2
    assert "config.json is not in the local Hugging Face cache and kvdoctor is offline" in result.stderr
    assert hub.requests == []


def test_online_fetches_only_a_missing_config_json(run_cli, cli_env, hub, tmp_path):
    hub_env(cli_env, hub, offline=False)
    cli_env["HF_HOME"] = str(tmp_path / "hf-home")
    result = run_cli("check", "--model", "Org/Uncached-1B", *QUICK)
    assert not (tmp_path / "hf-home").exists(), list((tmp_path / "hf-home").rglob("*"))
    assert result.code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "Org/Uncached-1B: could not fetch config.json" in result.stderr and "Traceback" not in result.stderr
    assert hub.requests, "the missing config.json should have been asked for"
    assert all("/Org/Uncached-1B/" in r and r.split()[1].endswith("/config.json") for r in hub.requests), hub.requests


def test_online_with_cached_config_asks_only_weight_metadata_once(run_cli, cli_env, hub):
    """With config.json cached, the only network use is the size of the weights (issue 24): a HEAD or a range
    read of safetensors metadata, never a download; the answer (here: none, the hub does not reply) is kept, so a
    second check asks nothing."""
    hub_env(cli_env, hub, offline=False)
    check = ("check", "--model", "Qwen/Qwen2.5-3B-Instruct", "--kv-cache-dtype", "turboquant_k8v4",
             "--gpu", "A100", "--vllm-version", "0.25.1", "--format", "json")
    result = run_cli(*check)
    assert result.code == 1 and result.json()["facts"]["model.source"] == "hf-cache:Qwen/Qwen2.5-3B-Instruct"
    assert hub.requests, "the weights' size should have been asked for"
    for head in hub.heads:
        method, path = head.split()[:2]
        assert ".safetensors" in path, head
        assert method == "HEAD" or (method == "GET" and "\r\nrange: bytes=" in head.lower()), head
    asked = len(hub.requests)
    assert run_cli(*check).code == 1
    assert run_cli("explain", str(next((REPO / "tests" / "fixtures").rglob("*.log")))).code in (0, 1)
    assert len(hub.requests) == asked, hub.requests[asked:]
