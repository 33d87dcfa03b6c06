"""A query's hits: the dense ranking (from the store, or exactly from a snapshot), BM25 beside it, fused.

Windows are built around hits; guided growth starts from them. A search gives the best ``k``
as records with their relevance (:data:`Search`); guided growth asks for :class:`Hits`, which
on a snapshot are found, fused and scored by position without a record made for each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from langchain_core.documents import Document

from langchain_expand.store.adapters import relevance
from langchain_expand.store.adapters.base import Matches, matched
from langchain_expand.store.lexical import BaseLexicalIndex, LexicalHit, Within
from langchain_expand.store.records import unit_id, unit_owner, unit_position
from langchain_expand.store.search import VectorSearch, fuse
from langchain_expand.text.cues import NO_CUES, Cues
from langchain_expand.units import (
    CARRIED,
    DOC_ID,
    HIT,
    N_SENTENCES,
    SCORE,
    STORED_COUNT,
    STORED_DOC,
    STORED_INDEX,
    STORED_REV,
)
from langchain_expand.windows.bm25 import Bm25
from langchain_expand.windows.growth import Position, Sentence
from langchain_expand.windows.reads import Reads, record_cues
from langchain_expand.windows.similarity import cosines

__all__ = [
    "DenseSearch",
    "FiguresHits",
    "Hit",
    "Hits",
    "HybridSearch",
    "RecordHits",
    "Search",
    "SearchedAhead",
    "SnapshotHits",
    "SnapshotSearch",
    "from_match",
    "to_hit",
]

Search = Callable[[int], list[tuple[Document, float]]]
"""Asked for ``k``, gives the best matches with their relevance, best first."""


@dataclass(frozen=True)
class Hit:
    """A matched sentence: where it stands, the version it was matched in, and its relevance."""

    doc_id: str
    index: int
    n: int
    rev: str | None  # None: take whatever version the document's head has
    score: float
    extra: dict[str, Any]
    cues: Cues = NO_CUES
    """What its sentence says of the text beside it (a table row, a heading)."""


def to_hit(doc: Document, score: float) -> Hit:
    """The hit a search record stands for; a record without sentence positions is an error naming it."""
    meta = doc.metadata
    try:
        doc_id, index, n, rev = meta[STORED_DOC], int(meta[STORED_INDEX]), int(meta[STORED_COUNT]), meta[STORED_REV]
    except KeyError:
        msg = (
            f"The vector store returned a record without sentence positions ({doc.id!r}). "
            "Give SentenceWindowRetriever a collection that only it writes to."
        )
        raise ValueError(msg) from None
    return Hit(doc_id, index, n, rev, score, {}, record_cues(doc))


def from_match(doc: Document) -> Hit:
    """A hit rebuilt from a match-only result (or any unit with the same metadata)."""
    m = doc.metadata
    try:
        extra = {key: m[key] for key in CARRIED if key in m}
        return Hit(m[DOC_ID], int(m[HIT]), int(m[N_SENTENCES]), None, float(m[SCORE]), extra)
    except KeyError as exc:
        msg = (
            f"expand_hits needs the metadata of a match-only result ({DOC_ID}, {HIT}, {N_SENTENCES}, "
            f"{SCORE}); document {doc.id!r} lacks {exc}. Retrieve it with expand=False."
        )
        raise ValueError(msg) from None


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


class Hits(Protocol):
    """The ranked hits guided growth starts from, and their sentences' token counts."""

    def __call__(self, k: int) -> list[Hit]:
        """The best ``k`` (more where a ranking fuses two), best first."""
        ...

    def tokens(self, hits: Sequence[Hit]) -> list[int]:
        """The token count of each hit's sentence; ``hits`` are of the last call."""
        ...


class RecordHits:
    """Hits made of a search's records; their counts read from the records through the query's ``reads``."""

    def __init__(self, search: Search, reads: Reads) -> None:
        self.search = search
        self.reads = reads
        self._records: dict[Position, Document] = {}

    def __call__(self, k: int) -> list[Hit]:
        """The search's best ``k`` as hits."""
        scored = self.search(k)
        hits = [to_hit(doc, score) for doc, score in scored]
        self._records = {(h.doc_id, h.index): doc for h, (doc, _) in zip(hits, scored, strict=True)}
        return Matches(hits, matched=matched(scored))

    def tokens(self, hits: Sequence[Hit]) -> list[int]:
        """The token count of each hit's sentence, from its record."""
        return self.reads.tokens([self._records[h.doc_id, h.index] for h in hits])


class SnapshotHits:
    """The hybrid ranking's hits found, fused and scored in the query's snapshot, with no record made.

    The hits :class:`HybridSearch` over :class:`SnapshotSearch` returns, in the same order
    with the same scores: the dense hits with the store's relevance, BM25's others with their
    cosine similarity. A hit's revision, document size and token count come from the snapshot;
    records are made only for the windows built (about 80 fewer a query at 2,000 tokens).
    """

    def __init__(self, dense: VectorSearch, lexical: SearchedAhead, reads: Reads) -> None:
        self.dense = dense
        self.lexical = lexical
        self.reads = reads
        self._tokens: dict[Position, int] = {}

    def __call__(self, k: int) -> list[Hit]:
        """The fused ranking's best ``k`` as hits (up to ``2k``), best first."""
        vector = self.dense.vector()
        assert vector is not None  # a snapshot is only built of a store that keeps vectors
        scores = self.reads.scores(vector)
        assert scores is not None
        dense = dict(scores.nearest(k))
        order = fuse(list(dense), [(h.doc_id, h.index) for h in self.lexical.search(self.dense.query, k)])
        held = {position: (n, cosine, cue) for position, n, cosine, cue in self.reads.similar(order, vector)}
        snapshot = scores.snapshot
        hits: list[Hit] = []
        for position in order:
            if position not in held:
                continue
            tokens, cosine, cue = held[position]
            self._tokens[position] = tokens
            score = dense[position] if position in dense else relevance(cosine)
            doc_id, index = position
            hits.append(Hit(doc_id, index, snapshot.size(doc_id), snapshot.revs[doc_id], score, {}, cue))
        return hits

    def tokens(self, hits: Sequence[Hit]) -> list[int]:
        """The token count of each hit's sentence, from the snapshot's copy."""
        return [self._tokens[h.doc_id, h.index] for h in hits]


class FiguresHits:
    """The hybrid ranking's hits past the snapshot's limit, made from growth's figures where they hold them.

    The hits :class:`RecordHits` makes of :class:`HybridSearch` over :class:`DenseSearch` (BM25
    in memory), in the same order with the same scores, without a record read for a hit whose
    sentence the figures hold at its head's revision: its count, cues and similarity are
    there, its document's size and revision in the head read. Those they do not hold (written
    since the build) are read as records, as before; a store that cannot search for ids alone
    answers through ``records``.
    """

    def __init__(self, dense: VectorSearch, lexical: SearchedAhead, reads: Reads, records: RecordHits) -> None:
        self.dense = dense
        self.lexical = lexical
        self.reads = reads
        self.records = records
        self._tokens: dict[Position, int] = {}
        self._read: dict[Position, Document] = {}
        self._fallback = False

    def __call__(self, k: int) -> list[Hit]:
        """The fused ranking's best ``k`` as hits (up to ``2k``), best first."""
        vector = self.dense.vector()
        figured = None if vector is None else self.reads.held(vector)
        found = None if figured is None else self.dense.ids(k)
        self._fallback = found is None or figured is None
        if found is None or figured is None:  # nothing held, or a store that cannot search for ids
            return self.records(k)
        ranked = [
            (found_by.doc_id, found_by.index, found_by.rev) for found_by in self.lexical.search(self.dense.query, k)
        ]
        self.reads.heads([*(unit_owner(i) for i, _ in found), *(doc_id for doc_id, _, _ in ranked)])
        for doc_id, _, rev in ranked:
            self.reads.expect(doc_id, rev)
        made = self._dense(found, figured)
        dense = list(made)  # in the store's order
        lexical = [(doc_id, index) for doc_id, index, _ in ranked]
        left: list[Position] = []
        for position in (p for p in lexical if p not in made):
            sentence = figured(position)
            hit = None if sentence is None else self._made(position, sentence, relevance(sentence.similarity))
            if hit is None:
                left.append(position)
            else:
                made[position] = hit
        floor = min((made[position].score for position in dense), default=0.0)
        for doc, score in scored_at(self.reads, left, vector, floor):  # as HybridSearch scores them
            hit = self._read_hit(doc, score)
            made[hit.doc_id, hit.index] = hit
        hits = [made[position] for position in fuse(dense, lexical) if position in made]
        return Matches(hits, matched=max(len(hits), len(found)))

    def _dense(
        self, found: list[tuple[str, float]], figured: Callable[[Position], Sentence | None]
    ) -> dict[Position, Hit]:
        """The store's hits in its order: from the figures, else read as DenseSearch reads them (gone: left out)."""
        hits: dict[str, Hit] = {}
        for i, score in found:
            position = unit_position(i)
            hit = None if position is None else self._made(position, figured(position), score)
            if hit is not None:
                hits[i] = hit
        unheld = [(i, score) for i, score in found if i not in hits]
        if unheld:
            records = {doc.id: doc for doc in self.reads.records([i for i, _ in unheld])}
            hits.update((i, self._read_hit(records[i], score)) for i, score in unheld if i in records)
        return {(hit.doc_id, hit.index): hit for i, _ in found if (hit := hits.get(i)) is not None}

    def _read_hit(self, doc: Document, score: float) -> Hit:
        """The hit a record read stands for, kept with it (for its count)."""
        hit = to_hit(doc, score)
        self._read[hit.doc_id, hit.index] = doc
        return hit

    def tokens(self, hits: Sequence[Hit]) -> list[int]:
        """The token count of each hit's sentence: from the figures, else from its record."""
        if self._fallback:
            return self.records.tokens(hits)
        read = [h for h in hits if (h.doc_id, h.index) not in self._tokens]
        counted = iter(self.reads.tokens([self._read[h.doc_id, h.index] for h in read]))
        return [self._tokens[h.doc_id, h.index] if (h.doc_id, h.index) in self._tokens else next(counted) for h in hits]

    def _made(self, position: Position, sentence: Sentence | None, score: float) -> Hit | None:
        """The hit at ``position`` from its figures, with ``score``; None where they or its head are not held."""
        committed = self.reads.committed(position[0])
        n = None if committed is None else committed[0].metadata.get(STORED_COUNT)
        if sentence is None or committed is None or not isinstance(n, int):
            return None
        self._tokens[position] = sentence.tokens
        return Hit(position[0], position[1], n, committed[1], score, {}, Cues(sentence.tied, sentence.heading))
