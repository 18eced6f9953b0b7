"""The README's CI examples: valid YAML with the fields each system needs, and every kvdoctor line runs."""

import json
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "docs" / "ci-examples"
MODEL = REPO / "examples" / "qwen2.5-3b-instruct"
HUB_ID = "Qwen/Qwen2.5-3B-Instruct"


def _run_kvdoctor_lines(script: str, tmp_path: Path, env_extra: dict[str, str] | None = None) -> list[subprocess.CompletedProcess]:
    """Run each `kvdoctor ...` line of a CI script with the example model on disk and no compile."""
    script = script.replace("\\\n", " ")
    lines = [line.strip() for line in script.splitlines() if re.match(r"^\s*(exec )?kvdoctor ", line.strip().split("&& ")[-1])]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KVDOCTOR_"))}
    env.update(KVDOCTOR_CACHE_DIR=str(tmp_path / "cache"), HF_HUB_OFFLINE="1", CUDA_VISIBLE_DEVICES="", **(env_extra or {}))
    done = []
    for line in lines:
        line = line.split("&& ")[-1].removeprefix("exec ").replace(HUB_ID, str(MODEL))
        line = re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), m.group(0)), line)
        argv = shlex.split(line)
        argv = [sys.executable, "-m", "kvdoctor", argv[1], "--no-compile", *argv[2:]]
        done.append(subprocess.run(argv, cwd=tmp_path, env=env | {"PYTHONPATH": str(REPO)}, capture_output=True, text=True))
    assert done, "no kvdoctor command found"
    return done


def test_github_actions_job(tmp_path):
    workflow = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    job = workflow["jobs"]["preflight"]
    assert "pull_request" in workflow[True]  # YAML 1.1 reads the key `on` as true
    assert job["permissions"]["security-events"] == "write"
    assert job["container"]["image"] == "${{ vars.KVDOCTOR_IMAGE }}"  # the Dockerfile's image: kvdoctor is on no index
    assert not any("pip install" in s.get("run", "") for s in job["steps"])
    uses = [s.get("uses", "") for s in job["steps"]]
    assert any(u.startswith("github/codeql-action/upload-sarif") for u in uses)
    script = "\n".join(s["run"] for s in job["steps"] if "run" in s and "kvdoctor check" in s["run"])
    summary = tmp_path / "summary.md"
    gate, sarif, markdown = _run_kvdoctor_lines(script, tmp_path, {"GITHUB_STEP_SUMMARY": str(summary)})
    assert "--fail-on undecided" in script  # a GPU-less runner: an error rule left undecided fails the job
    assert gate.returncode == 0, gate.stderr  # fixed vLLM 0.27.0: k8v4 on A100 only warns (KVD104)
    assert "::warning title=KVD104" in gate.stdout
    log = json.loads((tmp_path / "kvdoctor.sarif").read_text())
    assert log["version"] == "2.1.0" and sarif.returncode == 0
    assert summary.read_text().startswith("### ⚠️ kvdoctor: **WARN**") and markdown.returncode == 0


def test_gitlab_job(tmp_path):
    pipeline = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    job = pipeline["kvdoctor"]
    assert job["stage"] == "test" and job["artifacts"]["when"] == "always"
    assert job["image"] == {"name": "$KVDOCTOR_IMAGE", "entrypoint": [""]}  # the Dockerfile's image, a shell job
    assert not any("pip install" in line for line in job["script"]) and "--fail-on undecided" in job["script"][0]
    report_path = job["artifacts"]["reports"]["junit"]
    (done,) = _run_kvdoctor_lines("\n".join(job["script"]), tmp_path)
    assert done.returncode == 0, done.stderr
    suite = ET.parse(tmp_path / report_path).getroot().find("testsuite")
    assert suite.get("failures") == "0"


def test_kubernetes_init_container_gates_vllm(tmp_path):
    manifest = yaml.safe_load((EXAMPLES / "k8s-initcontainer.yaml").read_text())
    assert (manifest["apiVersion"], manifest["kind"]) == ("apps/v1", "Deployment")
    spec = manifest["spec"]
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    pod = spec["template"]["spec"]
    (init,) = pod["initContainers"]
    (vllm,) = pod["containers"]
    assert init["image"].endswith(f"/kvdoctor:{_version()}") and init["command"] == ["kvdoctor"]  # the Dockerfile's
    # the gate judges the vLLM image's release on the same GPU
    assert init["args"][init["args"].index("--vllm-version") + 1] == vllm["image"].rsplit(":v", 1)[1]
    assert init["resources"]["limits"]["nvidia.com/gpu"] == vllm["resources"]["limits"]["nvidia.com/gpu"]
    assert "undecided" == init["args"][init["args"].index("--fail-on") + 1]
    script = shlex.join(["kvdoctor", *init["args"]])
    served = script.split("-- vllm serve ")[1].split()
    assert served[0] == vllm["args"][vllm["args"].index("--model") + 1]
    assert served[served.index("--kv-cache-dtype") + 1] == vllm["args"][vllm["args"].index("--kv-cache-dtype") + 1]
    (done,) = _run_kvdoctor_lines(script, tmp_path)
    assert done.returncode in (0, 1) and "turboquant_k8v4" in done.stdout, done.stderr  # judged, not a usage error


def _version() -> str:
    import tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


# A requirement pip would look up on the package index, where kvdoctor is not: `pip install kvdoctor`,
# "kvdoctor[compile]", kvdoctor==0.1.0 (a path such as ./kvdoctor[compile] or /dist/kvdoctor-*.whl is fine).
FROM_INDEX = re.compile(r"""pip3?\s+install(\s+-[-\w=.]+)*\s+["']?kvdoctor(\[[\w,]*\])?(==[\w.]+)?["']?(?=[\s;&|)]|$)""")


def test_no_install_line_asks_the_package_index_for_kvdoctor():
    places = [*sorted((REPO / "docs").rglob("*.md")), *sorted(EXAMPLES.iterdir()), REPO / "action.yml",
              REPO / ".pre-commit-hooks.yaml", REPO / "Dockerfile",
              *sorted((REPO / "kvdoctor").rglob("*.py")), *sorted((REPO / "kvdoctor" / "data").glob("*.yaml"))]  # fmt: skip
    assert FROM_INDEX.search("run: pip install \"kvdoctor[compile]\"") and FROM_INDEX.search("pip install kvdoctor &&")
    assert FROM_INDEX.search("pip install --no-cache-dir -q kvdoctor && exec kvdoctor verify")
    assert not FROM_INDEX.search("pip install --dry-run --report`), for configurations kvdoctor cannot read")
    assert not FROM_INDEX.search("pip install -e '.[compile]'") and not FROM_INDEX.search('pip install "./kvdoctor[compile]"')
    found = [f"{path.relative_to(REPO)}:{n}: {line.strip()}" for path in places if path.is_file()
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if FROM_INDEX.search(line)]  # fmt: skip
    assert not found, found


def test_dockerfile_builds_the_wheel_from_this_checkout_and_runs_kvdoctor():
    text = (REPO / "Dockerfile").read_text()
    assert "COPY kvdoctor/ kvdoctor/" in text and "pip wheel --no-deps" in text
    assert '"$(ls /dist/kvdoctor-*.whl)[compile]"' in text and 'ENTRYPOINT ["kvdoctor"]' in text
    assert f"kvdoctor:{_version()}" in text  # the tag the CI and Kubernetes examples use
    kept = (REPO / ".dockerignore").read_text().split()
    assert {"!pyproject.toml", "!README.md", "!kvdoctor/"} <= set(kept)  # everything the build copies


def test_built_wheel_installs_and_runs_a_check(tmp_path):
    """The Dockerfile's two steps without Docker: build the wheel from this checkout, install it (its own files
    only, no editable checkout on the path) and run a check from another directory."""
    dist, site = tmp_path / "dist", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    built = subprocess.run([*pip, "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    (wheel,) = dist.glob("kvdoctor-*.whl")
    installed = subprocess.run([*pip, "install", "-q", "--no-deps", "--target", str(site), str(wheel)],
                               capture_output=True, text=True)  # fmt: skip
    assert installed.returncode == 0, installed.stderr
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_", "KVDOCTOR_"))}
    env.update(PYTHONPATH=str(site), KVDOCTOR_CACHE_DIR=str(tmp_path / "cache"), HF_HUB_OFFLINE="1", CUDA_VISIBLE_DEVICES="")
    run = subprocess.run([sys.executable, "-c", "import kvdoctor, sys; print(kvdoctor.__file__); "
                          "from kvdoctor.cli import main; sys.argv = ['kvdoctor', *sys.argv[1:]]; main()",
                          "check", "--model", str(MODEL), "--gpu", "A100", "--vllm-version", "0.25",
                          "--kv-cache-dtype", "turboquant_k8v4", "--no-compile", "--format", "json"],
                         cwd=tmp_path, env=env, capture_output=True, text=True)  # fmt: skip
    where, _, document = run.stdout.partition("\n")
    assert where.startswith(str(site)), where  # the wheel's kvdoctor, not the checkout's
    assert run.returncode == 1, run.stderr  # the founding case: KVD101 from the wheel's own rules and pack
    report = json.loads(document)
    assert report["facts"]["vllm.version"] == "0.25.1"
    assert "KVD101" in {f["rule_id"] for f in report["findings"] if f["status"] == "fired"}
