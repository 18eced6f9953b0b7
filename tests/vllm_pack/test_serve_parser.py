"""vLLM's serve parser as kvdoctor replays it (kvdoctor/vllm_pack/serve_parser.py)."""

from __future__ import annotations


def test_the_optimization_level_shorthand_is_vllms_own():
    """FlexibleArgumentParser reads -O3, -O=3, -O 3 and -Odecode as --optimization-level (0.11+; -O was the
    compilation config's own option before): never an unrecognized argument."""
    from kvdoctor.vllm_pack.release import load_release
    from kvdoctor.vllm_pack.serve_parser import judge_argv

    for version in ("0.8.5", "0.25.1"):
        options = load_release(version).serve_args
        for argv in (["m", "-O2"], ["m", "-O=3"], ["m", "-O", "3"]):
            assert judge_argv(argv, options).error is None, (version, argv)
    assert judge_argv(["m", "-X2"], load_release("0.25.1").serve_args).error is not None


def test_a_dict_valued_option_takes_json_from_0_10():
    """0.10+ read `--limit-mm-per-prompt` with parse_type(json.loads): `image=1` is refused (a real Compose file's);
    0.9 still read it as key=value (nullable_kvs)."""
    from kvdoctor.vllm_pack.release import load_release
    from kvdoctor.vllm_pack.serve_parser import judge_argv

    new = load_release("0.25.1").serve_args
    refused = judge_argv(["m", "--limit-mm-per-prompt", "image=1"], new, json_dicts=True).error
    assert refused and "cannot be converted" in refused
    assert judge_argv(["m", "--limit-mm-per-prompt", '{"image": 1}'], new, json_dicts=True).error is None
    old = load_release("0.9.2").serve_args
    assert judge_argv(["m", "--limit-mm-per-prompt", "image=1"], old, json_dicts=False).error is None


def test_before_0_10_a_dict_option_is_json_or_key_int_pairs_as_each_release_parses_it():
    """A JSON value kept in literal quotes (llm-d's sample: `--override-generation-config='{"...": true}'`, no shell
    strips them) is refused by every release, each in its own words: 0.9's parse_type reads a value not shaped `{...}`
    with nullable_kvs (`Each item should be in the form KEY=VALUE`, engine/arg_utils.py of 0.9.0), 0.7-0.8 have
    `type=json.loads` (argparse: `invalid loads value`), 0.5-0.7's --limit-mm-per-prompt is nullable_kvs itself."""
    from kvdoctor.vllm_pack.release import load_release
    from kvdoctor.vllm_pack.serve_parser import judge_argv

    quoted = ["m", "--override-generation-config='{\"attn_temperature_tuning\": true}'"]
    assert "Each item should be in the form KEY=VALUE" in judge_argv(quoted, load_release("0.9.2").serve_args).error
    for version in ("0.7.3", "0.8.5"):
        assert "invalid loads value" in judge_argv(quoted, load_release(version).serve_args).error, version
        assert judge_argv(["m", "--override-generation-config", '{"temperature": 0.5}'],
                          load_release(version).serve_args).error is None, version
    old = load_release("0.6.6.post1").serve_args
    assert "Failed to parse value of item image=x" in judge_argv(["m", "--limit-mm-per-prompt", "image=x"], old).error
    assert judge_argv(["m", "--limit-mm-per-prompt", "image=2,video=1"], old).error is None
    assert judge_argv(["m", "--limit-mm-per-prompt", "image=2", "--override-generation-config", '{"top_k": 5}'],
                      load_release("0.9.2").serve_args).error is None
