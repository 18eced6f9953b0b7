from __future__ import annotations

import pytest

from kvdoctor.base.errors import UsageError
from kvdoctor.facts.probes.serve_args import parse_serve_command


def parse(command: str, environ: dict[str, str] | None = None):
    return parse_serve_command(command.split(), environ or {})


def test_pasted_serve_command_with_every_spelling():
    cmd = parse(
        "vllm serve Qwen/Qwen2.5-3B-Instruct --kv-cache-dtype=turboquant_k8v4 -tp 2 --dtype bfloat16 "
        "--max_model_len 32K --gpu-memory-utilization 0.85 --enforce-eager -q fp8 --block-size 32"
    )
    assert cmd.model == "Qwen/Qwen2.5-3B-Instruct"
    serve = cmd.serve
    assert serve.kv_cache_dtype == "turboquant_k8v4"
    assert serve.tensor_parallel_size == 2
    assert serve.dtype == "bfloat16"
    assert serve.max_model_len == 32768
    assert serve.gpu_memory_utilization == 0.85
    assert serve.enforce_eager is True
    assert serve.quantization == "fp8"
    assert serve.block_size == 32


def test_python_module_launcher_and_model_flag():
    cmd = parse("python3 -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-8B --kv-cache-dtype fp8")
    assert cmd.model == "meta-llama/Llama-3.1-8B"
    assert cmd.serve.kv_cache_dtype == "fp8"


def test_unknown_flags_are_kept_not_rejected():
    cmd = parse("vllm serve m --enable-prefix-caching --port 8000 --served-model-name chat --foo=bar")
    assert cmd.serve.unknown_flags == ("--enable-prefix-caching", "--port=8000", "--served-model-name=chat", "--foo=bar")


def test_attention_backend_from_flag_wins_over_env():
    cmd = parse("vllm serve m --attention-backend flash_attn", {"VLLM_ATTENTION_BACKEND": "FLASHINFER"})
    assert cmd.serve.attention_backend == "FLASH_ATTN"
    assert cmd.serve.attention_backend_source == "--attention-backend"


def test_attention_backend_from_env_and_inline_assignment():
    cmd = parse("VLLM_ATTENTION_BACKEND=TRITON_ATTN vllm serve m")
    assert cmd.serve.attention_backend == "TRITON_ATTN"
    assert cmd.serve.attention_backend_source == "VLLM_ATTENTION_BACKEND"
    assert ("VLLM_ATTENTION_BACKEND", "TRITON_ATTN") in cmd.serve.env


def test_max_model_len_lowercase_k_is_thousands():
    assert parse("vllm serve m --max-model-len 32k").serve.max_model_len == 32000


@pytest.mark.parametrize(
    "command, message",
    [
        ("vllm serve m --dtype bf16", "--dtype"),
        ("vllm serve m -tp zero", "--tensor-parallel-size"),
        ("vllm serve m -tp 0", "at least 1"),
        ("vllm serve m --gpu-memory-utilization 1.5", "(0, 1]"),
        ("vllm serve m --kv-cache-dtype", "needs a value"),
        # argparse reads a word that starts with '-' as the next option: `--model $EMPTY --dtype auto` gives --model
        # no value ("expected one argument"), it does not serve a model named --dtype
        ("vllm serve --model --dtype auto", "the next word, --dtype, is an option"),
        ("vllm serve m -tp --enforce-eager", "needs a value"),
    ],
)
def test_bad_values_are_usage_errors(command, message):
    with pytest.raises(UsageError) as error:
        parse(command)
    assert message in error.value.one_line()


def test_a_negative_number_after_a_flag_is_its_value_as_argparse_reads_it():
    assert parse("vllm serve m --max-model-len -1").serve.max_model_len == -1  # vLLM's "auto", not an option


def test_config_yaml_is_read_and_flags_override_it(tmp_path):
    config = tmp_path / "serve.yaml"
    config.write_text("model: Qwen/Qwen2.5-3B-Instruct\nkv_cache_dtype: fp8\ntensor-parallel-size: 4\nenforce_eager: true\n")
    cmd = parse(f"vllm serve --config {config} --kv-cache-dtype turboquant_4bit_nc")
    assert cmd.model == "Qwen/Qwen2.5-3B-Instruct"
    assert cmd.serve.kv_cache_dtype == "turboquant_4bit_nc"
    assert cmd.serve.tensor_parallel_size == 4
    assert cmd.serve.enforce_eager is True


def test_missing_config_yaml_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="not found"):
        parse(f"vllm serve m --config {tmp_path / 'nope.yaml'}")


def test_the_serve_flag_table_matches_every_release_the_pack_read():
    """kvdoctor/data/serve_flags.yaml against each release's own parser: the option exists (bar the releases before
    --attention-backend), takes a value or not as listed, with the listed short forms and vLLM's human-int type."""
    from kvdoctor.base.versions import release_numbers
    from kvdoctor.base.yaml_safe import load_yaml
    from kvdoctor.data import read_data
    from kvdoctor.vllm_pack import load_release, pack_releases

    table = load_yaml(read_data("serve_flags.yaml"))
    # the table was read from 0.10.2-0.34.0; 0.7-0.9's parsers take plain ints and store_true switches without a
    # --no- form, which their own parser replay judges (tests/cli/test_unread_release.py)
    for version in [v for v in pack_releases() if release_numbers(v) >= (0, 10, 2)]:
        options = load_release(version).serve_args
        for entry in table["valued"].values():
            arg = options.get(entry["option"])
            if arg is None:
                assert entry["option"] == "--attention-backend" and release_numbers(version) < (0, 13, 0), version
                continue
            assert arg.takes_value and set(entry.get("short", ())) <= set(arg.option_strings), (version, entry)
            human = (arg.type_name or "").startswith("human_readable_int")
            if arg.type_name != "_optional_type":  # int | None wraps the type (--kv-cache-memory-bytes: human int)
                assert human == entry["value"].startswith("human_readable_int"), (version, entry)
        for option in table["switches"].values():
            arg = options[option]
            assert not arg.takes_value and f"--no-{option[2:]}" in arg.option_strings, version
