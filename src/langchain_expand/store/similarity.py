"""A unit's cosine similarity to the query: one formula for the columns in memory and every read.

A window's sentence may be scored in the columns (every row at once, in the snapshot; else a
block of rows) or from a read; a parent's child from a read. Each computes it here, in float32
row by row (``einsum``), so a unit's similarity depends on nothing read with it (BLAS rounds a
row by where it falls in its blocks: two copies of one section's text scored apart).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from langchain_expand.store.adapters import Vector

__all__ = ["cosines", "norms_of", "query_norm", "similarities"]


def norms_of(squares: np.ndarray) -> np.ndarray:
    """Row norms from their sums of squares (``einsum("ij,ij->i", m, m)``); a zero row's is 1."""
    norms: np.ndarray = np.sqrt(squares)
    norms[norms == 0] = 1.0
    return norms


def query_norm(query: np.ndarray) -> float:
    """The norm of the float32 ``query`` (1 for a zero vector)."""
    return float(np.linalg.norm(query)) or 1.0


def similarities(matrix: np.ndarray, norms: np.ndarray, query: np.ndarray, norm: float) -> np.ndarray:
    """Each float32 row's cosine similarity to ``query``, given the rows' ``norms`` and the query's ``norm``."""
    found: np.ndarray = np.einsum("ij,j->i", matrix, query) / (norms * norm)
    return found


def cosines(vectors: Sequence[Vector], query: Sequence[float] | np.ndarray) -> list[float]:
    """Each vector's cosine similarity to ``query``, as the columns compute it.

    Row by row, so that a sentence's similarity depends neither on which other sentences were
    read with it nor on which path scored it.
    """
    if len(vectors) == 0:
        return []
    matrix = np.asarray(vectors, dtype=np.float32)
    q = np.asarray(query, dtype=np.float32)
    norms = norms_of(np.einsum("ij,ij->i", matrix, matrix))
    found: list[float] = similarities(matrix, norms, q, query_norm(q)).tolist()
    return found
