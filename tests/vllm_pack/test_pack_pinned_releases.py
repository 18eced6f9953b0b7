"""Releases real deployment files pin (tests/fixtures/manifests/public: 0.11.0 in 36 workloads, 0.10.0 in 17, 0.9.1 in
14, 0.19.0 in 12, 0.17.0 in 11, 0.8.3 in 9, 0.10.1.1 in 5) are read from their own wheels, so a file pinned to one is
judged against that release, not only where its two read neighbours agree."""

from __future__ import annotations

import pytest

from conftest import EXAMPLE_MODEL

from kvdoctor.vllm_pack import load_release, pack_releases

PINNED = ("0.8.3", "0.9.1", "0.10.0", "0.10.1.1", "0.11.0", "0.17.0", "0.19.0")


@pytest.mark.parametrize("version", PINNED)
def test_each_pinned_release_is_read_with_its_parser_and_dtype_facts(version):
    assert version in pack_releases()
    release = load_release(version)
    assert {"serve_args", "kv_cache_dtypes", "model_dtypes", "pins", "dtype_resolution", "backend_grid"} <= release.kinds
    assert "--max-model-len" in release.serve_args


def test_a_flag_the_pinned_release_refuses_is_judged_on_that_release(run_cli):
    """--max-seq-len-to-capture left vLLM's parser in 0.11.0 (0.10.2 has it): refused by 0.11.0 itself."""
    assert "--max-seq-len-to-capture" in load_release("0.10.2").serve_args
    assert "--max-seq-len-to-capture" not in load_release("0.11.0").serve_args
    result = run_cli("check", "--no-compile", "--gpu", "A100", "--vllm-version", "0.11.0", "--format", "json", "--",
                     "vllm", "serve", str(EXAMPLE_MODEL), "--max-seq-len-to-capture", "8192",
                     env={"CUDA_VISIBLE_DEVICES": ""})
    refused = {f["rule_id"]: f for f in result.json()["findings"]}["KVD004"]
    assert refused["status"] == "fired" and "vLLM 0.11.0 refuses" in refused["title"]
    assert "KVD012" not in {f["rule_id"] for f in result.json()["findings"]}  # a release read: no 'not read' finding


@pytest.mark.parametrize("version", ["0.10.0", "0.10.1.1"])
def test_the_bf16_check_of_a_release_whose_worker_module_the_builder_cannot_import_is_read_from_its_source(
        run_cli, version):
    """0.10.0-0.10.1's worker modules import a custom op whose default the builder's stubs break; their
    `_check_if_gpu_supports_dtype` is read alone from the source and still refuses bf16 on a T4."""
    release = load_release(version)
    assert release.has("dtype_resolution")
    result = run_cli("check", "--no-compile", "--gpu", "T4", "--vllm-version", version, "--dtype", "bfloat16",
                     "--model", str(EXAMPLE_MODEL), "--format", "json", env={"CUDA_VISIBLE_DEVICES": ""})
    fired = {f["rule_id"] for f in result.json()["findings"] if f["status"] == "fired"}
    assert result.code == 1 and "KVD121" in fired


def test_function_alone_reads_one_function_of_a_module_that_cannot_be_imported(tmp_path, monkeypatch):
    """The builder's fallback: the module's own def, compiled at its own lines, with torch and the platform."""
    import sys
    import types

    from kvdoctor.builders.vllm_pack.child_runtime import function_alone

    package = tmp_path / "fakevllm_worker"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "worker.py").write_text(
        "import not_a_module_anywhere  # the import the stubs break\n"
        "\n"
        "def _check_if_gpu_supports_dtype(torch_dtype):\n"
        "    if torch_dtype == torch.bfloat16 and not current_platform.has_device_capability(80):\n"
        "        raise ValueError('Bfloat16 is only supported on GPUs with compute capability of at least 8.0.')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(has_device_capability=lambda cap: cap <= 75)
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.platforms", platforms)
    torch = pytest.importorskip("torch")

    check = function_alone("fakevllm_worker.worker", "_check_if_gpu_supports_dtype")
    assert check.__code__.co_firstlineno == 3 and check.__code__.co_filename.endswith("worker.py")
    with pytest.raises(ValueError, match="Bfloat16 is only supported"):
        check(torch.bfloat16)
    check(torch.float16)
    assert function_alone("fakevllm_worker.worker", "no_such_function") is None
    assert function_alone("no_such_module_at_all", "f") is None
