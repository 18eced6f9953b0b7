"""`kvdoctor matrix`: which KV-cache dtype works on which GPU for one model and one vLLM."""

from __future__ import annotations

from kvdoctor.matrix.capacity import ASSUMPTIONS, Capacity, ModelShape, capacity, kv_bytes_per_token
from kvdoctor.matrix.grid import Cell, Matrix, MatrixRequest, run_matrix

__all__ = ["ASSUMPTIONS", "Capacity", "Cell", "Matrix", "MatrixRequest", "ModelShape", "capacity",
           "kv_bytes_per_token", "run_matrix"]  # fmt: skip
