"""An image a script or workflow builds from a Dockerfile of the tree and then deploys: the container runs the
Dockerfile's command with the deploy's env over its ENV (docker run -e, gcloud --set-env-vars) and the deploy's args
in place of its CMD (docs.docker.com "docker build" -t/-f and "docker run" [COMMAND] [ARG...]; cloud.google.com
"gcloud run deploy" --image/--args/--set-env-vars, "gcloud builds submit" --tag SOURCE)."""

from __future__ import annotations

from kvdoctor.scan.built_images import image_builds
from kvdoctor.scan.run import find_workloads
from kvdoctor.scan.workload import Token
from scan_support import write_tree

DOCKERFILE = """\
FROM vllm/vllm-openai:v0.25.1
ENV MODEL_NAME="/mnt/models/qwen" MAX_MODEL_LEN=4096
ENTRYPOINT []
CMD ["sh", "-c", "python3 -m vllm.entrypoints.openai.api_server --model $MODEL_NAME --max-model-len $MAX_MODEL_LEN $EXTRA_ARGS"]
"""

WORKFLOW = """\
name: Deploy vLLM
on: push
env:
  IMAGE: europe-docker.pkg.dev/p/r/vllm
jobs:
  deploy:
    runs-on: ubuntu-latest
    steps:
      - name: Build
        run: |
          docker build \\
            -t $IMAGE:${{ github.sha }} \\
            -f deploy/Dockerfile.vllm .
      - name: Deploy
        run: |
          gcloud run deploy vllm-routing \\
            --image $IMAGE:${{ github.sha }} \\
            --gpu 1 --gpu-type nvidia-l4 \\
            --set-env-vars "MAX_MODEL_LEN=16384" \\
            --set-env-vars "EXTRA_ARGS=--enable-prefix-caching --max-num-seqs 4"
"""


def test_a_workflow_that_builds_then_deploys_to_cloud_run_runs_the_dockerfiles_command_with_the_deploys_env(tmp_path):
    tree = write_tree(tmp_path, {".github/workflows/deploy.yml": WORKFLOW, "deploy/Dockerfile.vllm": DOCKERFILE})
    (service,) = find_workloads([str(tree / ".github/workflows/deploy.yml")])[1]
    assert (service.kind, service.name, service.container) == ("Cloud Run service", "Deploy vLLM / deploy", "vllm-routing")
    assert [t.text for t in service.argv] == ["--model", "/mnt/models/qwen", "--max-model-len", "16384",
                                              "--enable-prefix-caching", "--max-num-seqs", "4"]  # fmt: skip
    dockerfile = str(tree / "deploy" / "Dockerfile.vllm")
    assert service.image == "vllm/vllm-openai:v0.25.1" and service.where(service.image_line) == (dockerfile, 1)
    assert service.where(service.argv[0].line) == (dockerfile, 4) and service.gpu_limit == 1
    assert any("is built here from" in n for n in service.notes)


def test_a_script_that_builds_then_runs_the_image_with_args_in_place_of_its_cmd(tmp_path):
    script = ("IMAGE=local/vllm-app\n"
              "cd \"$(dirname \"$0\")\"\n"
              "docker build -t $IMAGE .\n"
              "docker run -d --gpus 2 --name app -e MAX_MODEL_LEN=2048 $IMAGE\n"
              "docker run -d --gpus 2 --name app-args $IMAGE python3 -m vllm.entrypoints.openai.api_server "
              "--model org/m -tp 2\n")  # fmt: skip
    tree = write_tree(tmp_path, {"app/run.sh": script, "app/Dockerfile": DOCKERFILE})
    by_container = {w.container: w for w in find_workloads([str(tree / "app" / "run.sh")])[1]}
    app = by_container["app"]
    # $EXTRA_ARGS, set by no deploy here, stays a variable (unknown here, not judged)
    assert [t.text for t in app.argv] == ["--model", "/mnt/models/qwen", "--max-model-len", "2048", "$EXTRA_ARGS"]
    assert app.gpu_limit == 2 and {e.name for e in app.env} == {"MAX_MODEL_LEN", "MODEL_NAME"}
    assert [t.text for t in by_container["app-args"].argv] == ["--model", "org/m", "-tp", "2"]


def test_builds_are_read_from_docker_podman_buildah_and_gcloud_builds_submit():
    def words(line: str) -> list[Token]:
        return [Token(w, 1) for w in line.split()]

    builds = image_builds([words("docker buildx build --platform linux/amd64 -t a:1 --tag a:2 -f ops/Dockerfile.gpu ."),
                           words("podman build --file=Containerfile -t b src"),
                           words("buildah bud -t c ctx"),
                           words("gcloud beta builds submit --tag d svc"),
                           words("docker build -t e https://github.com/o/r.git"),
                           words("docker push a:1")])  # fmt: skip
    assert [(b.tags, b.dockerfile) for b in builds] == [(("a:1", "a:2"), "ops/Dockerfile.gpu"),
                                                        (("b",), "Containerfile"), (("c",), "ctx/Dockerfile"),
                                                        (("d",), "svc/Dockerfile")]  # fmt: skip


def test_an_image_built_here_that_runs_no_vllm_or_a_dockerfile_not_in_the_tree_is_no_workload(tmp_path):
    web = "FROM python:3.12\nCMD [\"python\", \"-m\", \"http.server\"]\n"
    script = "docker build -t web:dev .\ndocker run -d --name web web:dev\n"
    tree = write_tree(tmp_path, {"a/run.sh": script, "a/Dockerfile": web, "b/run.sh": script.replace("web", "vllm")})
    assert find_workloads([str(tree / "a" / "run.sh")])[1] == []
    files, found, notes = find_workloads([str(tree / "b" / "run.sh")])
    assert found == [] and any("cannot see" in n for n in notes)  # still named, never silently skipped


def test_a_bad_flag_the_deploy_adds_is_one_line_at_its_line_exit_2(run_cli, tmp_path):
    tree = write_tree(tmp_path, {".github/workflows/deploy.yml": WORKFLOW.replace("--max-num-seqs 4", "--dtype bf16"),
                            "deploy/Dockerfile.vllm": DOCKERFILE})  # fmt: skip
    result = run_cli("scan", str(tree / ".github/workflows/deploy.yml"), "--no-compile")
    assert result.code == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    # the words of $EXTRA_ARGS stand where the Dockerfile's command expands it
    assert line.startswith(f"kvdoctor: error: {tree / 'deploy' / 'Dockerfile.vllm'}:4:") and "--dtype" in line


def test_in_a_walk_the_dockerfile_of_a_deployed_image_is_read_through_the_deploy_not_alone(tmp_path):
    tree = write_tree(tmp_path, {".github/workflows/deploy.yml": WORKFLOW, "deploy/Dockerfile.vllm": DOCKERFILE,
                            "serve/Dockerfile": DOCKERFILE})  # fmt: skip
    files, found, notes = find_workloads([str(tree)])
    assert sorted((w.kind, w.container) for w in found) == [("Cloud Run service", "vllm-routing"),
                                                            ("Dockerfile", "ENTRYPOINT")]  # fmt: skip
    assert next(w for w in found if w.kind == "Dockerfile").file.endswith("serve/Dockerfile")  # deployed by nothing
    assert any("Dockerfile.vllm: read through" in n for n in notes)
