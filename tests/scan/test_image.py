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


OMNI = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: qwen2-5-omni-7b
spec:
  template:
    spec:
      containers:
      - name: vllm-omni
        image: {image}
        command: [vllm, serve, Qwen/Qwen2.5-Omni-7B, --omni, --port, "8000", --stage-init-timeout, "600",
                  --max-model-len, "8192"]
"""


def _refused(tmp_path, image):
    from scan_support import scan

    path = tmp_path / "omni.yaml"
    path.write_text(OMNI.format(image=image))
    (result,) = scan([str(path)], tmp_path, gpu="A100").workloads
    fired = {p.finding.rule_id for p in result.placed if p.finding.status == "fired"}
    return "KVD004" in fired, result.workload.notes


def test_vllm_omnis_own_serve_options_are_left_out_and_named_on_its_image(tmp_path):
    # vllm-project/aibrix samples/vllm_omni/qwen2-5-omni-7b.yaml: `vllm serve ... --omni` on vllm/vllm-omni
    refused, notes = _refused(tmp_path, "vllm/vllm-omni:v0.20.0")
    assert not refused
    assert any("vLLM-Omni's own serve options" in n and "--omni --stage-init-timeout" in n for n in notes)


def test_the_same_options_on_vllms_own_image_are_refused(tmp_path):
    assert _refused(tmp_path, "vllm/vllm-openai:v0.20.0")[0]


@pytest.mark.parametrize(("image", "unknown_build"), [
    ("lmcache/vllm-openai:2025-03-10", True),  # vllm-project/aibrix test/regression/v0.3.0/lmcache_helm_stack.yaml
    ("lmcache/vllm-openai:v0.3.1", True),  # LMCache's release: some vLLM of its day
    ("vllm/vllm-openai@sha256:" + "a" * 64, True),
    ("vllm/vllm-openai:latest", False),  # floating: today's releases
    ("vllm/vllm-openai:nightly-2b4f0d5", False),
    ("vllm/vllm-openai", False),
    ("vllm/vllm-openai:v0.25.1", False),  # a release kvdoctor names
    ("ubuntu:22.04", False),  # not a vLLM image: what it installs follows today's releases
    ("${BASE_IMAGE}:${TAG}", False),
])  # fmt: skip
def test_a_vllm_image_pinned_to_a_build_of_no_known_release(image, unknown_build):
    from kvdoctor.scan.image import pins_an_unknown_build

    assert pins_an_unknown_build(image) is unknown_build


def test_a_dated_build_is_judged_as_any_release_so_old_flags_are_undecided_not_errors(tmp_path):
    text = OMNI.format(image="lmcache/vllm-openai:2025-03-10").replace(
        "command: [vllm, serve, Qwen/Qwen2.5-Omni-7B, --omni, --port, \"8000\", --stage-init-timeout, \"600\",",
        "args: [--model, Qwen/Qwen2.5-Omni-7B, --swap-space, \"0\", --disable-log-requests,")
    from scan_support import scan

    path = tmp_path / "dated.yaml"
    path.write_text(text)
    (result,) = scan([str(path)], tmp_path, gpu="A100").workloads
    (kvd004,) = [p.finding for p in result.placed if p.finding.rule_id == "KVD004"]
    assert kvd004.status == "undecided"  # was fired: judged as 0.20-0.34, which dropped both flags


@pytest.mark.parametrize(("image", "host"), [
    ("$VLLM_IMAGE", True),  # AMD-melliott/ai-infra-summit docker-compose.vllm.yaml: set in an .env not in the tree
    ("vllm/vllm-openai:${VLLM_TAG}", True),
    ("${REGISTRY}/vllm-openai:v0.25.1", True),
    ("vllm/vllm-openai:v0.25.1", False),
    ("vllm/vllm-openai:latest", False),  # floating, but named: today's releases
])  # fmt: skip
def test_an_image_left_to_a_variable_is_the_hosts_choice(image, host):
    from kvdoctor.scan.image import chosen_by_the_host

    assert chosen_by_the_host(image) is host


def test_a_compose_image_from_an_unset_variable_is_judged_as_any_release(tmp_path):
    from scan_support import scan

    path = tmp_path / "compose.yaml"
    path.write_text("services:\n  vllm:\n    image: $VLLM_IMAGE\n    command: python -m vllm.entrypoints.openai.api_server"
                    " --model Qwen/Qwen3-4B --enable-reasoning --reasoning-parser deepseek_r1\n")  # fmt: skip
    (result,) = scan([str(path)], tmp_path, gpu="A100").workloads
    (kvd004,) = [p.finding for p in result.placed if p.finding.rule_id == "KVD004"]
    assert kvd004.status == "undecided"  # 0.20+ dropped --enable-reasoning; the host's image may be older
    path.write_text(path.read_text().replace("$VLLM_IMAGE", "vllm/vllm-openai:latest"))
    (result,) = scan([str(path)], tmp_path, gpu="A100").workloads
    assert [p.finding.status for p in result.placed if p.finding.rule_id == "KVD004"] == ["fired"]  # named: today's


def test_a_forks_floating_tag_is_of_any_age_an_upstream_builds_is_todays():
    """opea/vllm-gaudi is built from HabanaAI/vllm-fork (kvdoctor/data/vllm_forks.yaml): its :latest runs the fork's
    newest build, whose parser may be a v0.6-era vLLM's, so it is judged as any release; opea/vllm-rocm, built from
    upstream vLLM, and vLLM's own :latest stay today's releases."""
    from kvdoctor.scan.image import pins_an_unknown_build

    assert pins_an_unknown_build("opea/vllm-gaudi:latest")
    assert pins_an_unknown_build("docker.io/opea/vllm-gaudi")
    assert not pins_an_unknown_build("opea/vllm-rocm:latest")
    assert not pins_an_unknown_build("vllm/vllm-openai:latest")


def test_a_flag_only_old_releases_accept_on_a_forks_latest_is_undecided_not_refused(tmp_path):
    """--max-seq-len-to-capture left vLLM's parser in 0.11; on HabanaAI's fork (opea/vllm-gaudi:latest) it may be
    accepted, so no release's refusal is an error there, while vLLM's own :latest refuses it."""
    from scan_support import scan

    def kvd004(image: str) -> str:
        path = tmp_path / f"{image.split('/')[0]}.sh"
        path.write_text(f"docker run -d --name srv {image} --model org/m --max-seq-len-to-capture 2048\n")
        (result,) = scan([str(path)], tmp_path).workloads
        return next(p.finding.status for p in result.placed if p.finding.rule_id == "KVD004")

    assert kvd004("opea/vllm-gaudi:latest") == "undecided"
    assert kvd004("vllm/vllm-openai:latest") == "fired"
