"""The API-history builder on tiny wheels made here: what the AST gives per module, the release ranges it packs,
the bisection that reads a module of the releases between two wheels only where its API changed, and a rebuild
that is byte-identical."""

from __future__ import annotations

import gzip
import hashlib
import json
import zipfile

from kvdoctor.builders.api_history.bisect import ABSENT, ModuleApis, module_through
from kvdoctor.builders.api_history.build import build
from kvdoctor.builders.api_history.extract import module_api, module_name
from kvdoctor.builders.api_history.packing import ranges_of, write
from kvdoctor.builders.api_history.sources import Release

OLD_ARGS = b'''
from dataclasses import dataclass
from vllm.utils import FlexibleArgumentParser

@dataclass
class EngineArgs:
    model: str = "m"
    seed: int = 0

def make_parser(parser, strict=False):
    return parser
'''
NEW_ARGS = b'''
from dataclasses import dataclass
from typing import ClassVar

@dataclass
class EngineArgs:
    model: str = "m"
    worker_extension_cls: str = ""
    registry: ClassVar[dict] = {}

class LLMEngine:
    def __init__(self, engine_args, **kwargs):
        self.engine_core = None

    def step(self):
        self.stats = []
'''


def _wheel(folder, version, files):
    path = folder / f"vllm-{version}-cp38-abi3-manylinux1_x86_64.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return path


def test_module_api_reads_names_members_and_parameters():
    keys = module_api("vllm.engine.arg_utils", NEW_ARGS)
    assert ("name", "vllm.engine.arg_utils", "dataclass") in keys  # a re-exported import
    assert ("param", "vllm.engine.arg_utils.EngineArgs", "worker_extension_cls") in keys
    assert ("param", "vllm.engine.arg_utils.EngineArgs", "registry") not in keys  # ClassVar is no field
    assert ("member", "vllm.engine.arg_utils.LLMEngine", "stats") in keys  # self.x in any method
    assert ("param", "vllm.engine.arg_utils.LLMEngine", "**") in keys
    assert ("param", "vllm.engine.arg_utils.LLMEngine", "self") not in keys
    assert module_api("vllm.broken", b"def (:") == frozenset()
    assert module_name("vllm/utils/__init__.py") == "vllm.utils" and module_name("vllm/a-b.py") is None


def test_build_packs_ranges_and_rebuilds_byte_identical(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "0.1.0", {"vllm/__init__.py": b"", "vllm/engine/arg_utils.py": OLD_ARGS,
                             "vllm/utils.py": b"class FlexibleArgumentParser: pass\n"})
    _wheel(wheels, "0.2.0", {"vllm/__init__.py": b"", "vllm/engine/arg_utils.py": OLD_ARGS,
                             "vllm/utils.py": b"class FlexibleArgumentParser: pass\n"})
    _wheel(wheels, "0.3.0", {"vllm/__init__.py": b"", "vllm/engine/arg_utils.py": NEW_ARGS,
                             "vllm/utils/argparse_utils.py": b"class FlexibleArgumentParser: pass\n"})
    history = build(wheels, tmp_path / "cache", None)
    assert history["releases"] == ["0.1.0", "0.2.0", "0.3.0"] and history["complete"] is False
    assert history["modules"]["vllm.utils"] == [["0.1.0", "0.3.0"]]  # a package from 0.3.0 on
    assert history["names"]["vllm.utils"]["FlexibleArgumentParser"] == [["0.1.0", "0.2.0"]]
    assert history["names"]["vllm.utils.argparse_utils"]["FlexibleArgumentParser"] == 0  # its module's ranges
    assert history["params"]["vllm.engine.arg_utils.EngineArgs"]["seed"] == [["0.1.0", "0.2.0"]]
    assert history["params"]["vllm.engine.arg_utils.EngineArgs"]["worker_extension_cls"] == [["0.3.0", "0.3.0"]]
    first, second = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    write(history, first)
    write(build(wheels, tmp_path / "cache", None), second)  # the second build reads the cache
    assert first.read_bytes() == second.read_bytes()
    header, *tables = gzip.decompress(first.read_bytes()).decode().splitlines()
    assert json.loads(header)["read_whole"] == ["0.1.0", "0.2.0", "0.3.0"]
    assert "P\tvllm.engine.arg_utils.EngineArgs\t" + json.dumps(history["params"]["vllm.engine.arg_utils.EngineArgs"],
                                                                sort_keys=True, separators=(",", ":")) in tables


def test_ranges_of_splits_runs():
    assert ranges_of(0b1101, ["a", "b", "c", "d"]) == [["a", "a"], ["c", "d"]]
    assert ranges_of(0, ["a"]) == []


def _release(version, files, whole):
    return Release(version, {p: hashlib.sha256(d).hexdigest() for p, d in files.items()}, whole, files.__getitem__)


def test_bisection_finds_the_release_a_name_appeared_in_with_few_fetches(tmp_path):
    """Ten releases between two read whole; the parameter appears in the 7th: found exactly, about log2(10)
    fetches, and a release whose file is byte-identical to a known one is never fetched."""
    path = "vllm/engine/arg_utils.py"
    old, new = {path: OLD_ARGS}, {path: NEW_ARGS}
    span = [_release("0.1.0", old, True)]
    for i in range(1, 11):
        body = OLD_ARGS + f"# r{i}\n".encode() if i < 7 else NEW_ARGS + f"# r{i}\n".encode()
        span.append(_release(f"0.1.{i}", {path: body}, False))
    span.append(_release("0.2.0", new, True))
    apis = ModuleApis(tmp_path)
    column = module_through(apis, path, span)
    has = [("param", "vllm.engine.arg_utils.EngineArgs", "worker_extension_cls") in keys for keys in column]
    assert has == [False] * 7 + [True] * 5
    assert apis.fetched <= 5


def test_bisection_reads_a_module_only_present_between(tmp_path):
    path = "vllm/transient.py"
    span = [_release("0.1.0", {}, True), _release("0.1.1", {path: b"X = 1\n"}, False), _release("0.2.0", {}, True)]
    column = module_through(ModuleApis(tmp_path), path, span)
    assert column[0] is ABSENT and column[2] is ABSENT and ("name", "vllm.transient", "X") in column[1]


def test_star_imports_re_export_the_target_names_per_release(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "0.1.0", {"vllm/distributed/__init__.py": b"from .parallel_state import *\n",
                             "vllm/distributed/parallel_state.py": b"def get_tp_group(): pass\ndef _private(): pass\n"})
    _wheel(wheels, "0.2.0", {"vllm/distributed/__init__.py": b"",
                             "vllm/distributed/parallel_state.py": b"def get_tp_group(): pass\n"})
    history = build(wheels, tmp_path / "cache", None)
    assert history["names"]["vllm.distributed"] == {"get_tp_group": [["0.1.0", "0.1.0"]]}
    assert history["names"]["vllm.distributed.parallel_state"]["get_tp_group"] == 0


def test_no_wheels_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    import sys

    import pytest

    from kvdoctor.builders.api_history.build import main

    monkeypatch.setattr(sys, "argv", ["x", "--wheels", str(tmp_path), "--out", str(tmp_path / "o.gz"), "--no-network"])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1
