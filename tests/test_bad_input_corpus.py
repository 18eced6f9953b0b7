"""Bad input corpus: every case ends in exit 2 with one clear stderr line and no traceback.

Each case builds its input under tmp_path, runs the real CLI in a subprocess, and checks the line names
what was wrong. Add a case here whenever a user finds a new way to feed kvdoctor something broken.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import CONFIGS, EXAMPLE_MODEL

MODEL = str(EXAMPLE_MODEL)
QUICK = ["--gpu", "A100", "--vllm-version", "0.25.1", "--no-compile"]
RULE = "  - id: ORG001\n    title: t\n    severity: error\n    cause: c\n    when: {fact: gpu.name, eq: x}\n"


def model_dir(tmp: Path, config) -> str:
    """A model directory whose config.json is config (a JSON-able value, or raw str/bytes)."""
    directory = tmp / "model"
    directory.mkdir(exist_ok=True)
    if isinstance(config, bytes):
        (directory / "config.json").write_bytes(config)
    elif isinstance(config, str):
        (directory / "config.json").write_text(config)
    else:
        (directory / "config.json").write_text(json.dumps(config))
    return str(directory)


def base_config(**changes) -> dict:
    config = json.loads(EXAMPLE_MODEL.joinpath("config.json").read_text())
    config.update(changes)
    return config


def rules_file(tmp: Path, text, name: str = "org.yaml") -> str:
    path = tmp / name
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    return str(path)


def log_file(tmp: Path, data: bytes) -> str:
    path = tmp / "vllm.log"
    path.write_bytes(data)
    return str(path)


def unreadable(tmp: Path) -> str:
    """A config.json that cannot be read: a FIFO would block, so a dangling symlink loop instead."""
    directory = tmp / "model"
    directory.mkdir()
    (directory / "config.json").symlink_to(directory / "config.json")
    return str(directory)


def check(*args: str) -> list[str]:
    return ["check", *args]


# (id, build(tmp) -> argv, text the one stderr line must contain)
CASES = [
    # paths
    ("missing-path", lambda t: check("--model", "/nonexistent/model", *QUICK), "model path not found"),
    ("missing-relative", lambda t: check("--model", "./no/such/dir", *QUICK), "model path not found"),
    ("dir-without-config", lambda t: check("--model", str(CONFIGS), *QUICK), "no config.json"),
    ("empty-dir", lambda t: (t.joinpath("empty").mkdir(), check("--model", str(t / "empty"), *QUICK))[1],
     "no config.json"),
    ("config-symlink-loop", lambda t: check("--model", unreadable(t), *QUICK), "no config.json"),
    ("config-is-dir", lambda t: (t.joinpath("m/config.json").mkdir(parents=True), check("--model", str(t / "m"), *QUICK))[1],
     "no config.json"),
    # invalid JSON
    ("json-trailing-comma", lambda t: check("--model", model_dir(t, '{"num_attention_heads": 16,}'), *QUICK),
     "invalid JSON at line 1"),
    ("json-empty-file", lambda t: check("--model", model_dir(t, ""), *QUICK), "invalid JSON"),
    ("json-truncated", lambda t: check("--model", model_dir(t, '{"hidden_size": 2048, "num_'), *QUICK), "invalid JSON"),
    ("json-nan-only", lambda t: check("--model", model_dir(t, "NaN"), *QUICK), "expected a JSON object"),
    ("json-not-utf8", lambda t: check("--model", model_dir(t, b'{"model_type": "\xff\xfe"}'), *QUICK), "not UTF-8"),
    ("json-binary", lambda t: check("--model", model_dir(t, bytes(range(256)) * 4), *QUICK), "not UTF-8"),
    # JSON of the wrong shape
    ("json-list", lambda t: check("--model", model_dir(t, [1, 2, 3]), *QUICK), "expected a JSON object, got list"),
    ("json-null", lambda t: check("--model", model_dir(t, None), *QUICK), "expected a JSON object, got NoneType"),
    ("json-string", lambda t: check("--model", model_dir(t, json.dumps("just text")), *QUICK), "expected a JSON object, got str"),
    ("heads-string", lambda t: check("--model", model_dir(t, base_config(num_attention_heads="16")), *QUICK),
     "'num_attention_heads' must be a positive integer"),
    ("heads-negative", lambda t: check("--model", model_dir(t, base_config(num_attention_heads=-16)), *QUICK),
     "'num_attention_heads' must be a positive integer"),
    ("kv-heads-zero", lambda t: check("--model", model_dir(t, base_config(num_key_value_heads=0)), *QUICK),
     "'num_key_value_heads' must be a positive integer"),
    ("hidden-float", lambda t: check("--model", model_dir(t, base_config(hidden_size=2048.5)), *QUICK),
     "'hidden_size' must be a positive integer"),
    ("heads-bool", lambda t: check("--model", model_dir(t, base_config(num_attention_heads=True)), *QUICK),
     "'num_attention_heads' must be a positive integer"),
    ("kv-heads-exceed", lambda t: check("--model", model_dir(t, base_config(num_key_value_heads=64)), *QUICK),
     "exceeds num_attention_heads"),
    ("architectures-string", lambda t: check("--model", model_dir(t, base_config(architectures="Qwen2ForCausalLM")), *QUICK),
     "'architectures' must be a list of strings"),
    ("model-type-number", lambda t: check("--model", model_dir(t, base_config(model_type=7)), *QUICK),
     "'model_type' must be a string"),
    ("quant-config-list", lambda t: check("--model", model_dir(t, base_config(quantization_config=["fp8"])), *QUICK),
     "'quantization_config' must be an object"),
    ("text-config-bad-heads", lambda t: check("--model", model_dir(t, {"text_config": {"num_attention_heads": "x"}}), *QUICK),
     "must be a positive integer"),
    ("json-nested-200k-deep", lambda t: check("--model", model_dir(t, "[" * 200_000 + "]" * 200_000), *QUICK),
     "nested too deeply"),
    # dtypes
    ("config-dtype-unknown", lambda t: check("--model", model_dir(t, base_config(torch_dtype="float13")), *QUICK),
     "not a dtype vLLM knows"),
    ("config-dtype-number", lambda t: check("--model", model_dir(t, base_config(torch_dtype=16)), *QUICK),
     "not a dtype vLLM knows"),
    ("flag-dtype-unknown", lambda t: check("--model", MODEL, "--dtype", "bf16", *QUICK), "unknown --dtype 'bf16'"),
    ("serve-dtype-unknown", lambda t: check(*QUICK, "--", "vllm", "serve", MODEL, "--dtype", "int3"),
     "serve flag --dtype 'int3'"),
    # HF ids
    ("hf-id-offline", lambda t: check("--model", "Qwen/NotCached-1B", *QUICK), "not in the local Hugging Face cache"),
    ("hf-id-offline-flag", lambda t: check("--model", "Qwen/NotCached-1B", "--offline", *QUICK),
     "kvdoctor is offline"),
    ("model-bad-id", lambda t: check("--model", "not a//valid id", *QUICK), "model path not found"),
    # rules files
    ("rules-missing", lambda t: check("--model", MODEL, "--rules", str(t / "nope.yaml"), *QUICK), "rules file not found"),
    ("rules-is-dir", lambda t: check("--model", MODEL, "--rules", str(t), *QUICK), "rules path is a directory"),
    ("rules-bad-yaml", lambda t: check("--model", MODEL, "--rules", rules_file(t, "rules: [\n  - id: : :"), *QUICK),
     "not valid YAML"),
    ("rules-not-mapping", lambda t: check("--model", MODEL, "--rules", rules_file(t, "- a\n- b\n"), *QUICK),
     "'rules:' list"),
    ("rules-empty", lambda t: check("--model", MODEL, "--rules", rules_file(t, ""), *QUICK), "'rules:' list"),
    ("rules-binary", lambda t: check("--model", MODEL, "--rules", rules_file(t, b"\xff\xfe\x00bad"), *QUICK),
     "cannot read rules file"),
    ("rules-duplicate-id", lambda t: check("--model", MODEL, "--rules", rules_file(t, "rules:\n" + RULE + RULE), *QUICK),
     "'ORG001' is defined twice"),
    ("rules-duplicate-bundled", lambda t: check("--model", MODEL, "--rules", rules_file(t, "rules:\n" + RULE.replace("ORG001", "KVD101")), *QUICK),
     "'KVD101' is defined twice"),
    ("rules-unknown-fact", lambda t: check("--model", MODEL, "--rules", rules_file(t, "rules:\n" + RULE.replace("gpu.name", "gpu.colour")), *QUICK),
     "gpu.colour"),
    ("rules-bad-version-spec", lambda t: check("--model", MODEL, "--rules", rules_file(t, "rules:\n" + RULE.replace("{fact: gpu.name, eq: x}", "{fact: vllm.version, version: '>>=0.x'}")), *QUICK),
     "field 'when'"),
    ("rules-bad-regex", lambda t: check("--model", MODEL, "--rules", rules_file(t, "rules:\n" + RULE + "    signatures: [{pattern: '([unclosed'}]\n"), *QUICK),
     "bad regex"),
    ("rules-bad-severity", lambda t: check("--model", MODEL, "--rules", rules_file(t, "rules:\n" + RULE.replace("error", "critical")), *QUICK),
     "field 'severity'"),
    ("rules-bad-id", lambda t: check("--model", MODEL, "--rules", rules_file(t, "rules:\n" + RULE.replace("ORG001", "org-1")), *QUICK),
     "field 'id'"),
    ("rules-python-tag", lambda t: check("--model", MODEL, "--rules", rules_file(t, "rules: !!python/object/apply:os.system ['true']\n"), *QUICK),
     "not valid YAML"),
    ("rules-yaml-100k-deep", lambda t: ["rules", "--rules", rules_file(t, "rules: " + "[" * 100_000 + "]" * 100_000)],
     "not valid YAML"),
    ("rules-when-1500-deep", lambda t: ["rules", "--rules", rules_file(t, "rules:\n" + RULE.replace(
        "{fact: gpu.name, eq: x}", "".join("\n" + " " * (6 + i) + "not:" for i in range(1500))
        + " {fact: gpu.name, eq: x}"))], ("nested too deeply", "not valid YAML")),  # PyYAML 6.0.4 caps depth itself
    ("rules-list-cmd", lambda t: ["rules", "--rules", rules_file(t, "rules:\n  - 3\n")], "is not a mapping"),
    # GPU targets
    ("gpu-unknown", lambda t: check("--model", MODEL, "--gpu", "A1000", "--no-compile"), "unknown GPU 'A1000'"),
    ("gpu-empty", lambda t: check("--model", MODEL, "--gpu", " ", "--no-compile"), "--gpu is empty"),
    ("gpu-capability-absurd", lambda t: check("--model", MODEL, "--gpu", "sm_200", "--no-compile"), "is not a CUDA GPU"),
    # flags
    ("conflicting-models", lambda t: check("--model", "a/b", *QUICK, "--", "vllm", "serve", "c/d"), "conflicting models"),
    ("conflicting-kv-dtype", lambda t: check("--model", MODEL, "--kv-cache-dtype", "fp8", *QUICK, "--", "vllm", "serve",
                                            "--kv-cache-dtype", "turboquant_k8v4"), "conflicting values for kv_cache_dtype"),
    ("source-and-version", lambda t: check("--model", MODEL, "--gpu", "A100", "--vllm-version", "0.25.1",
                                          "--vllm-source", str(t), "--no-compile"), "not both"),
    ("vllm-version-word", lambda t: check("--model", MODEL, "--gpu", "A100", "--vllm-version", "latest"), "is not a version"),
    ("tp-zero-flag", lambda t: check("--model", MODEL, "--tensor-parallel-size", "0", *QUICK), "--tensor-parallel-size"),
    ("tp-word-serve", lambda t: check(*QUICK, "--", "vllm", "serve", MODEL, "-tp", "two"), "--tensor-parallel-size"),
    ("gpu-util-over-1", lambda t: check(*QUICK, "--", "vllm", "serve", MODEL, "--gpu-memory-utilization", "1.5"),
     "must be in (0, 1]"),
    ("max-model-len-inf", lambda t: check(*QUICK, "--", "vllm", "serve", MODEL, "--max-model-len", "inf"),
     "--max-model-len"),
    ("serve-flag-no-value", lambda t: check(*QUICK, "--", "vllm", "serve", MODEL, "--kv-cache-dtype"), "needs a value"),
    ("serve-config-missing", lambda t: check(*QUICK, "--", "vllm", "serve", MODEL, "--config", str(t / "no.yaml")),
     "file not found"),
    ("serve-config-python-tag", lambda t: check(*QUICK, "--", "vllm", "serve", MODEL, "--config",
                                               rules_file(t, "dtype: !!python/name:os.system\n", "serve.yaml")),
     "cannot read it as YAML"),
    ("serve-config-deep", lambda t: check(*QUICK, "--", "vllm", "serve", MODEL, "--config",
                                         rules_file(t, "a: " + "[" * 100_000 + "]" * 100_000, "serve.yaml")),
     "cannot read it as YAML"),
    ("fail-on-unknown", lambda t: check("--model", MODEL, "--fail-on", "sometimes", *QUICK), "--fail-on"),
    ("format-unknown", lambda t: check("--model", MODEL, "--format", "yaml", *QUICK), "unknown format"),
    ("output-into-missing-dir", lambda t: check("--model", MODEL, *QUICK, "--format", "json", "--output",
                                               str(t / "no" / "dir" / "r.json")), "cannot write --output"),
    ("unknown-option", lambda t: ["explain", "--no-such-flag", "x.log"], "No such option"),
    ("no-such-command", lambda t: ["chekc"], "No such command"),
    # matrix flags
    ("matrix-dtype-unknown", lambda t: ["matrix", "--model", MODEL, "--no-compile", "--dtype", "bf16"], "unknown --dtype 'bf16'"),
    ("matrix-tp-zero", lambda t: ["matrix", "--model", MODEL, "--no-compile", "--tensor-parallel-size", "0"],
     "--tensor-parallel-size must be at least 1"),
    ("matrix-version-word", lambda t: ["matrix", "--model", MODEL, "--no-compile", "--vllm-version", "x"], "is not a version"),
    ("matrix-gpu-unknown", lambda t: ["matrix", "--model", MODEL, "--no-compile", "--gpus", "A100,A1000"], "unknown GPU 'A1000'"),
    ("matrix-workers-zero", lambda t: ["matrix", "--model", MODEL, "--no-compile", "--workers", "0"], "--workers must be at least 1"),
    ("matrix-model-missing", lambda t: ["matrix", "--model", "/no/such/model", "--no-compile", "--gpus", "A100"], "model path not found"),
    # kvdoctor's own config file
    ("config-file-missing", lambda t: check("--config", str(t / "kvdoctor.toml"), "--model", MODEL, *QUICK), "kvdoctor.toml"),
    ("config-file-bad-toml", lambda t: check("--config", rules_file(t, "[tool.kvdoctor\ngpu=", "kvdoctor.toml"), "--model", MODEL, *QUICK),
     "kvdoctor.toml"),
    # explain inputs
    ("log-missing", lambda t: ["explain", str(t / "none.log")], "log not found"),
    ("log-dir", lambda t: ["explain", str(t)], "log path is a directory"),
    ("log-empty", lambda t: ["explain", log_file(t, b"")], "is empty"),
    ("log-whitespace", lambda t: ["explain", log_file(t, b"\n\n   \r\n")], "is empty"),
    ("log-binary", lambda t: ["explain", log_file(t, os.urandom(4096).replace(b"\n", b"\x00"))], "mostly binary"),
    ("log-nul-bytes", lambda t: ["explain", log_file(t, b"\x00" * 10000)], "is empty"),
    ("log-bad-rules", lambda t: ["explain", log_file(t, b"INFO hello\n"), "--rules", rules_file(t, "rules: 3\n")], "'rules:' list"),
]


@pytest.mark.parametrize("build, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_clear_line(run_cli, tmp_path, build, expected):
    argv = build(tmp_path)
    result = run_cli(*argv)
    assert result.code == 2, (result.code, result.stdout[-500:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("kvdoctor: error: "), lines[0]
    alternatives = expected if isinstance(expected, tuple) else (expected,)
    assert any(text in lines[0] for text in alternatives), lines[0]


def test_log_on_stdin_empty(run_cli):
    result = run_cli("explain", "-", stdin="")
    assert result.code == 2 and result.stderr.strip().splitlines() == [
        line for line in result.stderr.strip().splitlines() if "stdin is empty" in line
    ]


def test_the_corpus_has_at_least_40_cases():
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)
