"""Property tests: whatever the input, kvdoctor's parsers raise only their KvdoctorError, and JSON output
always validates against the report schema."""

from __future__ import annotations

import json
import string

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import EXAMPLE_MODEL, assert_valid_report
from kvdoctor.base.errors import KvdoctorError, LogInputError, ModelConfigError, RulesFileError, UsageError

FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

SERVE_FLAGS = [
    "--kv-cache-dtype", "--kv_cache_dtype", "--dtype", "--attention-backend", "--quantization", "-q",
    "--tensor-parallel-size", "-tp", "-pp", "--max-model-len", "--gpu-memory-utilization", "--block-size",
    "--speculative-config", "--enforce-eager", "--no-enforce-eager", "--trust-remote-code", "--model",
    "--enable-prefix-caching", "--port", "--host", "--", "-",
]
WORDS = st.sampled_from(["auto", "fp8", "turboquant_k8v4", "bfloat16", "0", "-1", "1.5", "32k", "1M", "inf", "nan",
                         "1e400", "", "=", "two", "vllm", "serve", "VLLM_ATTENTION_BACKEND=FLASHINFER", "A=b"])
TOKENS = st.one_of(st.sampled_from(SERVE_FLAGS), WORDS, st.text(max_size=12),
                   st.builds(lambda f, v: f"{f}={v}", st.sampled_from(SERVE_FLAGS), WORDS))


@FAST
@given(argv=st.lists(TOKENS, max_size=12),
       env=st.dictionaries(st.sampled_from(["VLLM_ATTENTION_BACKEND", "VLLM_USE_V1", "OTHER"]), st.text(max_size=8)))
def test_serve_parser_returns_or_raises_usage_error(argv, env):
    from kvdoctor.facts.probes.serve_args import parse_serve_command

    try:
        command = parse_serve_command(["vllm", "serve", *argv], env)
    except UsageError as exc:
        assert "\n" not in exc.one_line()
        return
    serve = command.serve
    assert serve.tensor_parallel_size is None or serve.tensor_parallel_size >= 1
    assert serve.gpu_memory_utilization is None or 0 < serve.gpu_memory_utilization <= 1


CONFIG_KEYS = ["num_attention_heads", "num_key_value_heads", "hidden_size", "head_dim", "kv_lora_rank",
               "qk_rope_head_dim", "num_hidden_layers", "max_position_embeddings", "torch_dtype", "dtype",
               "model_type", "architectures", "quantization_config", "sliding_window", "multi_query",
               "auto_map", "layer_types", "text_config", "n_head", "n_embd"]
JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**6), st.floats(allow_nan=False),
                         st.text(max_size=10), st.sampled_from(["bfloat16", "torch.float16", "float8"]))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(CONFIG_KEYS), inner, max_size=4)), max_leaves=12)


@FAST
@given(config=st.one_of(st.dictionaries(st.sampled_from(CONFIG_KEYS), JSON_VALUES, max_size=10), JSON_VALUES))
def test_config_json_reads_or_raises_model_config_error(tmp_path, config):
    from kvdoctor.facts.probes.model_config import read_model_facts
    from kvdoctor.facts.probes.model_source import ConfigLocation

    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    try:
        facts = read_model_facts(ConfigLocation(path, str(path), "m", tmp_path))
    except ModelConfigError as exc:
        assert "\n" not in exc.one_line()
        return
    assert facts.num_kv_heads is None or facts.num_kv_heads >= 1
    assert facts.head_dim is None or facts.head_dim >= 0


@FAST
@given(data=st.binary(max_size=300))
def test_config_json_bytes_never_crash(tmp_path, data):
    from kvdoctor.facts.probes.model_config import read_model_facts
    from kvdoctor.facts.probes.model_source import ConfigLocation

    path = tmp_path / "config.json"
    path.write_bytes(data)
    try:
        read_model_facts(ConfigLocation(path, str(path), "m", tmp_path))
    except ModelConfigError:
        pass


RULE_KEYS = ["id", "title", "severity", "when", "cause", "fixes", "references", "signatures", "explain_only",
             "fact", "eq", "in", "version", "matches", "not", "all", "any", "pattern", "role", "flag", "dry_run"]
RULE_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8),
                         st.sampled_from(["ORG101", "error", "warning", "gpu.name", "kv.is_turboquant",
                                          "vllm.version", ">=0.25", ">>x", "([", "root", "model_dtype"]))
RULE_DATA = st.recursive(RULE_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(RULE_KEYS), inner, max_size=5)), max_leaves=20)


@FAST
@given(rules=st.one_of(st.lists(RULE_DATA, max_size=3), RULE_DATA))
def test_rules_load_or_raise_rules_file_error(tmp_path, rules):
    from kvdoctor.data.fact_names import is_fact_name
    from kvdoctor.rules.loader import load_rules

    path = tmp_path / "org.yaml"
    path.write_text(yaml.safe_dump({"rules": rules}))
    try:
        loaded = load_rules([path], is_fact_name)
    except RulesFileError as exc:
        assert "\n" not in exc.one_line()
        return
    assert all(rule.when is not None or rule.explain_only for rule in loaded)


@FAST
@given(text=st.text(alphabet=string.printable + "\x00\xff!:{}[]-", max_size=200))
def test_rules_text_never_crashes(tmp_path, text):
    from kvdoctor.data.fact_names import is_fact_name
    from kvdoctor.rules.loader import load_rules

    path = tmp_path / "org.yaml"
    path.write_text(text)
    try:
        load_rules([path], is_fact_name)
    except RulesFileError:
        pass


LOG_LINES = st.sampled_from([
    "INFO 05-02 10:22:18 [core.py:396] Using FlashInfer backend.",
    "(EngineCore_DP0 pid=1234) ERROR 05-02 10:22:18 [core.py:396] EngineCore failed to start.",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/vllm/engine.py", line 10, in run',
    "AssertionError: float8e4b15 is not supported",
    "RuntimeError: Engine core initialization failed. See root cause above.",
    "ValueError: Invalid kv_cache_dtype: fp8_e4m3fn. Valid values are: ['auto', 'fp8']",
    "torch.OutOfMemoryError: CUDA out of memory.",
    "2025-03-10T15:07:20Z vllm-1  | [rank0]: raise",
    "\x1b[31mERROR\x1b[0m",
    "The above exception was the direct cause of the following exception:",
    "kv_cache_dtype=turboquant_k8v4, dtype=torch.bfloat16",
])


@SLOW
@given(lines=st.lists(st.one_of(LOG_LINES, st.text(max_size=40)), max_size=30),
       ending=st.sampled_from(["\n", "\r\n", "\r"]))
def test_log_explain_never_crashes_and_json_is_valid(report_schema, lines, ending):
    from kvdoctor.explain.explain import explain_text
    from kvdoctor.explain.log_lines import decode_log
    from kvdoctor.report.check.json import render

    try:
        text = decode_log(ending.join(lines).encode("utf-8", "surrogatepass"), "stdin")
    except (LogInputError, UnicodeEncodeError):
        return
    report = explain_text(text)
    assert_valid_report(json.loads(render(report)), report_schema)


@FAST
@given(data=st.binary(max_size=400))
def test_log_bytes_decode_or_raise_log_input_error(data):
    from kvdoctor.explain.log_lines import decode_log, normalise

    try:
        lines = normalise(decode_log(data, "stdin"))
    except LogInputError:
        return
    assert all("\n" not in line.text for line in lines)


@SLOW
@given(kv=st.sampled_from(["auto", "fp8", "fp8_e5m2", "turboquant_k8v4", "turboquant_4bit_nc", "int4", "fp8_e4m3fn"]),
       dtype=st.sampled_from([None, "auto", "half", "bfloat16", "float32"]),
       gpu=st.sampled_from(["A100", "H100", "L4", "T4", "sm_75", "sm_120", "8.6"]),
       version=st.sampled_from(["0.20.0", "0.25.1", "0.27.0", "1.0"]),
       extra=st.lists(TOKENS, max_size=4))
def test_check_json_output_is_always_valid(report_schema, kv, dtype, gpu, version, extra):
    from kvdoctor.check.run import CheckSettings, run_check
    from kvdoctor.facts.collect import CheckOptions
    from kvdoctor.report.check.json import render

    options = CheckOptions(model=str(EXAMPLE_MODEL), serve_argv=tuple(extra), kv_cache_dtype=kv, dtype=dtype,
                           gpu=gpu, vllm_version=version, environ={})
    try:
        report = run_check(options, CheckSettings(compile=False))
    except KvdoctorError as exc:
        assert "\n" not in exc.one_line()
        return
    assert_valid_report(json.loads(render(report)), report_schema)
