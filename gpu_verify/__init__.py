"""Checks kvdoctor's dry-run verdicts against real launches on an NVIDIA GPU (see docs/gpu-verification.md).

Not part of the kvdoctor package: it needs torch with CUDA and vLLM kernel files unpacked from released
wheels (never committed). `python3 -m gpu_verify.run_on_gpu --help` says how to run it.
"""
