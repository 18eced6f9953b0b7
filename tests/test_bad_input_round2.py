"""Bad input, round 2 (H10): shapes real users hit that round 1 (test_bad_input_corpus.py) did not try.

Each class is fixed by mechanism; each case runs the real CLI in a subprocess and must end in exit 2 with one
clear stderr line, no traceback, within the subprocess timeout (a FIFO or a YAML bomb used to hang scan).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import EXAMPLE_MODEL

MODEL = str(EXAMPLE_MODEL)
QUICK = ["--gpu", "A100", "--vllm-version", "0.25.1", "--no-compile"]


def model_with(tmp: Path, **changes) -> str:
    config = json.loads(EXAMPLE_MODEL.joinpath("config.json").read_text())
    config.update(changes)
    directory = tmp / "model"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(config))
    return str(directory)


def fifo_dir(tmp: Path) -> Path:
    directory = tmp / "deploy"
    directory.mkdir()
    os.mkfifo(directory / "pipe.yaml")
    return directory


def billion_laughs(tmp: Path) -> str:
    lines, previous = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]'], "a"
    for name in "bcdefghij":
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
        previous = name
    path = tmp / "bomb.yaml"
    path.write_text("\n".join(lines) + "\nkind: Deployment\n")
    return str(path)


CASES = [
    # scan: a file that is not a regular file is named, never read (reading a FIFO blocks for ever)
    ("scan-fifo-in-dir", lambda t: ["scan", str(fifo_dir(t))], "not a regular file (a FIFO)"),
    ("scan-fifo-given", lambda t: ["scan", str(fifo_dir(t) / "pipe.yaml")], "not a regular file (a FIFO)"),
    # scan: aliases whose expansion never ends
    ("scan-billion-laughs", lambda t: ["scan", billion_laughs(t)], "YAML aliases expand past"),
    # check: config.json sizes past any real model (MemoryError / OverflowError, exit 3, before)
    ("layers-1e12", lambda t: ["check", "--model", model_with(t, num_hidden_layers=10**12), *QUICK],
     "'num_hidden_layers' must be a positive integer below 2**31"),
    ("layers-1e30", lambda t: ["check", "--model", model_with(t, num_hidden_layers=10**30), *QUICK],
     "'num_hidden_layers' must be a positive integer below 2**31"),
    # check: a negative vocabulary was a PASS
    ("vocab-negative", lambda t: ["check", "--model", model_with(t, vocab_size=-1), *QUICK], "'vocab_size' must be"),
    # matrix: a list flag that names nothing was every GPU, exit 0
    ("matrix-gpus-empty", lambda t: ["matrix", "--model", MODEL, "--no-compile", "--gpus", ""], "--gpus names nothing"),
    ("matrix-gpus-commas", lambda t: ["matrix", "--model", MODEL, "--no-compile", "--gpus", " , "],
     "--gpus names nothing"),
    ("matrix-dtypes-empty", lambda t: ["matrix", "--model", MODEL, "--no-compile", "--kv-cache-dtypes", ","],
     "--kv-cache-dtypes names nothing"),
]


@pytest.mark.parametrize("build, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_clear_line(run_cli, tmp_path, build, expected):
    result = run_cli(*build(tmp_path))
    assert result.code == 2, (result.code, result.stdout[-500:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.startswith("kvdoctor: error: ")]
    assert len(lines) == 1 and expected in lines[0], result.stderr


def test_a_real_alias_is_still_read(tmp_path):
    """Anchors and aliases of an ordinary size (a shared env list) are not a bomb."""
    import yaml

    from kvdoctor.base.yaml_safe import expands_too_far, has_aliases

    text = "env: &env [{name: A, value: '1'}]\nx: {env: *env}\ny: {env: *env}\n"
    assert has_aliases(text) and not expands_too_far(list(yaml.compose_all(text)))
    assert not has_aliases("args: ['--x', '*']\n# a * b\n")


PASTED = ["check", *QUICK, "--"]
CASES_PASTED = [
    # one quoted string that no shell would run (was 'model path not found: vllm serve ...')
    ("one-string-open-quote", lambda t: [*PASTED, f"vllm serve {MODEL} --served-model-name 'abc"], "no closing quotation"),
    ("one-string-trailing-backslash", lambda t: [*PASTED, f"vllm serve {MODEL} \\"], "no escaped character"),
    # another program (was 'python: config.json is not in the local Hugging Face cache')
    ("another-program", lambda t: [*PASTED, "python", "train.py", "--epochs", "3"], "runs `python train.py`"),
    ("docker-run", lambda t: [*PASTED, "docker", "run", "vllm/vllm-openai", "--model", MODEL], "runs `docker run`"),
    ("vllm-bench", lambda t: [*PASTED, "vllm", "bench", "latency", "--model", MODEL], "runs `vllm bench`"),
]


@pytest.mark.parametrize("build, expected", [c[1:] for c in CASES_PASTED], ids=[c[0] for c in CASES_PASTED])
def test_a_pasted_command_that_is_no_vllm_serve(run_cli, tmp_path, build, expected):
    test_bad_input_exits_2_with_one_clear_line(run_cli, tmp_path, build, expected)


@pytest.mark.parametrize("pasted", [
    [f"VLLM_USE_V1=1 vllm serve {MODEL} \\\n  --max-model-len 4096"],  # one string, as copied from a README
    ["env", "VLLM_USE_V1=1", "vllm", "serve", MODEL, "--max-model-len", "4096"],
])
def test_a_pasted_command_as_one_string_or_with_env_is_read(run_cli, pasted):
    result = run_cli("check", *QUICK, "--format", "json", "--", *pasted)
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["facts"]["serve.max_model_len"] == 4096


@pytest.mark.parametrize("url", ["not a url", "http://host:8000/v1 x", "http://host\t:8000"])
def test_verify_url_with_spaces_is_bad_input(run_cli, url):
    """http.client refused it mid-request: exit 3 'internal error: InvalidURL', before."""
    result = run_cli("verify", url, "--model", MODEL, "--kv-cache-dtype", "auto", "--gpu", "A100")
    assert result.code == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [line for line in result.stderr.strip().splitlines()
                                                  if "not a server URL" in line]


def test_explain_of_a_fifo_nobody_writes_to_ends(run_cli, tmp_path):
    """A plain read of such a FIFO blocked for ever (the probe's 10 s timeout killed it)."""
    os.mkfifo(tmp_path / "vllm.log")
    result = run_cli("explain", str(tmp_path / "vllm.log"))
    assert result.code == 2 and "is a FIFO that nothing wrote to within" in result.stderr, result.stderr


def test_explain_of_a_fifo_with_a_writer_reads_it(run_cli, tmp_path):
    """`kvdoctor explain <(kubectl logs POD)`: the writer's lines are read, even once it has closed its end."""
    import subprocess
    import sys

    os.mkfifo(tmp_path / "vllm.log")
    writer = subprocess.Popen([sys.executable, "-c", "import time, sys; time.sleep(1); "
                               "open(sys.argv[1], 'w').write('INFO start\\nRuntimeError: boom\\n')",
                               str(tmp_path / "vllm.log")])  # fmt: skip
    result = run_cli("explain", str(tmp_path / "vllm.log"))
    writer.wait(timeout=30)
    assert result.code == 1 and "FAIL" in result.stdout, (result.stdout, result.stderr)


def test_explain_of_a_device_is_bad_input(run_cli):
    result = run_cli("explain", "/dev/zero")  # a read that never ends
    assert result.code == 2 and "is a character device, not a log file" in result.stderr
