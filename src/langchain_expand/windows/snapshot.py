"""Every committed sentence in memory: exact dense search, BM25 and neighbours without a store call.

Besides embedding the query, a guided query on Chroma spent its time in Chroma's search (HNSW,
approximate: 79-96% of the exact top 8 on QMSum), in SQLite's BM25, and in reading a few hundred
neighbours and their heads. With a lexical index, every sentence record already has a local copy
with its vector (:mod:`langchain_expand.store.lexical`). A :class:`Snapshot` holds them all in memory
and answers each of those: one pass over the vectors finds the exact nearest (about 0.15 us a
sentence), :class:`Bm25` ranks as the FTS5 table does, and growth looks every neighbour up.

What a snapshot serves is always a set of whole documents, each at one revision:

- it is built for one **change mark** (:meth:`StoreAdapter.marked`), which every writer renews
  when it has finished (after its heads and deletions); a query that finds another mark builds
  a new snapshot, so a write shows in every reader's next query once its writer has finished.
  The new one is built on the last: a document whose head has not moved keeps its rows, and
  only those written since are read (the rest costs 9-17 ms against 74-135 ms built whole, on
  3,000-5,300 sentences);
- it is built only when **every document head** in the store has a local copy of each of its
  sentences at the head's revision. A writer without the lexical index, an index written before
  the copies existed, or a write caught half done leave a document without them: the store's own
  search and reads answer (as without a snapshot) until a writer completes the copies.

A writer that has not finished (or died before its mark) is not seen by a snapshot built before
it; readers without one read what the store holds at each moment, with the version checks of
:mod:`langchain_expand.windows.cache`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from langchain_core.documents import Document

from langchain_expand.store import filters
from langchain_expand.store.adapters.base import TIES
from langchain_expand.store.lexical import BaseLexicalIndex, LexicalHit, LocalSentence
from langchain_expand.store.records import unit_id
from langchain_expand.text.cues import Cues, cues
from langchain_expand.units import STORED_COUNT, STORED_DOC, STORED_INDEX, STORED_REV
from langchain_expand.windows.bm25 import Bm25, term_numbers
from langchain_expand.windows.similarity import norms_of, query_norm

if TYPE_CHECKING:
    from langchain_expand.store.adapters import StoreAdapter, Vector

__all__ = ["Run", "Scores", "Snapshot", "build"]

logger = logging.getLogger(__name__)


class Run(NamedTuple):
    """Consecutive sentences of one document, all at one revision: what a window is built from."""

    rev: str
    head: Document
    """The document's head record: its metadata is what every record of the document carries."""
    sentences: Sequence[LocalSentence]


class Snapshot:
    """The local copies of every committed sentence of one store, at one change mark."""

    def __init__(
        self,
        mark: str,
        space: str,
        relevance: Callable[[float], float],
        sentences: dict[str, tuple[str, list[LocalSentence] | None]],
        heads: dict[str, Document],
        previous: Snapshot | None = None,
    ) -> None:
        """Hold ``sentences`` (``doc_id -> (rev, its sentences in order)``), every one with its vector.

        A document given ``None`` for its sentences is taken as ``previous`` holds it (at the same
        revision): its rows, vectors and words are reused, not read or split again.

        ``heads`` are the documents' head records as the store held them (their metadata is what
        every record of the document carries).

        ``space`` is the store's distance (``cosine``, ``ip`` or ``l2``, as Chroma names them) and
        ``relevance`` turns one into a score, as the store's own search does.
        """
        self.mark = mark
        self.space = space
        self.relevance = relevance
        self.revs = {doc_id: rev for doc_id, (rev, _) in sentences.items()}
        self._heads = heads
        self.ids: list[str] = []
        """Every sentence's id, in the order the lexical index wrote them (a row of the matrix each)."""
        self._doc_of: list[str] = []  # each row's document
        self._sentences: list[LocalSentence] = []
        self._cues: list[Cues] = []  # each row's cues, read from its text once: growth weighs them every query
        self._words: list[np.ndarray] = []  # each row's words, as term numbers (the BM25 postings' source)
        self._terms: dict[str, int] = {} if previous is None else dict(previous._terms)
        self._span: dict[str, tuple[int, int]] = {}
        blocks: list[np.ndarray] = []
        for doc_id, (_, kept) in sentences.items():
            start = len(self.ids)
            if kept is None:
                assert previous is not None
                a, b = previous._span[doc_id]
                self.ids += previous.ids[a:b]
                self._doc_of += previous._doc_of[a:b]
                self._sentences += previous._sentences[a:b]
                self._cues += previous._cues[a:b]
                self._words += previous._words[a:b]
                blocks.append(previous._matrix[a:b])
            elif kept:
                self.ids += [unit_id(doc_id, s.i) for s in kept]
                self._doc_of += [doc_id] * len(kept)
                self._sentences += [s._replace(vector=None) for s in kept]
                self._cues += [cues(s.text, s.gap) for s in kept]
                self._words += [term_numbers(s.text, self._terms) for s in kept]
                blocks.append(np.vstack([np.asarray(s.vector, dtype=np.float32) for s in kept]))
            self._span[doc_id] = (start, len(self.ids))
        self._row_of = {id_: row for row, id_ in enumerate(self.ids)}
        self._matrix: np.ndarray = np.vstack(blocks) if blocks else np.zeros((0, 0), dtype=np.float32)
        self._squares = np.einsum("ij,ij->i", self._matrix, self._matrix)
        self._norms = norms_of(self._squares)
        self.bm25 = Bm25(self._words, self._terms, self._hit)

    def __len__(self) -> int:
        return len(self.ids)

    def within(self, where: Mapping[str, Any]) -> np.ndarray:
        """The rows of the documents whose head passes ``where`` (as stored), as the store's filter would pick them.

        Raises :class:`~langchain_expand.store.filters.Unsupported` for a filter not evaluated in memory.
        """
        filters.whole_documents(where)
        rows = np.zeros(len(self.ids), dtype=bool)
        for doc_id, (start, end) in self._span.items():
            if filters.matches(where, self._heads[doc_id].metadata):
                rows[start:end] = True
        return rows

    def scores(self, vector: Sequence[float], within: np.ndarray | None = None) -> Scores:
        """Every sentence scored against the query ``vector``: one pass over the matrix a query.

        ``within`` (rows, from :meth:`within`) are the only ones :meth:`Scores.nearest` returns.
        """
        query = np.asarray(vector, dtype=np.float32)
        if not self.ids:
            return Scores(self, np.zeros(0), np.zeros(0))
        # einsum, not BLAS: on 2 cores OpenBLAS's threads wait on the embedding model's, at 1-10x the cost
        dots = np.einsum("ij,j->i", self._matrix, query)
        cosines = dots / (self._norms * query_norm(query))  # similarities(), with the dots kept
        if self.space == "cosine":
            distances = 1.0 - cosines
        elif self.space == "ip":
            distances = 1.0 - dots
        else:  # squared L2, as Chroma reports it
            distances = self._squares - 2.0 * dots + float(query @ query)
        return Scores(self, cosines, distances, within)

    def _hit(self, row: int, rank: int) -> LexicalHit:
        doc_id, i = self.position(row)
        return LexicalHit(doc_id, i, self.revs[doc_id], rank)

    def position(self, row: int) -> tuple[str, int]:
        """The sentence in ``row``: its document and index."""
        return self._doc_of[row], self._sentences[row].i

    def row(self, position: tuple[str, int]) -> int | None:
        """The row of the sentence at ``position`` (document, index); None if not held here."""
        span = self._span.get(position[0])
        if span is None or not 0 <= position[1] < span[1] - span[0]:
            return None
        return span[0] + position[1]

    def size(self, doc_id: str) -> int:
        """The number of sentences of a document held here."""
        start, end = self._span[doc_id]
        return end - start

    def heads(self, doc_ids: Iterable[str]) -> list[tuple[Document, np.ndarray]]:
        """The head records of the documents held here, each with its vector; others left out."""
        found: list[tuple[Document, np.ndarray]] = []
        for doc_id in doc_ids:
            head = self._heads.get(doc_id)
            if head is not None:
                found.append((head, self._matrix[self._row_of[unit_id(doc_id, 0)]]))
        return found

    def run(self, doc_id: str, first: int, last: int) -> Run | None:
        """Sentences ``first`` to ``last - 1`` of a document held here: a slice (its rows are its sentences)."""
        span = self._span.get(doc_id)
        if span is None or not 0 <= first < last <= span[1] - span[0]:
            return None
        return Run(self.revs[doc_id], self._heads[doc_id], self._sentences[span[0] + first : span[0] + last])

    def copy(self, id_: str) -> tuple[Document, LocalSentence] | None:
        """The copy of the sentence ``id_`` names, with its document's head; None if not held here.

        Without its vector: a query scores every sentence at once (:meth:`scores`).
        """
        row = self._row_of.get(id_)
        return None if row is None else (self._heads[self._doc_of[row]], self._sentences[row])


class Scores:
    """One query's scores of every sentence of a snapshot: its nearest, and each sentence's similarity."""

    def __init__(
        self, snapshot: Snapshot, cosines: np.ndarray, distances: np.ndarray, within: np.ndarray | None = None
    ) -> None:
        self.snapshot = snapshot
        self.cosines = cosines
        self.distances = distances
        self.within = within
        """The rows a filtered query may find (None: all)."""

    def nearest(self, k: int) -> list[tuple[tuple[str, int], float]]:
        """The ``k`` sentences nearest the query (document, index), exactly, with the store's relevance, best first.

        Ties (equal to ``TIES`` decimals: a repeated sentence's copies differ in the last bits of
        a float32 sum) go by document id, then position, as the store's results do
        (:func:`~langchain_expand.store.adapters.base.nearest`): a query gets the same hits
        from the snapshot as from the store.
        """
        rounded = np.round(self.distances, TIES)
        if self.within is not None:
            rounded[~self.within] = np.inf
        k = min(k, len(rounded) if self.within is None else int(self.within.sum()))
        if k < 1:
            return []
        cut = rounded[np.argpartition(rounded, k - 1)[k - 1]]
        pool = np.flatnonzero(rounded <= cut).tolist()
        relevance, position = self.snapshot.relevance, self.snapshot.position
        top = sorted(pool, key=lambda j: (rounded[j], position(j)))[:k]
        return [(position(j), relevance(d)) for j, d in zip(top, self.distances[top].tolist(), strict=True)]

    def held(self, position: tuple[str, int]) -> tuple[LocalSentence, float, Cues] | None:
        """The sentence at ``position`` (document, index), its similarity to the query, its cues; None if absent."""
        row = self.snapshot.row(position)
        if row is None:
            return None
        return self.snapshot._sentences[row], float(self.cosines[row]), self.snapshot._cues[row]


def build(
    store: StoreAdapter, lexical: BaseLexicalIndex, mark: str, limit: int, previous: Snapshot | None = None
) -> Snapshot | None:
    """The snapshot of what ``store`` has committed, from ``lexical``'s copies; None when they do not cover it.

    None too when the copies number more than ``limit``, or the store cannot list its heads.
    The caller reads ``mark`` before this, so a writer finishing meanwhile only makes the
    snapshot newer than its mark: the next query's mark differs, and builds again.

    With ``previous`` (an earlier snapshot of the same store), a document whose head still has
    the revision ``previous`` holds it at is taken from there: only the documents written since
    are read from the lexical index, and only their heads' vectors from the store.
    """
    if store.space is None or lexical.count() > limit:
        return None
    heads = store.where({STORED_INDEX: 0}, vectors=previous is None)
    if heads is None:
        return None
    committed: dict[str, tuple[object, int, Vector | None]] = {}
    records: dict[str, Document] = {}
    for record, vector in heads:
        meta = record.metadata
        if STORED_DOC in meta:
            committed[str(meta[STORED_DOC])] = (meta.get(STORED_REV), int(meta[STORED_COUNT]), vector)
            records[str(meta[STORED_DOC])] = record
    same = {} if previous is None else {d: h[0] for d, h in committed.items() if previous.revs.get(d) == h[0]}
    written: dict[str, tuple[str, list[LocalSentence]]] = {}
    for doc_id, rev, sentence in lexical.copies(None if previous is None else set(committed) - set(same)):
        if doc_id in committed and doc_id not in same and committed[doc_id][0] == rev:
            written.setdefault(doc_id, (rev, []))[1].append(sentence)
    if len(same) + len(written) != len(committed):
        return None  # a document not copied at its head's revision: the store answers
    for doc_id, (_, kept) in written.items():
        kept.sort(key=lambda s: s.i)
        if [s.i for s in kept] != list(range(committed[doc_id][1])):
            return None  # not copied whole
    unread = [d for d, (_, kept) in written.items() if kept[0].vector is None and committed[d][2] is None]
    head_vectors = store.vectors([unit_id(d, 0) for d in unread])
    for doc_id, (_, kept) in written.items():
        head_vector = committed[doc_id][2]
        if kept[0].vector is None:  # the head is written after its copy: its vector comes from the store
            kept[0] = kept[0]._replace(
                vector=head_vector if head_vector is not None else head_vectors.get(unit_id(doc_id, 0))
            )
        if any(s.vector is None for s in kept):
            return None
    # The order a full build gives: documents by their first copy's place in the lexical index
    # (those unchanged keep theirs; one written since was copied after all of them).
    ordered: dict[str, tuple[str, list[LocalSentence] | None]] = {}
    if previous is not None:
        ordered.update((d, (str(same[d]), None)) for d in previous.revs if d in same)
    ordered.update((d, (str(rev), kept)) for d, (rev, kept) in written.items())
    return Snapshot(mark, store.space, store.relevance, ordered, records, previous)
