"""One validation of the inputs `check`, `matrix`, `scan` and the config file share: a bad value is one line, exit 2."""

from __future__ import annotations

from kvdoctor.data.dtypes import MODEL_DTYPES
from kvdoctor.base.errors import UsageError

FAIL_ON = ("error", "warning", "never")


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
        from packaging.version import InvalidVersion, Version

        try:
            Version(vllm_version)
        except InvalidVersion:
            raise UsageError(f"--vllm-version {vllm_version!r} is not a version", "e.g. 0.25.1") from None
    if gpu is not None:
        from kvdoctor.data.gpus import resolve_gpu_target

        resolve_gpu_target(gpu)  # an unknown name: its own one-line error with the closest names
    if fail_on is not None and fail_on not in FAIL_ON:
        raise UsageError(f"--fail-on {fail_on!r} is not one of {', '.join(FAIL_ON)}")
    if compile_timeout is not None and not compile_timeout > 0:
        raise UsageError("--compile-timeout must be more than 0 seconds")
