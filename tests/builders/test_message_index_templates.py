"""The message-index builder's raise sites: the condition a message is raised under (the innermost `if`, the
`except` clause, an assert's negated test), its class and function, and the names of the expressions it
interpolates, through packing and back."""

from __future__ import annotations

import json

from kvdoctor.builders.message_index import packing, templates
from kvdoctor.explain.message_index import MessageIndex

SOURCE = b'''
import logging
logger = logging.getLogger(__name__)

class FlashAttentionImpl:
    def __init__(self, head_size, kv_cache_dtype):
        if kv_cache_dtype.startswith("fp8") and not self.supports_fp8:
            raise NotImplementedError(f"FlashAttention does not support {kv_cache_dtype} KV cache for head size {head_size}")
        assert head_size % 8 == 0, "Head size %d must be a multiple of 8 for this kernel" % head_size
        try:
            import flash_attn
        except ImportError as e:
            raise RuntimeError("Could not import the flash-attention kernels: {}".format(e)) from e
        logger.error("Failed to allocate %s blocks of %s for the key cache", self.num_blocks, kv_cache_dtype)

def module_level(n):
    raise ValueError(f"Tensor parallel size {n} does not divide the number of attention heads evenly")
'''


def _by_type():
    return {entry[1] or entry[0]: entry for entry in templates.templates_in_source(SOURCE, "vllm/attn.py")}


def test_each_raise_site_keeps_its_condition_class_and_names():
    found = _by_type()
    kind, _, parts, path, function, condition, owner, names = found["NotImplementedError"]
    assert (function, owner, condition) == ("__init__", "FlashAttentionImpl",
                                            "kv_cache_dtype.startswith('fp8') and (not self.supports_fp8)")
    assert parts == ("FlashAttention does not support ", None, " KV cache for head size ", None)
    assert names == ("kv_cache_dtype", "head_size")


def test_an_assert_is_a_raise_of_assertion_error_under_its_negated_test():
    _, exc_type, parts, _, _, condition, _, names = _by_type()["AssertionError"]
    assert condition == "not (head_size % 8 == 0)"
    assert parts == ("Head size ", None, " must be a multiple of 8 for this kernel") and names == ("head_size",)


def test_a_raise_in_an_except_clause_is_raised_under_that_clause():
    _, _, parts, _, _, condition, _, names = _by_type()["RuntimeError"]
    assert condition == "except ImportError" and names == ("e",)


def test_logger_arguments_and_module_functions_name_their_values():
    found = _by_type()
    assert found["error"][7] == ("self.num_blocks", "kv_cache_dtype") and found["error"][5] is None
    assert found["ValueError"][4:8] == ("module_level", None, None, ("n",))


def test_raise_sites_travel_through_the_packed_index():
    entries = packing.collect("vllm", [("0.30.0", [("vllm/attn.py", SOURCE)]), ("0.31.0", [("vllm/attn.py", SOURCE)])])
    packed = json.loads(json.dumps(packing.pack(entries, {"vllm": ["0.30.0", "0.31.0"]})))
    assert packing.unpack(packed) and all(e["releases"] == "0.30.0-0.31.0" for e in packing.unpack(packed))
    located = MessageIndex(packed).locate("NotImplementedError: FlashAttention does not support fp8_e5m2 KV cache "
                                          "for head size 576")
    location = located.locations[0]
    assert location.qualname == "FlashAttentionImpl.__init__" and location.names == ("kv_cache_dtype", "head_size")
    assert located.named_values(location) == {"kv_cache_dtype": "fp8_e5m2", "head_size": "576"}


def test_a_long_condition_is_cut_and_long_expressions_lose_their_name():
    long_test = " and ".join(f"x{i} > {i}" for i in range(60))
    source = (f"def f(x):\n    if {long_test}:\n        raise ValueError(f'a value that is far too long: "
              f"{{{' + '.join(f'x{i}' for i in range(30))}}}')\n").encode()
    (entry,) = templates.templates_in_source(source, "vllm/x.py")
    assert len(entry[5]) == templates.MAX_CONDITION and entry[5].endswith("...")
    assert entry[7] == ()  # the interpolated expression is longer than MAX_NAME: no name is kept


def test_a_rebuild_from_the_same_wheels_is_byte_identical(tmp_path):
    import zipfile

    from kvdoctor.builders.message_index.build import build

    for version, extra in (("0.30.0", b""), ("0.31.0", b"\ndef g(x):\n    assert x, 'The value must never be zero here'\n")):
        with zipfile.ZipFile(tmp_path / f"vllm-{version}-cp38-abi3-manylinux_2_28_x86_64.whl", "w") as wheel:
            wheel.writestr("vllm/attn.py", SOURCE + extra)
            wheel.writestr("vllm/__init__.py", b"")
    outputs = []
    for attempt in range(2):
        out = tmp_path / f"index{attempt}.json.gz"
        packing.write(build(tmp_path, None, ("0.30.0", "0.31.0")), out)
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    index = packing.read(tmp_path / "index0.json.gz")
    assert index["packages"]["vllm"] == ["0.30.0", "0.31.0"]
    releases = {tuple(parts): [index["locations"][i][5] for i in ids]
                for group in index["anchors"].values() for parts, ids in group}
    assert releases[("The value must never be zero here",)] == ["0.31.0"]
    assert releases[("Tensor parallel size ", None, " does not divide the number of attention heads evenly")] == \
        ["0.30.0-0.31.0"]
