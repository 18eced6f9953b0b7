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
