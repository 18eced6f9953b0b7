"""Stop 48 (issue 27), batch s97's shapes: what Compose really runs for a command given as a string (compose-go
splits it with go-shellwords: no shell operators, and a shell's -c takes one word), and a command list item that is
no string (Compose's schema refuses the file)."""

from __future__ import annotations

import pytest
from scan_support import scan

from kvdoctor.scan.compose_command import go_shellwords


@pytest.mark.parametrize("text, words, dropped", [
    ('vllm serve "my model" --port 8000', ["vllm", "serve", "my model", "--port", "8000"], ""),
    ("pip install x && vllm serve M", ["pip", "install", "x"], "&& vllm serve M"),
    ("vllm serve M 2>&1 | tee log", ["vllm", "serve", "M"], ">&1 | tee log"),
    ("sh -c 'a && b' tail", ["sh", "-c", "a && b", "tail"], ""),
    (r"a\ b c", ["a b", "c"], ""),
    ('echo ""', ["echo", ""], ""),
])  # fmt: skip
def test_compose_splits_a_string_as_go_shellwords_does(text, words, dropped):
    assert go_shellwords(text) == (words, dropped)


SHELL_ENTRYPOINT = """\
services:
  vllm:
    image: vllm/vllm-openai:v0.25.1
    entrypoint: ["/bin/sh", "-c"]
    command: >
      python /tmp/patch.py &&
      python -m vllm.entrypoints.openai.api_server
      --model Qwen/Qwen2.5-3B-Instruct
      --max-modle-len 4096
"""


def _findings(result):
    return {p.finding.rule_id: p.finding for p in result.placed}


def test_a_shell_entrypoint_with_a_string_command_runs_one_word(tmp_path):
    (tmp_path / "compose.yaml").write_text(SHELL_ENTRYPOINT)
    (result,) = scan([str(tmp_path / "compose.yaml")], tmp_path, gpu="H100").workloads
    found = _findings(result)
    assert found["KVD213"].severity == "error" and found["KVD213"].status == "fired"
    assert "gets `python` as its whole script" in found["KVD213"].cause
    assert "stopped at the unquoted `&&`" in found["KVD213"].cause
    assert "--max-modle-len" in found["KVD004"].title  # the options are still judged, as the author meant them


@pytest.mark.parametrize("command", [
    'sh -c "pip install x && vllm serve Qwen/Qwen2.5-3B-Instruct --max-modle-len 4096"',
    '["/bin/sh", "-c", "pip install x && vllm serve Qwen/Qwen2.5-3B-Instruct --max-modle-len 4096"]',
    "vllm serve Qwen/Qwen2.5-3B-Instruct --max-modle-len 4096 2>&1 | tee /log/vllm.log",
])  # fmt: skip
def test_a_quoted_script_or_a_list_runs_as_written(tmp_path, command):
    (tmp_path / "compose.yaml").write_text(
        f"services:\n  vllm:\n    image: vllm/vllm-openai:v0.25.1\n    entrypoint: []\n    command: {command}\n")
    (result,) = scan([str(tmp_path / "compose.yaml")], tmp_path, gpu="H100").workloads
    found = _findings(result)
    assert "KVD213" not in found and "--max-modle-len" in found["KVD004"].title


def test_a_string_command_whose_own_shell_gets_one_word(tmp_path):
    (tmp_path / "compose.yaml").write_text(
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.25.1\n    entrypoint: []\n"
        "    command: bash -c vllm serve Qwen/Qwen2.5-3B-Instruct --max-modle-len 4096\n")
    (result,) = scan([str(tmp_path / "compose.yaml")], tmp_path, gpu="H100").workloads
    found = _findings(result)
    assert "gets `vllm` as its whole script" in found["KVD213"].cause
    assert "--max-modle-len" in found["KVD004"].title


NULL_ITEM = """\
services:
  vllm1:
    image: vllm/vllm-openai:v0.25.1
    command:
      - --model
      - Qwen/Qwen2.5-3B-Instruct
      - --api-key
      - ##########################
"""


def test_a_null_command_item_is_refused_by_compose_not_by_vllm(tmp_path):
    (tmp_path / "compose.yaml").write_text(NULL_ITEM)
    (result,) = scan([str(tmp_path / "compose.yaml")], tmp_path, gpu="H100").workloads
    found = _findings(result)
    assert found["KVD212"].status == "fired" and "command[3] is null" in found["KVD212"].title
    assert [p.location.line for p in result.placed if p.finding.rule_id == "KVD212"] == [8]
    assert "KVD004" not in found  # --api-key has its (empty) value: vLLM's parser is not what stops it


def test_a_mapping_command_item_is_refused_by_compose(tmp_path):
    (tmp_path / "compose.yaml").write_text(NULL_ITEM.replace("- ##########################", "- --port: 8000"))
    (result,) = scan([str(tmp_path / "compose.yaml")], tmp_path, gpu="H100").workloads
    assert "command[3] is a mapping" in _findings(result)["KVD212"].title


def test_comment_lines_inside_a_folded_command_are_words(tmp_path):
    (tmp_path / "compose.yaml").write_text(
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.25.1\n    command: >\n"
        "      --model Qwen/Qwen2.5-3B-Instruct\n      # --enforce-eager\n      # --max-model-len 2048\n")
    (result,) = scan([str(tmp_path / "compose.yaml")], tmp_path, gpu="H100").workloads
    kvd004 = _findings(result)["KVD004"]
    assert kvd004.status == "fired" and "#" in kvd004.title, kvd004.title


QUANTIZED = """\
services:
  vllm:
    image: IMAGE
    command: --model Qwen/Qwen2.5-3B-Instruct --quantization bitsandbytes
"""


@pytest.mark.parametrize("image, fires", [("vllm/vllm-openai:latest", True), ("rocm/vllm:latest", False)])
def test_the_quantization_gpu_would_decide_is_not_raised_on_another_accelerator(tmp_path, image, fires):
    (tmp_path / "compose.yaml").write_text(QUANTIZED.replace("IMAGE", image))
    (result,) = scan([str(tmp_path / "compose.yaml")], tmp_path).workloads
    assert ("KVD195" in _findings(result)) is fires


def test_a_whole_script_given_its_positional_words_on_purpose_runs_as_written(tmp_path):
    (tmp_path / "compose.yaml").write_text(
        "services:\n  vllm:\n    image: vllm/vllm-openai:v0.25.1\n    entrypoint: []\n"
        "    command: sh -c 'exec vllm serve \"$@\"' _ Qwen/Qwen2.5-3B-Instruct --max-modle-len 4096\n")
    (result,) = scan([str(tmp_path / "compose.yaml")], tmp_path, gpu="H100").workloads
    assert "KVD213" not in _findings(result)
