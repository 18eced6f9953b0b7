"""Base utilities every stage uses: user errors, kvdoctor's cache folder, safe YAML, vLLM version ordering. No stage
imports above it."""
