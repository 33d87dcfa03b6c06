"""Every committed sentence in memory: exact dense search, BM25 and neighbours without a store call.

With a lexical index, every sentence record has a local copy with its vector
(:mod:`langchain_expand.store.lexical`). A :class:`Snapshot` holds them all in memory: one pass
over the vectors finds the exact nearest (the store's HNSW is approximate), :class:`Bm25` ranks
as the FTS5 table does, and growth looks every neighbour up. It serves whole documents, each at
one revision:

- it is built for one **change mark** (:meth:`StoreAdapter.marked`), which every writer renews
  when it has finished; a query that finds another mark builds a new snapshot on the last (a
  document whose head has not moved keeps its rows), so a write shows in every reader's next
  query once its writer has finished;
- it is built only when **every document head** has a local copy of each of its sentences at
  the head's revision; otherwise (a writer without the lexical index, a write caught half done)
  the store's own search and reads answer until a writer completes the copies.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from langchain_core.documents import Document

from langchain_expand.store.lexical import BaseLexicalIndex, LexicalHit, LocalSentence
from langchain_expand.store.records import unit_id
from langchain_expand.units import STORED_COUNT, STORED_DOC, STORED_INDEX, STORED_REV
from langchain_expand.windows.bm25 import Bm25, term_numbers
from langchain_expand.windows.cache import HeadsAtMark
from langchain_expand.windows.columns import Columns, Row

if TYPE_CHECKING:
    from langchain_expand.store.adapters import StoreAdapter, Vector

__all__ = ["Run", "Snapshot", "build"]

logger = logging.getLogger(__name__)


class Run(NamedTuple):
    """Consecutive sentences of one document, all at one revision: what a window is built from."""

    rev: str
    head: Document
    """The document's head record: its metadata is what every record of the document carries."""
    sentences: Sequence[LocalSentence]


class Snapshot:
    """The local copies of every committed sentence of one store, at one change mark: columns, heads and BM25.

    A query reads it as it reads growth's figures past the limit (:class:`~langchain_expand.windows.reads.Reads`),
    knowing that it holds every committed document, each at its head's revision (``whole``).
    """

    def __init__(
        self, mark: str, columns: Columns, heads: dict[str, Document], previous: Snapshot | None = None
    ) -> None:
        """Hold ``columns`` (every sentence, with its copy and vector) and the documents' ``heads``.

        ``heads`` are the head records as the store held them (their metadata is what every
        record of the document carries). The rows ``columns`` took from ``previous`` keep their
        words; the others' are read from their text.
        """
        self.columns = columns
        vectors = {d: columns.vector(columns.rows(d)[0]) for d in heads}  # build() has given every row its vector
        self.heads = HeadsAtMark.every(mark, ((head, v) for d, head in heads.items() if (v := vectors[d]) is not None))
        """Every document's head, with its vector (:meth:`HeadsAtMark.every`)."""
        self._terms: dict[str, int] = {} if previous is None else dict(previous._terms)
        kept: list[np.ndarray] = [] if previous is None else [previous._words[j] for j in columns.reused.tolist()]
        copies = (columns.copy(row) for row in range(len(columns.reused), len(columns)))
        self._words: list[np.ndarray] = kept + [
            term_numbers(copy.text, self._terms) for copy in copies if copy is not None
        ]
        self.bm25 = Bm25(self._words, self._terms, self._hit, columns.mask)

    def __len__(self) -> int:
        return len(self.columns)

    def _hit(self, row: int, rank: int) -> LexicalHit:
        doc_id, i = self.columns.position(row)
        held = self.columns.document(doc_id)
        assert held is not None  # every row's document is held
        return LexicalHit(doc_id, i, held[0], rank)


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
    held = {} if previous is None else {d: doc[0] for d in committed if (doc := previous.columns.document(d))}
    same = {d: h[0] for d, h in committed.items() if d in held and held[d] == h[0]}
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
    reused = [] if previous is None else [d for d in previous.columns.documents() if d in same]
    rows: list[Row] = [(d, str(rev), s) for d, (rev, kept) in written.items() for s in kept]
    columns = Columns(rows, texts=True, previous=previous.columns if previous else None, reused=reused)
    if len(columns) != sum(n for _, n, _ in committed.values()):
        return None  # a vector of another dimension: the store answers
    return Snapshot(mark, columns, records, previous)
