"""A Markdown file named as a path: its shell and YAML code blocks are read (README instructions such as Cloud Run's
`gcloud run deploy`), on the file's own lines; a directory walk never reads Markdown (examples for a reader)."""

from __future__ import annotations

from scan_support import scan

README = '''# Deploy

```bash
export MODEL=google/gemma-3-4b-it
gcloud run deploy vllm-gemma \\
  --image=vllm/vllm-openai:v0.10.2 \\
  --args=--model,$MODEL,--tensor-parallel-size,2 \\
  --gpu=1 --gpu-type=nvidia-l4
```

```console
$ docker run --gpus 1 vllm/vllm-openai:v0.10.2 --model Qwen/Qwen2.5-7B-Instruct
```

```yaml
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: from-yaml}
spec:
  template:
    spec:
      containers:
      - image: vllm/vllm-openai:v0.10.2
        args: [--model, Qwen/Qwen2.5-7B-Instruct]
```

```yaml
  args: [--model, only-an-excerpt
```

```python
print("vllm serve x")
```
'''


def test_a_readme_named_as_a_path_is_read_block_by_block(tmp_path):
    (tmp_path / "README.md").write_text(README)
    report = scan([str(tmp_path / "README.md")], tmp_path / "s", gpu=None)
    found = {(r.workload.kind, r.workload.container): r for r in report.workloads}
    assert set(found) == {("Cloud Run service", "vllm-gemma"), ("docker run", "docker run"), ("Service", "(unnamed)")}
    gemma = found[("Cloud Run service", "vllm-gemma")]
    assert gemma.workload.line == 5 and "google/gemma-3-4b-it" in [t.text for t in gemma.workload.argv]
    assert next(p for p in gemma.placed if p.finding.rule_id == "KVD201").location.line == 8
    assert found[("docker run", "docker run")].workload.line == 12  # the `$ ` prompt removed
    assert report.unread == ()  # the YAML excerpt is not a manifest: skipped, not an error


def test_a_walk_does_not_read_markdown(tmp_path):
    (tmp_path / "README.md").write_text(README)
    assert scan([str(tmp_path)], tmp_path / "s").workloads == ()


def test_markdown_without_vllm_or_with_an_open_fence(tmp_path):
    (tmp_path / "notes.md").write_text("# Notes\n\n```bash\nkubectl get pods\n```\n\n```bash\ngcloud run deploy vllm \\\n")
    report = scan([str(tmp_path / "notes.md")], tmp_path / "s")
    assert report.workloads == () and report.unread == ()
