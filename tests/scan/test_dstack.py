"""dstack run configurations: the `commands` that launch vLLM, with env, DSTACK_GPUS_NUM and resources.gpu."""

from __future__ import annotations

from scan_support import scan

from kvdoctor.scan.dstack import _gpu_spec
from kvdoctor.scan.run import find_workloads

SERVICE = """\
type: service
name: llama31

python: "3.11"
env:
  - HF_TOKEN
  - MODEL_ID=meta-llama/Meta-Llama-3.1-8B-Instruct
  - MAX_MODEL_LEN=4096
commands:
  - pip install vllm
  - vllm serve $MODEL_ID
    --max-model-len $MAX_MODEL_LEN
    --tensor-parallel-size $DSTACK_GPUS_NUM
port: 8000
resources:
  gpu: H100:2
"""


def _config(tmp_path, text: str):
    path = tmp_path / ".dstack.yml"
    path.write_text(text)
    return path


def test_a_dstack_service_is_a_workload_of_its_commands_env_and_gpus(tmp_path):
    # batch s34 (dstackai/dstack examples/deployment/vllm/.dstack.yml): a plain scalar over three lines
    (run,) = find_workloads([str(_config(tmp_path, SERVICE))])[1]
    assert (run.kind, run.name, run.container) == ("dstack service", "llama31", "commands")
    assert [t.text for t in run.argv] == ["meta-llama/Meta-Llama-3.1-8B-Instruct", "--max-model-len", "4096",
                                          "--tensor-parallel-size", "2"]  # fmt: skip
    assert run.argv[3].line == 13 and run.gpu_limit == 2 and run.gpu_selectors[0].values == ("H100",)
    assert [(e.name, e.value) for e in run.env][:1] == [("HF_TOKEN", None)]  # from the host: unknown here
    (result,) = scan([str(_config(tmp_path, SERVICE))], tmp_path, gpu=None).workloads
    assert result.report.facts["gpu.name"] == "H100 80GB" and result.report.facts["serve.tensor_parallel_size"] == 2
    assert not [p for p in result.placed if p.finding.rule_id in ("KVD201", "KVD202")]


def test_too_few_gpus_for_the_parallel_sizes_is_found_at_resources_gpu(tmp_path):
    text = SERVICE.replace("$DSTACK_GPUS_NUM", "4")
    (result,) = scan([str(_config(tmp_path, text))], tmp_path, gpu=None).workloads
    (short,) = [p for p in result.placed if p.finding.rule_id == "KVD201"]
    assert short.location.line == 16


def test_dstack_gpu_specs():
    assert _gpu_spec(None) == ((), None)


def test_a_gpu_spec_names_the_gpu_and_its_count(tmp_path):
    import yaml

    def spec(text):
        return _gpu_spec(yaml.compose(text))

    assert spec("MI300X:8") == (("MI300X",), 8)
    assert spec("A100:80GB:2") == (("A100",), 2)
    assert spec("24GB") == ((), 1)  # any GPU with 24 GB: one of it
    assert spec("nvidia:L4,A10G:1") == (("L4", "A10G"), 1)
    assert spec("H100:1..2") == (("H100",), None)  # a range: dstack picks the count
    assert spec("{name: [H100, H200], count: 8}") == (("H100", "H200"), 8)
