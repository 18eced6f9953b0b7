"""The knowledge pack's loader: facts per release as vLLM's own code gave them, each with its file:line."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kvdoctor.vllm_pack import load_release, newest_release, pack_releases
from kvdoctor.vllm_pack.candidates import candidates

REPO = Path(__file__).resolve().parents[2]
FULL = ("0.20.0 0.20.1 0.20.2 0.21.0 0.22.0 0.22.1 0.23.0 0.24.0 0.25.0 0.25.1 0.26.0 0.27.0 0.27.1 0.28.0 "
        "0.29.0 0.30.0 0.31.0 0.32.0 0.33.0 0.34.0").split()


def test_pack_covers_every_release_0_20_to_0_34_in_version_order():
    releases = pack_releases()
    assert set(FULL) <= set(releases)
    assert list(releases[releases.index("0.20.0"):]) == FULL
    assert newest_release() == "0.34.0"


def test_a_release_outside_the_pack_is_none_and_says_where_facts_stop():
    assert load_release("0.35.0") is None
    assert load_release("9.9.9") is None
    assert candidates("0.35.0").note == "kvdoctor's facts about vLLM stop at 0.34.0; 0.35.0 is newer"
    assert candidates("0.25.1").note is None


# Run in a fresh interpreter (every cache cold): each file opened while two releases load, by name.
LOAD_TWO_RELEASES = """
import builtins, io, os
opened = []
_open = io.open
def spy(file, *args, **kwargs):
    opened.append(os.path.basename(os.fspath(file)) if not isinstance(file, int) else file)
    return _open(file, *args, **kwargs)
io.open = builtins.open = spy
from kvdoctor.vllm_pack import load_release
opened.clear()
assert load_release("0.34.0") is not None and load_release("0.25.1") is not None
print(*opened)
"""


def test_loading_releases_decodes_the_pack_index_once_and_no_release_file():
    done = subprocess.run([sys.executable, "-c", LOAD_TWO_RELEASES], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["index.json"]  # a release's own files are read when their details are asked for


@pytest.mark.parametrize("version, count, first_new", [
    ("0.20.0", 15, None),
    ("0.25.1", 16, "int4_per_token_head"),
    ("0.28.0", 17, "nvfp4_4over6"),
    ("0.30.0", 18, "nvfp4_ds_mla"),
    ("0.32.0", 19, "ultraquant_4bit"),
    ("0.33.0", 22, "octave_k3v4"),
])
def test_kv_cache_dtypes_are_vllms_own_list(version, count, first_new):
    release = load_release(version)
    assert len(release.kv_cache_dtypes) == count, release.kv_cache_dtypes
    assert release.kv_cache_dtypes[:3] == ("auto", "float16", "bfloat16")
    if first_new:
        assert first_new in release.kv_cache_dtypes
    # the parser's choices are the same set (0.33.0+ validates the value after parsing: no choices)
    choices = release.serve_args["--kv-cache-dtype"].choices
    assert choices is None if version >= "0.33.0" else set(choices) == set(release.kv_cache_dtypes)


def test_int4_per_token_head_arrives_in_0_25_0():
    assert "int4_per_token_head" not in load_release("0.24.0").kv_cache_dtypes
    assert "int4_per_token_head" in load_release("0.25.0").kv_cache_dtypes


@pytest.mark.parametrize("version", FULL)
def test_model_dtypes_and_core_serve_args_in_every_release(version):
    release = load_release(version)
    assert release.model_dtypes == ("auto", "half", "float16", "bfloat16", "float", "float32")
    assert release.allow_abbrev is True
    tp = release.serve_args["-tp"]
    assert tp is release.serve_args["--tensor-parallel-size"] and tp.dest == "tensor_parallel_size"
    assert tp.takes_value and tp.type_name == "int" and tp.default == 1
    eager = release.serve_args["--no-enforce-eager"]
    assert eager.dest == "enforce_eager" and eager.is_bool_optional and not eager.takes_value
    assert release.pins["torch"][0].isdigit()
    assert "model_tag" in release.positionals


def test_option_spellings_and_pins_of_0_25_1():
    release = load_release("0.25.1")
    assert release.serve_args["--api-server-count"].option_strings == ("--api-server-count", "-asc")
    assert release.pins["torch"] == "2.11.0"


@pytest.mark.parametrize("version", FULL)
def test_kv_cache_dtyp_is_an_ambiguous_prefix_in_every_release(version):
    # --kv-cache-dtype-skip-layers is in vLLM's own parser from 0.20.0 on (not 0.24.0, as hand notes had it)
    release = load_release(version)
    matches = sorted({a.dest for o, a in release.serve_args.items() if o.startswith("--kv-cache-dtyp")})
    assert matches == ["kv_cache_dtype", "kv_cache_dtype_skip_layers"]


def test_gpu_memory_utilization_default_is_the_releases_own():
    values = {v: load_release(v).defaults["gpu_memory_utilization"] for v in FULL}
    assert values["0.20.0"] == values["0.25.1"] == values["0.33.0"] == 0.92
    assert values["0.34.0"] is None  # 0.34.0 decides it at run time (CacheConfig: float | None = None)
