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
