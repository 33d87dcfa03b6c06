"""The query's rankings: the dense one (from the store, or exactly from a snapshot), BM25 beside it, fused.

Each is a :data:`Search`: asked for ``k``, the best matches as records with their relevance,
best first. :class:`HybridSearch` fuses the dense ranking with BM25's (reciprocal rank
fusion); BM25 in memory may have started beside the query's embedding (:class:`SearchedAhead`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
from langchain_core.documents import Document

from langchain_expand.store.adapters import relevance
from langchain_expand.store.adapters.base import Matches, matched
from langchain_expand.store.lexical import BaseLexicalIndex, LexicalHit, Within
from langchain_expand.store.records import unit_id, unit_owner
from langchain_expand.store.search import VectorSearch, fuse
from langchain_expand.units import STORED_DOC, STORED_INDEX
from langchain_expand.windows.bm25 import Bm25
from langchain_expand.windows.growth import Position
from langchain_expand.windows.reads import Reads
from langchain_expand.windows.similarity import cosines

__all__ = ["DenseSearch", "HybridSearch", "Search", "SearchedAhead", "SnapshotSearch", "scored_at"]

Search = Callable[[int], list[tuple[Document, float]]]
"""Asked for ``k``, gives the best matches with their relevance, best first."""


class DenseSearch:
    """The dense ranking, its records read through the query's :class:`Reads`.

    With ``ids_first``, where the store returns ids alone (Chroma), the hits' heads are read
    fresh (their revisions: guided growth reads them anyway) and the hits themselves come from
    the cache where it holds them at that revision. Otherwise the store returns the records,
    which teach ``reads`` their revisions (fixed windows then read every neighbour in one call).
    """

    def __init__(self, dense: VectorSearch, reads: Reads, *, ids_first: bool) -> None:
        self.dense = dense
        self.reads = reads
        self.ids_first = ids_first

    def __call__(self, k: int, more_heads: Callable[[], Iterable[str]] = tuple) -> list[tuple[Document, float]]:
        """The best ``k``; ``more_heads`` names documents whose heads are read with the hits' (one store call)."""
        found = self.dense.ids(k) if self.ids_first else None
        if found is None:
            scored = self.dense(k)
            self.reads.saw(doc for doc, _ in scored)
            return scored
        self.reads.heads([*(unit_owner(i) for i, _ in found), *more_heads()])
        records = {d.id: d for d in self.reads.records([i for i, _ in found])}
        return Matches([(records[i], score) for i, score in found if i in records], matched=len(found))


class SnapshotSearch:
    """The dense ranking, searched exactly in the query's snapshot (``reads``'); heads and records read from it too."""

    def __init__(self, dense: VectorSearch, reads: Reads) -> None:
        self.dense = dense
        self.reads = reads

    def __call__(self, k: int, more_heads: Callable[[], Iterable[str]] = tuple) -> list[tuple[Document, float]]:
        """The best ``k``; ``more_heads`` names documents whose heads are read with the hits'."""
        vector = self.dense.vector()
        assert vector is not None  # a snapshot is only built of a store that keeps vectors
        scores = self.reads.scores(vector)
        assert scores is not None
        found = [(unit_id(*position), score) for position, score in scores.nearest(k)]
        self.reads.heads([*(unit_owner(i) for i, _ in found), *more_heads()])
        records = {d.id: d for d in self.reads.records([i for i, _ in found])}
        return Matches([(records[i], score) for i, score in found if i in records], matched=len(found))


Ranking = DenseSearch | SnapshotSearch


class SearchedAhead:
    """A snapshot's BM25, its first search (for ``query`` and ``k``) maybe started beforehand; a filter's rows alone."""

    def __init__(
        self,
        bm25: Bm25,
        query: str,
        k: int,
        started: Future[list[LexicalHit]] | None,
        within: np.ndarray | None = None,
    ) -> None:
        """``started`` searched the whole index: it is not given with ``within`` (a filter's rows)."""
        self.bm25 = bm25
        self.query = query
        self.k = k
        self.started = started if within is None else None
        self.within = within
        self._last: tuple[tuple[str, int], list[LexicalHit]] | None = None

    def search(self, query: str, k: int) -> list[LexicalHit]:
        """The ``k`` best by BM25: the search started beforehand where it was for these (each asked once)."""
        if self.started is not None and (query, k) == (self.query, self.k):
            return self.started.result()
        if self._last is None or self._last[0] != (query, k):
            self._last = ((query, k), self.bm25.search(query, k, self.within))
        return self._last[1]


@dataclass(frozen=True)
class HybridSearch:
    """Dense hits fused with the lexical ranking's (reciprocal rank fusion), best first.

    Each call asks both rankings for ``k`` and returns the fused list of up to ``2k``
    records. A sentence only the lexical ranking found is scored like a dense hit: the cosine
    similarity of its vector to the query's (:func:`scored_at`), else the lowest dense score
    of the list.
    """

    ranking: Ranking
    dense: VectorSearch
    lexical: BaseLexicalIndex | SearchedAhead | Within
    reads: Reads
    beside: Callable[..., Future[Any]]
    """Runs the lexical index's search beside the dense one."""

    def __call__(self, k: int) -> list[tuple[Document, float]]:
        """Both rankings' best ``k``, fused: up to ``2k`` records, best first."""
        if isinstance(self.lexical, SearchedAhead):
            # In memory, started beside the embedding: often done already. Where it is not (a
            # near-free embedding, a million sentences: 4 ms), the dense search runs meanwhile,
            # and its hits are awaited only for the heads read with the dense hits'.
            ahead = self.lexical
            scored = self.ranking(k, lambda: (hit.doc_id for hit in ahead.search(self.dense.query, k)))
            found = ahead.search(self.dense.query, k)
        else:
            # SQLite's BM25 runs beside the dense search (both release the GIL), after the
            # embedding, which keeps every core busy on its own (measured: 3 of 7 ms saved).
            self.dense.vector()
            lexical = self.beside(self.lexical.search, self.dense.query, k)
            scored = self.ranking(k, lambda: (hit.doc_id for hit in lexical.result()))
            found = lexical.result()
        for hit in found:
            self.reads.expect(hit.doc_id, hit.rev)
        by_key = {(d.metadata[STORED_DOC], int(d.metadata[STORED_INDEX])): (d, s) for d, s in scored}
        extra = [(h.doc_id, h.index) for h in found if (h.doc_id, h.index) not in by_key]
        floor = min((s for _, s in scored), default=0.0)
        for doc, score in scored_at(self.reads, extra, self.dense.vector(), floor):
            by_key[(doc.metadata[STORED_DOC], int(doc.metadata[STORED_INDEX]))] = (doc, score)
        order = fuse(
            [(d.metadata[STORED_DOC], int(d.metadata[STORED_INDEX])) for d, _ in scored],
            [(h.doc_id, h.index) for h in found],
        )
        fused = [by_key[key] for key in order if key in by_key]
        return Matches(fused, matched=max(len(fused), matched(scored)))


def scored_at(
    reads: Reads, positions: list[Position], vector: Sequence[float] | None, floor: float
) -> list[tuple[Document, float]]:
    """The records at ``positions``, each with its relevance to the query ``vector`` (``floor`` without one).

    The similarity from the snapshot or growth's figures where they hold it, else from the
    record read with its vector.
    """
    if not positions:
        return []
    ids = [unit_id(doc_id, i) for doc_id, i in positions]
    if vector is None:
        return [(doc, floor) for doc in reads.records(ids)]
    scores = reads.scores(vector)
    if scores is not None:  # a snapshot scored all
        held = {unit_id(*p): c for p, _, c, _ in scores.at(positions)}
    else:  # growth's figures hold each one's similarity, where it is copied at its head's revision
        figured = reads.held(vector)
        known = [] if figured is None else [(i, figured(p)) for i, p in zip(ids, positions, strict=True)]
        held = {i: sentence.similarity for i, sentence in known if sentence is not None}
    scored = [(d, held[d.id or ""]) for d in reads.records([i for i in ids if i in held])]
    read = reads.with_vectors([i for i in ids if i not in held])
    scored += zip([d for d, _ in read], cosines([v for _, v in read], vector), strict=True)
    return [(doc, relevance(c)) for doc, c in scored]
