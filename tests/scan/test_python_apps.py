"""Python deployment apps (Modal): a vLLM launch as a list or a string, evaluated from the module's constants."""

from __future__ import annotations

from scan_support import scan

from kvdoctor.scan.run import find_workloads

MODAL_APP = '''\
import subprocess

import modal

MODEL_NAME = "Qwen/Qwen2.5-7B-Instruct"
GPU_TYPE = "H100"
N_GPU = 2
MAX_LEN = 32 * 1024

image = modal.Image.debian_slim().uv_pip_install("vllm==0.25.1", "huggingface_hub")
app = modal.App("qwen-server")


@app.function(image=image, gpu=f"{GPU_TYPE}:{N_GPU}")
@modal.web_server(port=8000)
def serve(revision=None):
    cmd = [
        "vllm",
        "serve",
        MODEL_NAME,
        "--tensor-parallel-size",
        str(N_GPU * 2),
        "--max-model-len",
        str(MAX_LEN),
        "--revision",
        revision,
    ]
    subprocess.Popen(" ".join(cmd), shell=True)
'''


def _app(tmp_path, text: str = MODAL_APP):
    path = tmp_path / "serve.py"
    path.write_text(text)
    return path


def test_a_launch_list_is_evaluated_from_the_modules_constants(tmp_path):
    (app,) = find_workloads([str(_app(tmp_path))])[1]
    assert (app.kind, app.name, app.container, app.vllm_pin) == ("Python app", "qwen-server", "serve", "0.25.1")
    assert [t.text for t in app.argv] == ["Qwen/Qwen2.5-7B-Instruct", "--tensor-parallel-size", "4",
                                          "--max-model-len", "32768", "--revision", "${revision}"]  # fmt: skip
    assert app.argv[0].line == MODAL_APP.splitlines().index("        MODEL_NAME,") + 1


def test_the_gpu_keyword_names_the_gpu_and_its_count_and_the_pin_the_release(tmp_path):
    (app,) = scan([str(_app(tmp_path))], tmp_path, gpu=None).workloads
    assert app.report.facts["gpu.name"] == "H100 80GB" and app.report.facts["deploy.gpu_limit"] == 2
    assert app.report.facts["vllm.version"] == "0.25.1"
    assert any(p.finding.rule_id == "KVD201" and p.finding.status == "fired" for p in app.placed)  # 2 GPUs < TP 4
    assert app.error is None  # --revision ${revision}: an unknown value, left out and named, not an error


def test_a_launch_string_and_a_file_without_one(tmp_path):
    text = 'import os\nos.system("vllm serve facebook/opt-125m --max-model-len 2048")\n'
    (app,) = find_workloads([str(_app(tmp_path, text))])[1]
    assert [t.text for t in app.argv] == ["facebook/opt-125m", "--max-model-len", "2048"]
    assert find_workloads([str(_app(tmp_path, 'print("vllm")\ncmd = ["python", "train.py"]\n'))])[1] == []
