"""`kvdoctor matrix`: which KV-cache dtype works on which GPU for one model and one vLLM."""

from __future__ import annotations

from kvdoctor.matrix.capacity import Capacity, capacity_from_facts
from kvdoctor.matrix.grid import ASSUMPTIONS, Cell, Matrix, MatrixRequest, run_matrix

__all__ = ["ASSUMPTIONS", "Capacity", "Cell", "Matrix", "MatrixRequest", "capacity_from_facts", "run_matrix"]
