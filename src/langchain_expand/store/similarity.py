"""A unit's cosine similarity to the query: one formula for the columns in memory and every read.

A window's sentence may be scored in the columns (every row at once, in the snapshot; else a
block of rows) or from a read; a parent's child from a read. Each computes it here, in float32
row by row (``einsum``), so a unit's similarity depends on nothing read with it (BLAS rounds a
row by where it falls in its blocks: two copies of one section's text scored apart). A unit's
relevance as the store measures it (:func:`distances` in its space) is computed here too, so a
hit scores the same whichever path found it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from langchain_expand.store.adapters import Vector, relevance

__all__ = ["cosines", "distances", "measured", "norms_of", "query_norm", "relevances", "similarities"]


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
    found: list[float] = measured(np.asarray(vectors, dtype=np.float32), query)[1].tolist()
    return found


def relevances(
    vectors: Sequence[Vector] | np.ndarray,
    query: Sequence[float],
    space: str | None,
    store_relevance: Callable[[float], float],
) -> list[float]:
    """Each vector's relevance to ``query``: ``store_relevance`` of its distance in the store's ``space``.

    As an exact search reports it: the store's search sums distances its own way (Chroma in
    float32), the columns theirs (:func:`distances`); scored here from the vector, a unit's
    relevance is the same whichever path found it. ``space`` None (a store that does not say):
    its cosine similarity, clamped to [0, 1] (:func:`~langchain_expand.store.adapters.relevance`).
    """
    if len(vectors) == 0:
        return []
    q = np.asarray(query, dtype=np.float32)
    dots, cosine, squares = measured(np.asarray(vectors, dtype=np.float32), q)
    if space is None:
        return [relevance(c) for c in cosine.tolist()]
    return [store_relevance(d) for d in distances(dots, cosine, squares, q, space).tolist()]


def distances(dots: np.ndarray, cosine: np.ndarray, squares: np.ndarray, query: np.ndarray, space: str) -> np.ndarray:
    """Each row's distance to ``query`` in the store's ``space`` (``cosine``, ``ip`` or ``l2``, as Chroma names them).

    From the rows' dot products with the query, cosine similarities to it and sums of squares.
    """
    if space == "cosine":
        return 1.0 - cosine
    if space == "ip":
        return 1.0 - dots
    return squares - 2.0 * dots + float(query @ query)  # squared L2, as Chroma reports it


def measured(matrix: np.ndarray, query: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The float32 rows' dot products with ``query``, cosine similarities to it and sums of squares, row by row."""
    q = np.asarray(query, dtype=np.float32)
    squares = np.einsum("ij,ij->i", matrix, matrix)
    dots = np.einsum("ij,j->i", matrix, q)
    return dots, dots / (norms_of(squares) * query_norm(q)), squares
