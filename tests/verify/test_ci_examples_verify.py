"""docs/ci-examples/verify-*: valid YAML with what each system needs, and their kvdoctor verify line, run against a
real server (the keyed CPU-build server) with the example's own flags, exits 0."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml
from .verify_support import REPO, kvdoctor

EXAMPLES = REPO / "docs" / "ci-examples"


def _argv(line: str, values: dict[str, str]) -> list[str]:
    line = re.sub(r"\$\{?(\w+)\}?", lambda m: values.get(m.group(1), m.group(0)), line.replace("\\\n", " "))
    return shlex.split(line)


def test_github_actions_checks_before_and_verifies_after(keyed_server, tmp_path):
    workflow = yaml.safe_load((EXAMPLES / "verify-github-actions.yml").read_text())
    steps = workflow["jobs"]["deploy"]["steps"]
    check = next(s for s in steps if "kvdoctor check" in s.get("run", ""))
    verify = next(s for s in steps if "kvdoctor verify" in s.get("run", ""))
    assert steps.index(check) < steps.index(verify) and "secrets.VLLM_API_KEY" in verify["env"]["VLLM_API_KEY"]
    check_argv = _argv(check["run"], {})
    served = check_argv[check_argv.index("serve") + 2:]
    # the flags the test server runs; its 1 GiB of KV memory comes from VLLM_CPU_KVCACHE_SPACE=1 on the CPU build
    assert served == [*(f for f in keyed_server.flags if f != "--enforce-eager"), "--kv-cache-memory-bytes", "1073741824"]
    check_argv[check_argv.index("Qwen/Qwen2.5-3B-Instruct")] = str(keyed_server.model)
    gate = kvdoctor("check", "--no-compile", *check_argv[2:], cwd=tmp_path)
    assert (tmp_path / "check.json").exists(), gate.stderr
    summary = tmp_path / "summary.md"
    values = {"VLLM_URL": keyed_server.url, "GITHUB_STEP_SUMMARY": str(summary)}
    done = kvdoctor(*_argv(verify["run"], values)[1:], cwd=tmp_path, env={"VLLM_API_KEY": keyed_server.api_key})
    assert done.returncode == 0, done.stdout + done.stderr
    assert summary.read_text().startswith("### ✅ kvdoctor verify: **PASS**")
    assert keyed_server.api_key not in done.stdout + summary.read_text()


def test_helm_test_hook_job(keyed_server, tmp_path):
    job = yaml.safe_load((EXAMPLES / "verify-helm-test.yaml").read_text())
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "test"
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
    (container,) = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    line = container["args"][0].split("&& exec ")[1]
    argv = _argv(line, {})
    assert argv[argv.index("--report") + 1].startswith(mounts["check"] + "/")
    assert argv[argv.index("--api-key-file") + 1].startswith(mounts["api-key"] + "/")
    # run it here: the Service URL becomes the test server, the mounts become files in tmp_path
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "api-key").write_text(keyed_server.api_key)
    (tmp_path / "check").mkdir()
    kvdoctor("check", "--model", str(keyed_server.model), "--vllm-version", "0.32.0", "--no-compile", *keyed_server.flags,
             "--format", "json", "-o", str(tmp_path / "check" / "check.json"), cwd=tmp_path)  # fmt: skip
    assert argv[:3] == ["kvdoctor", "verify", "http://vllm-qwen:8000"]
    argv[2] = keyed_server.url
    argv = [str(tmp_path) + a if a.startswith(("/check/", "/secrets/")) else a for a in argv]
    done = kvdoctor(*argv[1:], cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("PASS  kvdoctor verify")
