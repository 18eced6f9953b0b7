"""Pieces cut here (tools/prepare_real_vllm.py) put back together there (gpu_verify/startups/receive.py)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
from pathlib import Path

import pytest

from gpu_verify.startups import receive

REPO = Path(__file__).resolve().parents[2]


def prepare_module():
    spec = importlib.util.spec_from_file_location("prepare_real_vllm", REPO / "tools" / "prepare_real_vllm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make(path: Path, size: int) -> Path:
    path.write_bytes(os.urandom(size))
    return path


def test_pieces_are_append_only_and_reassemble(tmp_path):
    prep = prepare_module()
    src = tmp_path / "src"
    src.mkdir()
    carried = tmp_path / "carry"
    bundle = prep.Bundle(carried, piece_bytes=1000)
    a, b, c = make(src / "a.whl", 2500), make(src / "b.whl", 10), make(src / "vllm-1.tar.xz", 1733)
    bundle.add("deps/a.whl", a)
    bundle.add("deps/b.whl", b)
    bundle.add("deps/a.whl", a)  # a wheel two releases share travels once
    bundle.cut()
    first = {p["name"]: p["sha256"] for p in bundle.pieces}
    assert list(first) == ["piece-00", "piece-01"]  # 2510 bytes: two full pieces, the rest waits
    bundle.add("vllm-1.tar.xz", c)
    bundle.cut(final=True)
    bundle.manifest([{"version": "1", "tar": "vllm-1.tar.xz", "deps": ["deps/a.whl", "deps/b.whl"]}])
    assert [p["name"] for p in bundle.pieces] == ["piece-00", "piece-01", "piece-02", "piece-03", "piece-04"]
    assert {p["name"]: p["sha256"] for p in bundle.pieces[:2]} == first
    manifest = json.loads((carried / "manifest.json").read_text())
    assert manifest["total_bytes"] == 2500 + 10 + 1733

    stage = tmp_path / "stage"
    stage.mkdir()
    # The pieces arrive one command at a time; a file appears once all its bytes are there.
    only = tmp_path / "one"
    only.mkdir()
    (only / "manifest.json").write_text((carried / "manifest.json").read_text())
    for i, piece in enumerate(manifest["pieces"]):
        (only / piece["name"]).write_bytes((carried / piece["name"]).read_bytes())
        assert receive.take_pieces(only, stage, manifest) == [piece["name"]]
        complete = receive.assemble(stage, manifest)
        if i < 2:
            assert complete == []
        (only / piece["name"]).unlink()
    assert sorted(complete) == ["deps/a.whl", "deps/b.whl", "vllm-1.tar.xz"]
    for name, path in (("deps/a.whl", a), ("deps/b.whl", b), ("vllm-1.tar.xz", c)):
        assert (stage / "files" / name).read_bytes() == path.read_bytes()


def test_a_damaged_piece_is_refused(tmp_path):
    prep = prepare_module()
    carried = tmp_path / "carry"
    bundle = prep.Bundle(carried, piece_bytes=100)
    bundle.add("x", make(tmp_path / "x", 150))
    bundle.cut(final=True)
    bundle.manifest([])
    data = bytearray((carried / "piece-01").read_bytes())
    data[0] ^= 0xFF
    (carried / "piece-01").write_bytes(bytes(data))
    with pytest.raises(SystemExit, match="piece-01 does not match"):
        receive.take_pieces(carried, tmp_path / "stage", json.loads((carried / "manifest.json").read_text()))


def test_record_check_finds_a_changed_member(tmp_path):
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm-9.9.dist-info").mkdir()
    body = b"print('hi')\n"
    (site / "vllm" / "x.py").write_bytes(body)
    digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
    (site / "vllm-9.9.dist-info" / "RECORD").write_text(
        f"vllm/x.py,sha256={digest},{len(body)}\nvllm-9.9.dist-info/RECORD,,\n")
    assert receive.verify_record(site, "9.9") == (1, [])
    (site / "vllm" / "x.py").write_bytes(b"changed\n")
    assert receive.verify_record(site, "9.9") == (1, ["vllm/x.py"])


def test_requirements_drop_what_the_machine_has(tmp_path, monkeypatch):
    import zipfile

    prep = prepare_module()
    wheel = tmp_path / "vllm-9.9-py3-none-any.whl"
    meta = "\n".join(["Metadata-Version: 2.1", "Name: vllm", "Version: 9.9",
                      "Requires-Dist: torch==2.11.0", "Requires-Dist: numpy", "Requires-Dist: nvidia-cutlass-dsl[cu13]==4.5.2",
                      "Requires-Dist: xgrammar<1.0.0,>=0.2.1; platform_machine == \"x86_64\"",
                      "Requires-Dist: pydantic>=2.12", "Requires-Dist: pywin32; sys_platform == \"win32\"",
                      "Requires-Dist: pytest; extra == \"test\""])
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("vllm-9.9.dist-info/METADATA", meta)
    reqs = prep.requirements(wheel, "9.9")
    assert reqs == ["xgrammar==0.2.8", "pydantic>=2.12"]  # numpy is on the machine; torch/nvidia never travel
    assert prep.requirements(wheel, "9.9", prefer=False)[0] == "xgrammar<1.0.0,>=0.2.1"
