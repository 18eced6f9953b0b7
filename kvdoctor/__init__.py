"""kvdoctor: preflight diagnostics for vLLM KV-cache deployments."""

__version__ = "0.1.0"
