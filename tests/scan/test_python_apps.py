"""Python deployment apps (Modal): a vLLM launch as a list or a string, evaluated from the module's constants."""

from __future__ import annotations

from scan_support import scan

from kvdoctor.scan.run import find_workloads, read_manifests

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


RAY_LLM_APP = '''\
from ray.serve.llm import LLMConfig, build_openai_app

llm_config = LLMConfig(
    model_loading_config=dict(
        model_id="my-deepseek-r1",
        model_source="deepseek-ai/DeepSeek-R1",
    ),
    accelerator_type="H100",
    engine_kwargs=dict(
        max_model_len=16384,
        tensor_parallel_size=8,
        pipeline_parallel_size=2,
        enable_chunked_prefill=False,
        kv_cache_dtype=KV_DTYPE,
    ),
)
app = build_openai_app({"llm_configs": [llm_config]})
'''

RAY_DEPLOYMENT = '''\
from ray import serve
from vllm.engine.arg_utils import AsyncEngineArgs

num_replicas = 5
share = 0.95 / num_replicas


@serve.deployment(num_replicas=num_replicas, ray_actor_options={"num_gpus": share})
class VLLMDeployment:
    def __init__(self):
        self.model_name = "openai/gpt-oss-20b"
        args = AsyncEngineArgs(
            model=self.model_name,
            tensor_parallel_size=1,
            gpu_memory_utilization=share,
            max_model_len=16384,
            disable_log_stats=False,
        )
'''


def _write(tmp_path, text: str, name: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_ray_serve_llm_config_in_python_is_a_workload_of_its_engine_kwargs(tmp_path):
    # batch s34 (ray-project/ray serve_deepseek_r1.py, robbypambudi/ray-vllm-benchmark qwen.py): no "vllm" in the file
    (app,) = find_workloads([str(_write(tmp_path, RAY_LLM_APP, "serve_deepseek_r1.py"))])[1]
    assert (app.name, app.container) == ("serve_deepseek_r1.py", "llm_configs my-deepseek-r1")
    assert [t.text for t in app.argv] == ["deepseek-ai/DeepSeek-R1", "--max-model-len", "16384",
                                          "--tensor-parallel-size", "8", "--pipeline-parallel-size", "2",
                                          "--no-enable-chunked-prefill"]  # fmt: skip
    assert app.argv[0].line == 6 and app.argv[3].line == 11 and app.gpu_selectors[0].values == ("H100",)
    assert any("kv_cache_dtype takes its value from KV_DTYPE, unknown here" in n for n in app.notes)
    (result,) = scan([str(_write(tmp_path, RAY_LLM_APP, "serve_deepseek_r1.py"))], tmp_path, gpu=None).workloads
    facts = result.report.facts
    assert (facts["serve.tensor_parallel_size"], facts["serve.pipeline_parallel_size"]) == (8, 2)
    assert facts["gpu.name"] == "H100 80GB" and result.error is None


def test_engine_args_built_in_a_ray_deployment_class_are_read_from_its_constants(tmp_path):
    # batch s34 (BjornWest/instance_scripts run_with_ray.py)
    (app,) = find_workloads([str(_write(tmp_path, RAY_DEPLOYMENT, "run_with_ray.py"))])[1]
    assert app.container == "VLLMDeployment"
    assert [t.text for t in app.argv] == ["openai/gpt-oss-20b", "--tensor-parallel-size", "1",
                                          "--gpu-memory-utilization", "0.19", "--max-model-len", "16384"]  # fmt: skip
    # disable_log_stats=False: a store_true switch has no --no- form, so nothing is written (never a false KVD004)
    (result,) = scan([str(_write(tmp_path, RAY_DEPLOYMENT, "run_with_ray.py"))], tmp_path, gpu=None).workloads
    assert not [p for p in result.placed if p.finding.severity == "error" and p.finding.status == "fired"]


def test_a_python_file_without_a_vllm_workload_is_no_yaml_and_no_unread_file(tmp_path):
    files, found, notes, unread = read_manifests([str(_write(tmp_path, "import os\nprint(os.getcwd())\n", "tool.py"))])
    assert (found, unread) == ([], [])


def test_a_walk_reads_the_python_files_that_name_vllm_and_skips_the_others(tmp_path):
    (tmp_path / "apps").mkdir()
    _write(tmp_path / "apps", RAY_LLM_APP, "serve_deepseek_r1.py")
    _write(tmp_path / "apps", "def add(a, b):\n    return a + b\n", "util.py")
    files, found, notes, unread = read_manifests([str(tmp_path / "apps")])
    assert [w.container for w in found] == ["llm_configs my-deepseek-r1"] and unread == []
    assert not any(f.endswith("util.py") for f in files)


ENV_ARGS = '''\
import os
from vllm.engine.arg_utils import AsyncEngineArgs


class VLLMDeployment:
    def __init__(self, model_id):
        args = AsyncEngineArgs(
            model=model_id,
            gpu_memory_utilization=float(os.getenv("GPU_MEMORY_UTILIZATION", "0.8")),
            max_model_len=int(os.environ.get("MAX_MODEL_LEN", "4096")),
            max_num_seqs=int(os.getenv("MAX_NUM_SEQ")),
        )
'''


def test_environment_lookups_take_their_default_and_a_computed_model_stays_a_variable(tmp_path):
    # ai-on-eks vllm_serve.py shape: os.getenv("X", "default") wrapped in float()/int(); the model a parameter
    (app,) = find_workloads([str(_write(tmp_path, ENV_ARGS, "vllm_serve.py"))])[1]
    assert [t.text for t in app.argv] == ["${model_id}", "--gpu-memory-utilization", "0.8", "--max-model-len", "4096"]
    assert any("max_num_seqs takes its value from" in n for n in app.notes)  # no default: unknown, left out
    (result,) = scan([str(_write(tmp_path, ENV_ARGS, "vllm_serve.py"))], tmp_path, gpu=None).workloads
    assert result.error is None  # was "nothing to judge: no model given" (an ERROR, exit 2)


def test_a_walk_skips_a_test_suites_python(tmp_path):
    (tmp_path / "tests").mkdir()
    _write(tmp_path / "tests", RAY_LLM_APP, "fixtures_app.py")
    _write(tmp_path, RAY_LLM_APP, "test_serve.py")
    assert read_manifests([str(tmp_path)])[1] == []


RUNTIME_ENGINE = '''\
import os
from ray import serve
from vllm.engine.arg_utils import AsyncEngineArgs
from vllm.engine.async_llm_engine import AsyncLLMEngine


@serve.deployment(name="VLLMDeployment")
class VLLMDeployment:
    def __init__(self, **kwargs):
        args = AsyncEngineArgs(**kwargs)
        self.engine = AsyncLLMEngine.from_engine_args(args)


def parse(cli_args):
    return AsyncEngineArgs.from_cli_args(cli_args)


model = VLLMDeployment.bind(model=os.environ["MODEL_ID"], tensor_parallel_size=int(os.environ["TP"]))
'''


def test_an_engine_built_from_run_time_arguments_is_named_never_silent(tmp_path):
    # GoogleCloudPlatform/kubernetes-engine-samples ai-ml/gke-ray/rayserve/llm/serve.py and serve_chat_completion.py
    path = tmp_path / "serve.py"
    path.write_text(RUNTIME_ENGINE)
    _, found, notes, _ = read_manifests([str(path)])
    assert found == []
    assert [n.split(": ", 1)[0].rsplit(":", 1)[1] for n in notes[:2]] == ["10", "15"]
    assert "AsyncEngineArgs(**kwargs) builds vLLM's engine from arguments given at run time" in notes[0]
    assert "AsyncEngineArgs.from_cli_args(cli_args)" in notes[1]


def test_a_launch_written_over_lines_in_an_fstring_is_one_command_its_unknown_parts_unknown_words(tmp_path):
    # LLMPQ's config.py: the `\\` ending each line was read as three newline arguments (a false KVD004)
    text = (
        'def scripts(run_dummy):\n'
        '    return f"""\n'
        'vllm serve my/model \\\\\n'
        '    --tensor-parallel-size 4 \\\\\n'
        '{"--load-format dummy" if run_dummy else ""}\n'
        '    """.strip()\n'
    )
    (app,) = find_workloads([str(_app(tmp_path, text))])[1]
    assert [t.text for t in app.argv] == ["my/model", "--tensor-parallel-size", "4", "${VALUE}"]
    report = scan([str(_app(tmp_path, text))], tmp_path)
    assert not [p for r in report.workloads for p in r.placed if p.finding.severity == "error"]


def test_a_docker_run_string_given_to_a_shell_is_read_as_a_scripts_docker_run(tmp_path):
    # OpenReinforcedAgent's grpo_train.py: subprocess.run(cmd, shell=True) of an f-string `docker run ... vllm-openai`
    text = (
        'import subprocess\n'
        'def spawn(device, port=8000):\n'
        '    cmd = f"""docker run -d --name vllm-server-{device} --gpus all \\\n'
        '             vllm/vllm-openai:v0.9.2 \\\n'
        '             --model Qwen/Qwen2.5-7B-Instruct \\\n'
        '             --port {port} --max_model_len 2048"""\n'
        '    subprocess.run(cmd, shell=True, check=True)\n'
    )
    (run,) = find_workloads([str(_app(tmp_path, text))])[1]
    assert run.kind == "docker run" and run.image == "vllm/vllm-openai:v0.9.2"
    assert [t.text for t in run.argv] == ["--model", "Qwen/Qwen2.5-7B-Instruct", "--port", "${port}",
                                          "--max_model_len", "2048"]  # fmt: skip
    assert "Python string" in run.notes[0]


def test_a_launch_in_a_modal_class_method_is_the_classs_container(tmp_path):
    """`@app.cls` is Modal's container: a launch written in one of its methods is named by the class."""
    from kvdoctor.scan.run import find_workloads

    path = tmp_path / "server.py"
    path.write_text('import modal\napp = modal.App("vllm-service")\n\n@app.cls(gpu="L4")\nclass VLLMServer:\n'
                    '    @modal.enter()\n    def launch(self):\n        import subprocess\n'
                    '        subprocess.Popen(["vllm", "serve", "Qwen/Qwen2.5-7B-Instruct", "--max-model-len", "4096"])\n')
    (run,) = find_workloads([str(path)])[1]
    assert (run.name, run.container) == ("vllm-service", "VLLMServer")


def test_a_bentoml_service_is_named_by_its_decorator(tmp_path):
    from kvdoctor.scan.run import find_workloads

    path = tmp_path / "service.py"
    path.write_text('import bentoml\n\n@bentoml.service(name="vllm-llm", resources={"gpu": 1})\nclass VLLM:\n'
                    '    def __init__(self):\n        from vllm import AsyncEngineArgs\n'
                    '        self.args = AsyncEngineArgs(model="Qwen/Qwen2.5-7B-Instruct", max_model_len=4096)\n')
    (run,) = find_workloads([str(path)])[1]
    assert (run.name, run.container) == ("vllm-llm", "VLLM")
    path.write_text(path.read_text().replace('name="vllm-llm", ', ""))  # no name: BentoML takes the class's
    (run,) = find_workloads([str(path)])[1]
    assert (run.name, run.container) == ("VLLM", "VLLM")


def test_a_launch_string_given_to_a_shell_loses_the_shells_redirections(tmp_path):
    """`os.system("vllm serve M ... > vllm.log 2>&1 &")`: the redirection and `&` are the shell's, not vLLM's (a real
    script's were a false 'unrecognized arguments: > vllm.log 2>&1 &')."""
    from kvdoctor.scan.run import find_workloads

    path = tmp_path / "run.py"
    path.write_text('import os\nos.system("vllm serve Qwen2-7B-Instruct --port 8081 --tensor-parallel-size 2 '
                    '> vllm.log 2>&1 &")\n')
    (run,) = find_workloads([str(path)])[1]
    assert [t.text for t in run.argv] == ["Qwen2-7B-Instruct", "--port", "8081", "--tensor-parallel-size", "2"]


def test_a_command_list_joined_for_a_shell_is_split_as_the_shell_splits_it(tmp_path):
    """`cmd = ["vllm", "serve", M, "--host 0.0.0.0", ...]` run as `subprocess.Popen(" ".join(cmd), shell=True)`
    (a real Modal app of manifest batch s49): the shell splits "--host 0.0.0.0" into two words, so no KVD004."""
    from scan_support import scan

    path = tmp_path / "app.py"
    path.write_text('''import subprocess
MODEL = "Qwen/Qwen2.5-3B-Instruct"
def serve():
    cmd = [
        "vllm",
        "serve",
        MODEL,
        "--host 0.0.0.0",
        "--max-model-len 32768",
    ]
    subprocess.Popen(" ".join(cmd), shell=True)
''')
    (result,) = scan([str(path)], tmp_path).workloads
    assert [t.text for t in result.workload.argv] == ["Qwen/Qwen2.5-3B-Instruct", "--host", "0.0.0.0",
                                                      "--max-model-len", "32768"]
    assert result.workload.argv[-1].line == 9
    assert not any(p.finding.rule_id == "KVD004" for p in result.placed)


PINNED_ENGINE_ARGS = '''\
import modal

image = modal.Image.debian_slim().pip_install("vllm==0.6.2")
app = modal.App("vllm-qwen")


@app.function(image=image, gpu="A10G")
def serve():
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.engine.async_llm_engine import AsyncLLMEngine

    engine_args = AsyncEngineArgs(
        model="/qwen",
        gpu_memory_utilization=0.90,
        enforce_eager=False,
        enable_prefix_caching=True,
    )
    engine = AsyncLLMEngine.from_engine_args(engine_args)
'''


def test_a_false_keyword_is_the_default_of_a_switch_in_the_release_the_app_pins(tmp_path):
    """A real Modal app (manifest batch s57, rawsh/mirrorllm): AsyncEngineArgs(enforce_eager=False) with vllm==0.6.2
    pinned. Python passes no argv; --enforce-eager is a store_true switch in 0.5.5-0.6.3.post1 (no --no- form), so
    False is its default: no `--no-enforce-eager` for 0.6.2's parser to refuse (a false KVD004 before)."""
    (app,) = find_workloads([str(_write(tmp_path, PINNED_ENGINE_ARGS, "modal_vllm.py"))])[1]
    assert app.vllm_pin == "0.6.2" and "--no-enforce-eager" not in [t.text for t in app.argv]
    unpinned = PINNED_ENGINE_ARGS.replace('"vllm==0.6.2"', '"vllm"')
    (latest,) = find_workloads([str(_write(tmp_path, unpinned, "modal_latest.py"))])[1]
    assert "--no-enforce-eager" in [t.text for t in latest.argv]  # newer parsers take --no-enforce-eager


def test_a_constant_from_an_environment_lookup_takes_its_default(tmp_path):
    """A real Modal app (manifest batch s59, adityajain93/agentic-red-teaming): APP_NAME = os.getenv("MODAL_APP_NAME",
    "agentic-red-team-vllm"); app = modal.App(APP_NAME): the app is named by the default that runs."""
    text = MODAL_APP.replace('app = modal.App("qwen-server")', 'import os\nAPP_NAME = os.getenv("APP", "red-team")\n'
                                                                  "app = modal.App(APP_NAME)")
    (app,) = find_workloads([str(_app(tmp_path, text))])[1]
    assert app.name == "red-team"


MODAL_LLM_CLASS = '''\
import modal

MODEL_ID = "Qwen/Qwen2.5-Coder-32B-Instruct"
GPU = "A100-80GB:1"
app = modal.App("coder")
image = modal.Image.debian_slim().pip_install("vllm==0.25.1")


@app.cls(image=image, gpu=GPU)
class Inference:
    model_id: str = MODEL_ID

    @modal.enter()
    def load_model(self) -> None:
        from vllm import LLM

        self.llm = LLM(model=self.model_id, max_model_len=32768, gpu_memory_utilization=0.90, swap_space=4)
'''


def test_vllms_offline_llm_in_a_modal_class_is_read_with_its_class_attributes_and_gpu(tmp_path):
    # batch s61 (ashbert/Kaizen modal_vllm.py): vllm.LLM's keywords are EngineArgs fields, like AsyncEngineArgs'
    (app,) = find_workloads([str(_write(tmp_path, MODAL_LLM_CLASS, "modal_vllm.py"))])[1]
    assert (app.name, app.container, app.gpu_limit) == ("coder", "Inference", 1)
    assert [t.text for t in app.argv][:3] == ["Qwen/Qwen2.5-Coder-32B-Instruct", "--max-model-len", "32768"]
    (result,) = scan([str(_write(tmp_path, MODAL_LLM_CLASS, "modal_vllm.py"))], tmp_path, gpu=None).workloads
    assert result.report.facts["gpu.name"] == "A100 80GB"
    assert [p.location.line for p in result.placed if p.finding.rule_id == "KVD004"] == [17]  # swap_space: not in 0.25.1


def test_a_class_named_llm_that_is_not_vllms_is_not_read(tmp_path):
    text = MODAL_LLM_CLASS.replace("from vllm import LLM", "from mylib import LLM")
    assert find_workloads([str(_write(tmp_path, text, "modal_other.py"))])[1] == []



CDK_STACK = '''\
from aws_cdk import aws_ec2 as ec2

MODEL = "Qwen/Qwen2.5-7B-Instruct"


class Stack:
    def __init__(self):
        ec2.LaunchTemplate(
            self, "vllm",
            instance_type=ec2.InstanceType("g5.12xlarge"),
            user_data=ec2.UserData.custom(f"""#!/bin/bash
pip install vllm==0.9.2
cat << EOF > /etc/systemd/system/vllm.service
[Service]
ExecStart=vllm serve {MODEL} --tensor-parallel-size 8 --port 8000
EOF
systemctl start vllm
"""),
        )
        doc = """Usage:
vllm serve MODEL --tensor-parallel-size 2
"""
'''


def test_a_boot_script_in_a_python_string_with_the_instance_type_of_the_program(tmp_path):
    """An AWS CDK / Pulumi program hands an instance a `#!/bin/bash` boot script that writes a systemd unit: read as a
    script file's on the program's own lines, its GPU from the one instance type the program names (g5.12xlarge: 4 x
    A10G); a string that is no script (a docstring's usage lines) is not a launch."""
    path = tmp_path / "stack.py"
    path.write_text(CDK_STACK)
    (served,) = scan([str(path)], tmp_path, gpu=None).workloads
    assert served.workload.line == 15 and served.workload.container == "vllm serve"
    assert served.workload.argv[0].text == "Qwen/Qwen2.5-7B-Instruct"
    assert served.report.facts["gpu.name"] == "A10G" and served.report.facts["vllm.version"] == "0.9.2"
    assert not any("the version is the environment's" in note for note in served.report.notes)


OLD_STUB_APP = '''\
import os

import modal

MODELS_DIR = "/llamas"
MODEL_NAME = "neuralmagic/Meta-Llama-3.1-8B-Instruct-quantized.w4a16"
image = modal.Image.debian_slim().pip_install("vllm==0.6.3post1")
stub = modal.Stub("example-vllm-inference", image=image)
GPU_CONFIG = modal.gpu.A100(memory=80, count=2)


@stub.cls(gpu=GPU_CONFIG)
class Model:
    @modal.enter()
    def load_model(self):
        from vllm import LLM

        self.llm = LLM(os.path.join(MODELS_DIR, MODEL_NAME), tensor_parallel_size=GPU_CONFIG.count,
                       max_model_len=4096 * 2 - 1024)
'''


def test_a_gpu_object_held_in_a_constant_and_its_count_and_a_joined_model_path(tmp_path):
    """Modal's 2024 examples: `GPU_CONFIG = modal.gpu.A100(memory=80, count=2)` given as `gpu=GPU_CONFIG`, its
    `.count` as the tensor-parallel size, the model path joined from constants, a pin spelled '0.6.3post1'."""
    (app,) = find_workloads([str(_write(tmp_path, OLD_STUB_APP, "app.py"))])[1]
    assert [t.text for t in app.argv][:1] == ["/llamas/neuralmagic/Meta-Llama-3.1-8B-Instruct-quantized.w4a16"]
    assert "--tensor-parallel-size" in [t.text for t in app.argv]
    assert [t.text for t in app.argv][[t.text for t in app.argv].index("--tensor-parallel-size") + 1] == "2"
    assert "7168" in [t.text for t in app.argv]
    (result,) = scan([str(tmp_path / "app.py")], tmp_path, gpu=None).workloads
    facts = result.report.facts
    assert facts["gpu.name"] == "A100 80GB" and facts["vllm.version"] == "0.6.3.post1"  # the pack's spelling of the pin
