"""Images whose vLLM is of any age (scan/image.py names_no_vllm_release, chosen_by_the_host): another project's image
that bundles vLLM (llm-d's, batch s60) and an image the host chooses (`${IMAGE}`, a fork's build, batch s62). A flag
only older releases accept, or a forced backend no release knows and no name is close to (a fork's), is undecided,
never a false error; a misspelt backend stays an error."""

from __future__ import annotations

from scan_support import scan, write_tree

from kvdoctor.scan.image import names_no_vllm_release

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: decode}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: IMAGE
        command: ["vllm", "serve", "meta-llama/Llama-3.2-3B-Instruct"]
        args: ["--prefix-caching-hash-algo", "builtin"]
"""
COMPOSE = """\
services:
  vllm:
    image: ${IMAGE}
    command: ["--model", "Qwen/Qwen3-8B", "--attention-backend=BACKEND"]
"""


def test_which_images_name_no_vllm_release():
    assert names_no_vllm_release("ghcr.io/llm-d/llm-d:v0.2.0")
    assert not names_no_vllm_release("vllm/vllm-openai:latest")
    assert not names_no_vllm_release("registry.local/vllm-openai-ubi9:latest")  # named for vLLM: its build
    assert not names_no_vllm_release("${IMAGE}")  # the host's choice: chosen_by_the_host
    assert not names_no_vllm_release(None)


def _fired(tmp_path, files, rule):
    root = write_tree(tmp_path / "repo", files)
    (result,) = scan([str(root)], tmp_path, gpu="H100").workloads
    return [(p.finding.status, p.finding.severity) for p in result.placed if p.finding.rule_id == rule]


def test_a_flag_older_releases_accept_is_undecided_on_another_projects_image(tmp_path):
    llm_d = {"decode.yaml": DEPLOYMENT.replace("IMAGE", "ghcr.io/llm-d/llm-d:v0.2.0")}
    assert _fired(tmp_path / "a", llm_d, "KVD004") == [("undecided", "error")]
    latest = {"decode.yaml": DEPLOYMENT.replace("IMAGE", "vllm/vllm-openai:latest")}  # today's releases refuse it
    assert _fired(tmp_path / "b", latest, "KVD004") == [("fired", "error")]


def test_a_backend_no_release_knows_is_undecided_on_an_image_of_any_age_but_a_misspelling_is_not(tmp_path):
    fork = {"compose.yaml": COMPOSE.replace("BACKEND", "R4D")}
    assert ("fired", "error") not in _fired(tmp_path / "a", fork, "KVD010")
    typo = {"compose.yaml": COMPOSE.replace("BACKEND", "FLASH_ATN")}
    assert _fired(tmp_path / "b", typo, "KVD010") == [("fired", "error")]


def test_an_option_no_release_has_is_undecided_on_another_projects_build_but_refused_on_vllms_image(tmp_path):
    # batch s64 (asheet/wof-toss-up): bosonai/higgs-audio-vllm, a fork adding --audio-tokenizer-type
    fork = {"d.yaml": DEPLOYMENT.replace("IMAGE", "bosonai/higgs-audio-vllm:latest").replace(
        '["--prefix-caching-hash-algo", "builtin"]', '["--audio_tokenizer_type=bosonai/higgs-audio-v2-tokenizer"]')}
    root = write_tree(tmp_path / "a", fork)
    (result,) = scan([str(root)], tmp_path, gpu="H100").workloads
    (kvd004,) = [p.finding for p in result.placed if p.finding.rule_id == "KVD004"]
    assert kvd004.status == "undecided" and "may carry its own build of vLLM" in " ".join(kvd004.decided_by)
    own = {"d.yaml": fork["d.yaml"].replace("bosonai/higgs-audio-vllm:latest", "vllm/vllm-openai:v0.25.1")}
    assert _fired(tmp_path / "b", own, "KVD004") == [("fired", "error")]


def test_device_cpu_on_latest_stops_in_every_release_so_it_is_an_error(tmp_path):
    # batches s36-s64: `--device cpu` on :latest. 0.20.0-0.23.0 refuse it, 0.31.0-0.34.0 find it ambiguous (KVD004
    # undecided: 0.24.0-0.30.0 accept it), and those read it as --device-ids cpu and stop (KVD013): every release stops
    latest = {"d.yaml": DEPLOYMENT.replace("IMAGE", "vllm/vllm-openai:latest").replace(
        '["--prefix-caching-hash-algo", "builtin"]', '["--device", "cpu"]')}
    assert _fired(tmp_path / "a", latest, "KVD014") == [("fired", "error")]
    pinned = {"d.yaml": latest["d.yaml"].replace(":latest", ":v0.25.1")}
    assert ("fired", "error") not in _fired(tmp_path / "b", pinned, "KVD014")  # one release: KVD013's own case
    assert _fired(tmp_path / "c", pinned, "KVD013") == [("fired", "error")]


def test_intel_gaudis_vllm_fork_image_is_a_fork_whose_device_option_is_undecided(tmp_path):
    # batch s42 (DorWeinstock/jira-triage-agent): vault.habana.ai/.../habanalabs/vllm-fork:latest --device hpu
    gaudi = {"d.yaml": DEPLOYMENT.replace("IMAGE", "vault.habana.ai/gaudi-docker/1.19.0/ubuntu22.04/habanalabs/vllm-fork:latest")
             .replace('["--prefix-caching-hash-algo", "builtin"]', '["--device", "hpu"]')}
    statuses = _fired(tmp_path, gaudi, "KVD004") + _fired(tmp_path / "x", gaudi, "KVD014")
    assert ("fired", "error") not in statuses
