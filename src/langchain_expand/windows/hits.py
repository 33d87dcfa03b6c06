"""A query's hits: the matched sentences windows are built around and guided growth starts from.

A ranking gives the best ``k`` as records with their relevance (:mod:`.rankings`); guided growth
asks for :class:`Hits`, which on a snapshot, or from growth's figures past it, are found,
fused and scored by position without a record made for each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.documents import Document

from langchain_expand.store.adapters import relevance
from langchain_expand.store.adapters.base import Matches, matched
from langchain_expand.store.records import unit_owner, unit_position
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
from langchain_expand.windows.growth import Position, Sentence
from langchain_expand.windows.rankings import Search, SearchedAhead, scored_at
from langchain_expand.windows.reads import Reads, record_cues

__all__ = ["FiguresHits", "Hit", "Hits", "RecordHits", "SnapshotHits", "from_match", "to_hit"]


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
