"""The vLLM release an image tag pins, for vLLM's own images and for builds of vLLM under another name."""

from __future__ import annotations

import pytest

from kvdoctor.scan.image import image_version


@pytest.mark.parametrize(("image", "release"), [
    ("vllm/vllm-openai:v0.25.1", "0.25.1"),
    ("aibrix/vllm-openai:v0.7.3.self.post1", "0.7.3"),
    # vllm-project/aibrix samples/volcano-engine: a build's tag names the release after labels
    ("aibrix-cn-beijing.cr.volces.com/aibrix/vllm-openai:aibrix-kvcache-v0.8.5-20250520", "0.8.5"),
    ("aibrix-cn-beijing.cr.volces.com/aibrix/vllm-openai:lmcache-v0.8.5-20250418", "0.8.5"),
    ("registry/team/vllm-openai:nixl-0.7.1", None),  # a number after a label without `v`: another project's
    ("aibrix/vllm-cpu-env:macos", None),
    ("vllm/vllm-openai:latest", None),
    ("lmcache/vllm-openai:v0.3.1", None),  # LMCache's own release
])  # fmt: skip
def test_the_release_a_tag_names(image, release):
    assert image_version(image).vllm_version == release
