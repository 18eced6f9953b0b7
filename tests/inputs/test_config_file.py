import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvdoctor.inputs.config_file import load_config
from kvdoctor.base.errors import UsageError

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "examples" / "qwen2.5-3b-instruct"

TEAM = """
gpu = "A100"
kv-cache-dtype = "turboquant_k8v4"
vllm-version = "0.25.1"
no-compile = true
fail-on = "warning"
rules = ["ci/extra-rules.yaml"]

[ignore]
KVD104 = "quality measured on our eval set"
"""


def _kvdoctor(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KVDOCTOR_"))}
    env.update(KVDOCTOR_CACHE_DIR=str(cwd / ".cache"), HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "kvdoctor", *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_found_walking_up_with_paths_relative_to_the_file(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "kvdoctor.toml").write_text(TEAM)
    deep = tmp_path / "deploy" / "prod"
    deep.mkdir(parents=True)
    config = load_config(start=deep)
    assert config.path == tmp_path / "kvdoctor.toml"
    assert config.defaults["gpu"] == "A100" and config.defaults["fail_on"] == "warning"
    assert config.rules_files == (tmp_path / "ci" / "extra-rules.yaml",)
    assert config.ignore == {"KVD104": "quality measured on our eval set"}


def test_pyproject_tool_table_and_stop_at_repo_root(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.kvdoctor]\ngpu = "L4"\n')
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    assert load_config(start=repo).path is None  # above the repository root is not searched
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.kvdoctor]\ngpu = "L4"\n')
    assert load_config(start=repo).defaults == {"gpu": "L4"}


@pytest.mark.parametrize(
    "text, words",
    [
        ('gpus = "A100"\n', "unknown key 'gpus'"),
        ("tensor-parallel-size = \"2\"\n", "'tensor-parallel-size' must be int"),
        ("offline = 1\n", "'offline' must be bool"),
        ('[ignore]\nKVD104 = ""\n', "ignore.KVD104 needs a reason"),
        ('[ignore]\nkvd104 = "x"\n', "not a rule id"),
        ("gpu = \n", "invalid TOML"),
    ],
)
def test_bad_config_is_one_line_usage_error(tmp_path, text, words):
    path = tmp_path / "kvdoctor.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as caught:
        load_config(path)
    assert words in caught.value.one_line() and "\n" not in caught.value.one_line()
    assert str(path) in caught.value.one_line()


def test_cli_uses_config_defaults_and_flags_override(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "kvdoctor.toml").write_text(TEAM.replace('rules = ["ci/extra-rules.yaml"]\n', ""))
    done = _kvdoctor(tmp_path, "check", "-m", str(MODEL), "-f", "json")
    report = json.loads(done.stdout)
    assert report["facts"]["gpu.name"] == "A100 80GB" and report["facts"]["vllm.version"] == "0.25.1"
    ignored = {f["rule_id"]: f["ignored_reason"] for f in report["findings"]}
    assert ignored["KVD104"] == "quality measured on our eval set" and ignored["KVD101"] is None
    assert done.returncode == 1
    # a flag beats the file: L4 is SM89, and --vllm-version picks over the file's value
    done = _kvdoctor(tmp_path, "check", "-m", str(MODEL), "-f", "json", "--gpu", "L4", "--vllm-version", "0.27.0")
    report = json.loads(done.stdout)
    assert report["facts"]["gpu.name"] == "L4" and report["verdict"] == "PASS" and done.returncode == 0


def test_ignored_warning_does_not_gate_fail_on_warning(tmp_path):
    (tmp_path / "kvdoctor.toml").write_text(TEAM.replace('rules = ["ci/extra-rules.yaml"]\n', ""))
    # L4 + fixed vLLM: nothing fires; A100 + 0.27.0: only KVD104 (warning), which the file ignores
    assert _kvdoctor(tmp_path, "check", "-m", str(MODEL), "--vllm-version", "0.27.0").returncode == 0
    (tmp_path / "kvdoctor.toml").write_text(TEAM.replace('rules = ["ci/extra-rules.yaml"]\n', "").split("[ignore]")[0])
    assert _kvdoctor(tmp_path, "check", "-m", str(MODEL), "--vllm-version", "0.27.0").returncode == 1


def test_bad_config_exits_2_on_one_line(tmp_path):
    bad = tmp_path / "team.toml"
    bad.write_text("colour = 'red'\n")
    done = _kvdoctor(tmp_path, "check", "--config", str(bad), "-m", str(MODEL))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "unknown key 'colour'" in done.stderr
