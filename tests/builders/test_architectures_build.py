"""The architectures builder re-reads releases from their wheels and writes exactly the stored pack files."""

from __future__ import annotations

import pytest

from dryrun_support import release_sources
from kvdoctor.builders.architectures.build import OUT_DIR, release_record, render
from kvdoctor.builders.architectures.read import MEMBERS, read_registry
from kvdoctor.vllm_pack.store import pack_releases


@pytest.mark.parametrize("version", ["0.4.3", "0.8.5", "0.34.0"])  # models/__init__.py, loader raise; registry.py
def test_rebuild_is_byte_identical(version):
    texts = release_sources(version, MEMBERS)
    rebuilt = render(release_record(version, read_registry(texts)))
    assert rebuilt.encode("utf-8") == (OUT_DIR / f"{version}.json").read_bytes()


def test_every_pack_release_has_its_registry_read():
    assert sorted(p.stem for p in OUT_DIR.glob("*.json")) == sorted(pack_releases())


def test_the_refusal_location_is_the_raise_in_the_release_code():
    texts = release_sources("0.34.0", MEMBERS)
    record = release_record("0.34.0", read_registry(texts))
    for kind, message in record["messages"].items():
        file, line = message["at"].rsplit(":", 1)
        assert "raise" in texts[file].splitlines()[int(line) - 1], kind
    assert record["messages"]["unsupported"]["template"].startswith("Model architectures {architectures} are not")
    assert record["architectures"]["Qwen3ForCausalLM"] == [["_TEXT_GENERATION_MODELS", 205]]
    assert '"Qwen3ForCausalLM"' in texts[record["registry"]].splitlines()[204]
