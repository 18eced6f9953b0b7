"""Images whose entrypoint builds vLLM's command from env (kvdoctor/data/image_entrypoints.yaml), written from the
images' own entrypoints (substratusai/vllm-docker entrypoint.sh, runpod-workers/worker-vllm src/args_builder.py):
such a container is read as the command its entrypoint runs; an image named for vLLM whose entrypoint no row reads
is named in the notes, never silently skipped and never checked as vLLM's default."""

from __future__ import annotations

import re

from scan_support import by_name, scan

from kvdoctor.scan.image_entrypoints import entrypoint_for, entrypoints

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  template:
    spec:
      containers:
        - name: server
          image: {image}
          env:
{env}
          resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}
"""


def _deployment(tmp_path, image: str, env: dict[str, str], gpus: int = 1, name: str = "app"):
    lines = "\n".join(f"            - {{name: {k}, value: {v!r}}}" if v is not None else
                      f"            - {{name: {k}, valueFrom: {{secretKeyRef: {{name: s, key: k}}}}}}"
                      for k, v in env.items())  # fmt: skip
    path = tmp_path / f"{name}.yaml"
    path.write_text(DEPLOYMENT.format(name=name, image=image, env=lines, gpus=gpus))
    return path


def _argv(result) -> list[str]:
    return [t.text for t in result.workload.argv]


def test_substratus_entrypoint_builds_the_command_from_env(tmp_path):
    path = _deployment(tmp_path, "substratusai/vllm:v0.5.4", {
        "MODEL": "mistralai/Mistral-7B-Instruct-v0.3", "GPU_MEMORY_UTILIZATION": "0.9",
        "EXTRA_ARGS": "--max-num-seqs 64 --enforce-eager"}, gpus=2)
    result = by_name(scan([str(path)], tmp_path / "s"))["app"]
    argv = _argv(result)
    assert argv[:2] == ["--tensor-parallel-size", "2"]  # NUM_GPU: the GPUs the container sees
    assert argv[argv.index("--model") + 1] == "mistralai/Mistral-7B-Instruct-v0.3"
    assert argv[argv.index("--served-model-name") + 1] == "mistralai/Mistral-7B-Instruct-v0.3"  # defaults to MODEL
    assert argv[argv.index("--port") + 1] == "8080" and argv[-3:] == ["--max-num-seqs", "64", "--enforce-eager"]
    assert "--dtype" not in argv  # DTYPE is passed only with QUANTIZATION
    model_line = next(t.line for t in result.workload.argv if t.text.startswith("mistralai"))
    assert model_line == 11  # the env entry's line
    assert result.report.facts["vllm.version"] == "0.5.4"
    assert not {p.finding.rule_id for p in result.placed if p.finding.status == "fired"} & {"KVD201", "KVD202"}


def test_runpod_worker_env_rows(tmp_path):
    path = _deployment(tmp_path, "runpod/worker-v1-vllm:v2.25.0", {
        "MODEL_NAME": "Qwen/Qwen2.5-7B-Instruct", "TENSOR_PARALLEL_SIZE": "2", "ENFORCE_EAGER": "false",
        "DISABLE_LOG_STATS": "false", "SWAP_SPACE": "4", "MODEL": "ignored/by-the-worker", "MAX_NUM_BATCHED_TOKENS": "0",
        "HF_TOKEN": None, "VLLM_EXTRA_ARGS": "--max-num-seqs 32"}, gpus=1)
    result = by_name(scan([str(path)], tmp_path / "s"))["app"]
    argv = _argv(result)
    assert argv[argv.index("--model") + 1] == "Qwen/Qwen2.5-7B-Instruct" and "ignored/by-the-worker" not in argv
    assert "--no-enforce-eager" in argv and "--disable-log-stats" not in argv  # paired vs store-true
    assert "--swap-space" not in argv and "--max-num-batched-tokens" not in argv
    assert argv[-2:] == ["--max-num-seqs", "32"]
    notes = result.workload.notes + tuple(result.report.notes if hasattr(result.report, "notes") else ())
    assert any("drops --swap-space" in n for n in notes)
    assert any("--hf-token takes its value from ${HF_TOKEN}" in n for n in notes)  # a Secret: left out, named
    kvd201 = next(p for p in result.placed if p.finding.rule_id == "KVD201")
    assert kvd201.finding.status == "fired"  # TENSOR_PARALLEL_SIZE 2 on one GPU


def test_runpod_worker_before_v2_24_builds_engine_args_from_env_against_the_release_its_tag_installs(tmp_path):
    path = _deployment(tmp_path, "runpod/worker-v1-vllm:v2.20.0", {
        "MODEL_NAME": "Qwen/Qwen2.5-7B-Instruct", "TENSOR_PARALLEL_SIZE": "2", "SWAP_SPACE": "4",
        "ENABLE_PREFIX_CACHING": "false", "SSL_KEYFILE": "/k"}, gpus=2)
    result = by_name(scan([str(path)], tmp_path / "s"))["app"]
    argv = _argv(result)
    assert argv[argv.index("--model") + 1] == "Qwen/Qwen2.5-7B-Instruct"
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.95"  # the worker's own default (DEFAULT_ARGS)
    assert "--no-enable-prefix-caching" in argv
    assert "--swap-space" not in argv  # no engine argument of 0.16.0-0.23.0: the worker drops it
    assert "--ssl-keyfile" not in argv  # the frontend's, not an engine argument
    assert result.report.facts["vllm.version"] == "0.20.2"  # what v2.20.0's Dockerfile installs
    assert entrypoint_for("runpod/worker-v1-vllm:v2.13.1") is None  # before v2.14: its env list is not read


def test_a_release_with_another_entrypoint_and_an_unknown_vllm_image_are_named(tmp_path):
    old = _deployment(tmp_path, "runpod/worker-v1-vllm:v2.9.6", {"MODEL_NAME": "Qwen/Qwen2.5-7B-Instruct"}, name="old")
    other = _deployment(tmp_path, "ghcr.io/acme/vllm-server:1", {"MODEL_ID": "Qwen/Qwen2.5-7B-Instruct"}, name="acme")
    web = _deployment(tmp_path, "nginx:1.27", {"MODEL": "Qwen/Qwen2.5-7B-Instruct"}, name="web")
    report = scan([str(old), str(other), str(web)], tmp_path / "s")
    assert report.workloads == ()
    unseen = [n for n in report.notes if "cannot see" in n]
    assert len(unseen) == 2
    assert any("old.yaml:9" in n and "tag v2.9.6 ran an entrypoint other than" in n for n in unseen)
    assert any("acme.yaml:9" in n and "ghcr.io/acme/vllm-server:1" in n for n in unseen)


def test_compose_docker_run_and_cloud_run_of_an_env_built_image(tmp_path):
    (tmp_path / "compose.yaml").write_text("""services:
  worker:
    image: runpod/worker-v1-vllm:latest
    environment:
      MODEL_NAME: Qwen/Qwen2.5-7B-Instruct
      MAX_MODEL_LEN: "4096"
  old:
    image: substratusai/vllm:v0.2.7
    environment: [MODEL=x/y]
""")
    (tmp_path / "run.sh").write_text("#!/bin/sh\ndocker run --gpus 1 -e MODEL=Qwen/Qwen2.5-7B-Instruct "
                                     "substratusai/vllm:v0.6.2\n"
                                     "gcloud run deploy rp --image runpod/worker-v1-vllm:v2.24.0 "
                                     "--set-env-vars=MODEL_NAME=Qwen/Qwen2.5-7B-Instruct,KV_CACHE_DTYPE=fp8 --gpu 1\n")
    report = scan([str(tmp_path)], tmp_path / "s")
    found = {(r.workload.kind, r.workload.container): _argv(r) for r in report.workloads}
    assert found[("service", "worker")][-4:] == ["--max-model-len", "4096", "--model", "Qwen/Qwen2.5-7B-Instruct"]
    assert found[("docker run", "docker run")][:2] == ["--tensor-parallel-size", "1"]
    assert found[("Cloud Run service", "rp")][-4:] == ["--kv-cache-dtype", "fp8", "--model", "Qwen/Qwen2.5-7B-Instruct"]
    assert [n for n in report.notes if "cannot see" in n and "service old" in n]


def test_the_table_is_sourced_and_its_flags_are_vllms():
    from kvdoctor.vllm_pack.candidates import all_serve_options

    known = all_serve_options() | {"-q"}
    for entry in entrypoints():
        assert re.search(r"/blob/[0-9a-f]{40}/", entry.source), entry.name  # pinned to a commit
        for row in entry.rows:
            assert row.kind in {"value", "paired", "switch", "removed"} and re.fullmatch(r"[\w./]+:[0-9,-]+", row.at)
            assert row.kind == "removed" or row.flag in known, (entry.name, row.flag)
    assert entrypoint_for("docker.io/substratusai/vllm:v0.6.2") and not entrypoint_for("substratusai/vllm:v0.6.3")
    assert entrypoint_for("runpod/worker-v1-vllm") and not entrypoint_for("runpod/worker-v1-vllm:v2.13.1")
    assert entrypoint_for("runpod/worker-v1-vllm:v2.23.1").releases  # v2.14-v2.23: engine args from env


def test_args_the_entrypoint_never_reads_are_named(tmp_path):
    path = _deployment(tmp_path, "substratusai/vllm:v0.5.4", {"MODEL": "mistralai/Mistral-7B-Instruct-v0.3"})
    path.write_text(path.read_text().replace("          env:\n", "          args: [--max-model-len, '4096']\n          env:\n"))
    result = by_name(scan([str(path)], tmp_path / "s"))["app"]
    assert "--max-model-len" not in _argv(result)
    assert any("arguments (--max-model-len 4096) are not read by that entrypoint" in n for n in result.workload.notes)
