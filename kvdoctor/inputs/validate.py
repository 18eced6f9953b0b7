"""One validation of the inputs `check`, `matrix`, `scan` and the config file share: a bad value is one line, exit 2."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvdoctor.data.dtypes import MODEL_DTYPES
from kvdoctor.base.errors import UsageError

if TYPE_CHECKING:
    from kvdoctor.vllm_pack.candidates import NamedRelease

# 'undecided': an error, or an error rule that unknown facts leave undecided (a GPU-less CI job without --gpu)
FAIL_ON = ("error", "warning", "undecided", "never")


def validate_check_inputs(*, dtype: str | None = None, tensor_parallel_size: int | None = None,
                          vllm_version: str | None = None, vllm_source: str | None = None, gpu: str | None = None,
                          fail_on: str | None = None, compile_timeout: float | None = None) -> None:  # fmt: skip
    """Raise UsageError for the first bad value; None means 'not given' and passes."""
    if dtype is not None and dtype not in MODEL_DTYPES:
        raise UsageError(f"unknown --dtype {dtype!r}", f"use one of {', '.join(MODEL_DTYPES)}")
    if tensor_parallel_size is not None and tensor_parallel_size < 1:
        raise UsageError("--tensor-parallel-size must be at least 1")
    if vllm_source and vllm_version:
        raise UsageError("pass --vllm-source or --vllm-version, not both", "the source's own version is used")
    if vllm_version is not None:
        named_vllm_release(vllm_version)
    if gpu is not None:
        from kvdoctor.data.gpus import resolve_gpu_target

        resolve_gpu_target(gpu)  # an unknown name: its own one-line error with the closest names
    if fail_on is not None and fail_on not in FAIL_ON:
        raise UsageError(f"--fail-on {fail_on!r} is not one of {', '.join(FAIL_ON)}")
    if compile_timeout is not None and not compile_timeout > 0:
        raise UsageError("--compile-timeout must be more than 0 seconds")


def named_vllm_release(text: str) -> NamedRelease:
    """The release a --vllm-version names (a series X.Y is its newest patch kvdoctor read, said in .note); a string
    that is no version, or a bare major version that fits several series, is a UsageError naming the choices."""
    from kvdoctor.base.versions import parse_version
    from kvdoctor.vllm_pack.candidates import named_release

    if parse_version(text.strip()) is None:
        raise UsageError(f"--vllm-version {text!r} is not a version", "e.g. 0.25.1, or a series such as 0.25")
    named = named_release(text.strip())
    if named.choices:
        raise UsageError(f"--vllm-version {text!r} fits several release series",
                         f"name one: {', '.join(named.choices)} (or a release such as {named.choices[-1]}.0)")  # fmt: skip
    return named
