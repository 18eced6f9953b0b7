"""Where the message index reads source files: vLLM wheels, and the dependencies its failures surface from
(installed packages, or their wheels in a folder).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

# Where vLLM failures surface from its dependencies: (package, folders of the package worth indexing).
DEPENDENCIES = {
    "triton": ("triton/compiler", "triton/runtime", "triton/backends/nvidia", "triton/language", "triton/_C"),
    "torch": ("torch/cuda", "torch/utils/cpp_extension.py", "torch/_inductor/runtime", "torch/distributed/distributed_c10d.py"),
    "flashinfer": ("flashinfer/*.py", "flashinfer/jit"),
    # what vLLM reads a model's config, tokenizer and files through: a checkpoint transformers does not know, gated or
    # unreachable Hub repositories, custom code that needs trust_remote_code, GGUF architectures
    "transformers": ("transformers/configuration_utils.py", "transformers/models/auto", "transformers/dynamic_module_utils.py",
                     "transformers/tokenization_utils_base.py", "transformers/utils/hub.py", "transformers/integrations/ggml.py",
                     "transformers/modeling_gguf_pytorch_utils.py",
                     # building a tokenizer or processor (a slow tokenizer converted, sentencepiece / protobuf missing),
                     # and the rope parameters a config validates
                     "transformers/tokenization_utils_fast.py", "transformers/tokenization_utils.py",
                     "transformers/convert_slow_tokenizer.py", "transformers/processing_utils.py",
                     "transformers/modeling_rope_utils.py", "transformers/utils/import_utils.py"),
    # the quantization config library vLLM pins for llm-compressor checkpoints (compressed-tensors==0.17.0 in 0.34.0)
    "compressed_tensors": ("compressed_tensors",),
    "huggingface_hub": ("huggingface_hub/errors.py", "huggingface_hub/utils/_http.py", "huggingface_hub/file_download.py",
                        "huggingface_hub/utils/_validators.py"),
}


def wheel_sources(wheel: Path, prefix: str = "vllm/"):
    """(path, bytes) of every .py file under `prefix` in the wheel, in name order."""
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            if name.startswith(prefix) and name.endswith(".py"):
                yield name, archive.read(name)


def installed_sources(package: str, folders: tuple[str, ...]):
    """(version, [(path, bytes)]) of the installed `package`'s .py files in `folders`; (None, []) when absent."""
    import importlib.util

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None, []
    root = Path(list(spec.submodule_search_locations)[0]).parent
    from importlib.metadata import version

    files = []
    for folder in folders:
        if folder.endswith("/*.py"):
            candidates = sorted((root / folder[:-5]).glob("*.py"))
        else:
            path = root / folder
            candidates = [path] if path.is_file() else sorted(path.rglob("*.py")) if path.is_dir() else []
        for file in candidates:
            files.append((file.relative_to(root).as_posix(), file.read_bytes()))
    return version(package), files


def _in_folder(name: str, folder: str) -> bool:
    if folder.endswith("/*.py"):
        return name.startswith(folder[:-4]) and "/" not in name[len(folder) - 4:]
    return name == folder or name.startswith(folder.rstrip("/") + "/")


def dependency_wheel(package: str, folders: tuple[str, ...], deps_dir: Path | None):
    """(version, files) from a `{package}*.whl` in deps_dir (for a dependency that is not installed)."""
    if deps_dir is None:
        return None, []
    for wheel in sorted(deps_dir.glob(f"{package}*.whl")):
        version = wheel.name.split("-")[1]
        with zipfile.ZipFile(wheel) as archive:
            names = sorted(n for n in archive.namelist() if n.endswith(".py") and any(_in_folder(n, f) for f in folders))
            return version, [(n, archive.read(n)) for n in names]
    return None, []
