"""Words given to an image whose ENTRYPOINT is vLLM's launcher (Kubernetes `args` without `command`, a Dockerfile's
CMD on vLLM's image, a Compose `command:`) are that launcher's arguments: when they start with the launcher again
(`vllm serve MODEL ...`), vLLM's parser gets `vllm serve vllm serve MODEL ...` and exits with "unrecognized
arguments". Real cases: labelled KVD004 errors in tests/fixtures/manifests/public (e.g. batch s93's Dockerfile)."""

from __future__ import annotations

from scan_support import by_name, scan

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.2
{words}
        resources:
          limits:
            nvidia.com/gpu: 1
"""


def _deployment(tmp_path, name: str, words: str):
    path = tmp_path / f"{name}.yaml"
    path.write_text(DEPLOYMENT.format(name=name, words=words))
    return str(path)


def test_args_that_repeat_the_images_launcher_are_refused_by_vllms_parser(tmp_path):
    repeated = _deployment(tmp_path, "repeated", '        args: ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", '
                                                 '"--max-model-len", "4096"]')
    flags = _deployment(tmp_path, "flags", '        args: ["--model", "Qwen/Qwen2.5-7B-Instruct", '
                                              '"--max-model-len", "4096"]')
    commanded = _deployment(tmp_path, "commanded", '        command: ["vllm", "serve"]\n'
                                                   '        args: ["Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096"]')
    results = by_name(scan([repeated, flags, commanded], tmp_path))
    refused = [p.finding for p in results["repeated"].placed if p.finding.rule_id == "KVD004"]
    assert refused and "unrecognized arguments: serve Qwen/Qwen2.5-7B-Instruct" in refused[0].title
    for name in ("flags", "commanded"):
        assert not any(p.finding.rule_id == "KVD004" for p in results[name].placed), name


def test_a_dockerfile_cmd_on_vllms_image_that_repeats_its_entrypoint_is_refused(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text('FROM vllm/vllm-openai:v0.11.2\nCMD ["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"]\n')
    (result,) = scan([str(dockerfile)], tmp_path).workloads
    assert any(p.finding.rule_id == "KVD004" for p in result.placed)
