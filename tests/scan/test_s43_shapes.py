"""Shapes batch s43 showed (spent after its one measure): Compose's `${VAR:+words}` and empty `${VAR:-}` in a
`sh -c` script, a template's `__PLACEHOLDER__` words, vLLM-Omni's own program and its `--omni` switch on a local
build, a script a Compose service mounts that builds its arguments in a variable (`ARGS="$ARGS ..."`). Files written
from Compose's interpolation rules (compose-spec: `${VAR:+replacement}`), the shell's word splitting and vLLM-Omni's
CLI (`vllm-omni serve MODEL`, `vllm serve MODEL --omni`)."""

from __future__ import annotations

from scan_support import by_name, scan


def _fired(result) -> set[str]:
    return {p.finding.rule_id for p in result.placed if p.finding.status == "fired"}


COMPOSE_SCRIPT = """\
services:
  vllm:
    image: vllm/vllm-openai:v0.23.0
    entrypoint: ["/bin/sh", "-c"]
    command:
      - |
        exec vllm serve ${VLLM_MODEL:-Qwen/Qwen3-8B} \\
          ${VLLM_TOKENIZER_MODE:+--tokenizer-mode ${VLLM_TOKENIZER_MODE}} \\
          --max-model-len ${VLLM_MAX_MODEL_LEN:-8192} \\
          ${VLLM_EXTRA_FLAG:-} \\
          --enable-prefix-caching
"""


def test_compose_alternates_and_empty_defaults_in_a_script_are_not_refused_arguments(tmp_path):
    path = tmp_path / "docker-compose.yml"
    path.write_text(COMPOSE_SCRIPT)
    (result,) = scan([str(path)], tmp_path).workloads
    assert result.error is None and "KVD004" not in _fired(result)
    texts = [t.text for t in result.workload.argv]
    assert "" not in texts and not any(":+" in t for t in texts), texts
    assert "--enable-prefix-caching" in texts and "8192" in texts


def test_a_bad_flag_beside_an_alternate_is_still_refused(tmp_path):
    path = tmp_path / "docker-compose.yml"
    path.write_text(COMPOSE_SCRIPT.replace("--enable-prefix-caching", "--enable-prefix-cachingg-typo"))
    (result,) = scan([str(path)], tmp_path).workloads
    assert "KVD004" in _fired(result)


def test_a_templates_placeholder_words_are_unknown_not_refused(tmp_path):
    path = tmp_path / "deploy.yaml"
    path.write_text("""\
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm}
spec:
  template:
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.25.1
        command: ["/bin/sh", "-c"]
        args: ["exec vllm serve \\"$MODEL_NAME\\" --max-model-len 2048 $EXTRA_ARGS"]
        env:
        - {name: MODEL_NAME, value: __MODEL__}
        - {name: EXTRA_ARGS, value: __EXTRA_ARGS__}
""")
    (result,) = scan([str(path)], tmp_path).workloads
    assert result.error is None and "KVD004" not in _fired(result)
    assert any("__EXTRA_ARGS__" in note and "not judged" in note for note in result.report.notes + result.workload.notes)


def test_vllm_omnis_program_and_switch_on_a_local_build(tmp_path):
    path = tmp_path / "docker-compose.yml"
    path.write_text("""\
services:
  omni:
    image: rocm_gfx1151_vllm-omni:v0.20.0rc1
    command: [vllm-omni, serve, Qwen/Qwen3-Omni-30B-A3B-Instruct, --port, "8000", --stage-init-timeout, "600"]
  tts:
    image: my_rocm_vllm:v0.20.1
    command: [vllm, serve, Qwen/Qwen3-TTS, --omni, --deploy-config, tts.yaml, --port, "8000"]
""")
    results = by_name(scan([str(path)], tmp_path))
    assert set(results) == {"omni", "tts"}
    for result in results.values():
        assert result.error is None and "KVD004" not in _fired(result), (result.workload.name, _fired(result))
    assert [t.text for t in results["omni"].workload.argv][0] == "Qwen/Qwen3-Omni-30B-A3B-Instruct"


def test_a_mounted_script_that_builds_its_arguments_in_a_variable(tmp_path):
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "run.sh").write_text("""\
#!/bin/sh
ARGS="--model /models/Qwen3-8B"
ARGS="$ARGS --max-model-len ${MAX_MODEL_LEN:-16384}"
if [ -n "${LORA_MODULES:-}" ]; then
  ARGS="$ARGS --enable-lora --lora-modules $LORA_MODULES"
  ARGS="$ARGS --max-loras ${MAX_LORAS:-1}"
fi
EXTRA="${EXTRA_VLLM_ARGS:-}"
exec python3 -m vllm.entrypoints.openai.api_server $ARGS $EXTRA
""")
    path = tmp_path / "docker-compose.yml"
    path.write_text("""\
services:
  vllm:
    image: vllm/vllm-openai:v0.25.1
    volumes:
      - "./scripts/run.sh:/run.sh:ro"
    entrypoint: ["/bin/sh", "/run.sh"]
""")
    (result,) = scan([str(path)], tmp_path).workloads
    assert result.error is None and "KVD004" not in _fired(result)
    texts = [t.text for t in result.workload.argv]
    assert "" not in texts and "--max-model-len" in texts, texts
