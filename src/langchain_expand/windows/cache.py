"""What queries keep between calls: sentences read (:class:`SentenceCache`), heads at a mark (:class:`HeadsAtMark`).

A guided query reads a few hundred sentences, and the next queries read many of them again. A
kept copy is served only at the revision of its document's head read by the query: a revision
hashes the text, splitter and metadata, so a copy at it is the record the store holds. Heads (the
commit markers) are never kept as copies, so the final version check sees the store as it is.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document

from langchain_expand.store import filters
from langchain_expand.store.adapters import Vector
from langchain_expand.store.lexical import LocalSentence
from langchain_expand.text.cues import EVERY_CUES, Cues, cues_code
from langchain_expand.units import STORED_DOC

__all__ = ["HeadsAtMark", "SentenceCache", "completed", "own_vector"]


class SentenceCache:
    """The most recently used copies of sentences (the lexical index's, or records made into copies), up to ``size``.

    Each is kept under its document, revision and index as a plain tuple, which the garbage
    collector stops tracking: a full cache adds nothing to a collection. Safe to share between threads.
    """

    def __init__(self) -> None:
        """An empty cache; its size is given on every use (the retriever's ``cache_size``)."""
        # each copy as its fields and its cues' code, under (document, revision, index)
        self._copies: OrderedDict[tuple[str, str, int], tuple[Any, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._copies)

    def clear(self) -> None:
        """Forget every copy."""
        with self._lock:
            self._copies.clear()

    def copies(self, doc_id: str, rev: str, indices: Iterable[int]) -> list[tuple[LocalSentence, Cues]]:
        """The copies held of sentences ``indices`` of ``doc_id`` at revision ``rev``, with their cues."""
        found: list[tuple[LocalSentence, Cues]] = []
        with self._lock:
            for i in indices:
                held = self._copies.get((doc_id, rev, i))
                if held is not None:
                    self._copies.move_to_end((doc_id, rev, i))
                    found.append((LocalSentence._make(held[:-1]), EVERY_CUES[held[-1]]))
        return found

    def keep_copies(self, doc_id: str, rev: str, copies: Iterable[tuple[LocalSentence, Cues]], size: int) -> None:
        """Hold ``copies`` of ``doc_id`` at ``rev`` with their cues (:func:`completed`); at most ``size`` in all."""
        with self._lock:
            for copy, found in copies:
                key = (doc_id, rev, copy.i)
                old = self._copies.get(key)
                if old is not None and (copy.vector is None or copy.tokens is None):
                    copy = completed(copy, LocalSentence._make(old[:-1]))
                self._copies[key] = (*copy, cues_code(found))  # a NamedTuple stays tracked
                self._copies.move_to_end(key)
            while len(self._copies) > size:
                self._copies.popitem(last=False)


class HeadsAtMark:
    """Document heads as the store held them at one change mark, shared by the queries that find it.

    A writer renews the store's change mark once it has finished, so until the mark moves a
    head read from the store is the head a query would read again: a query reads only the heads
    no query at this mark has read yet. A build at the mark lists every one (:meth:`every`).
    """

    def __init__(self, mark: str, size: int) -> None:
        """Heads at ``mark``, at most ``size`` of them (the retriever's ``cache_size``)."""
        self.mark = mark
        self.size = size
        self._heads: dict[str, tuple[Document, Vector]] = {}
        self._lock = threading.Lock()
        self.complete = False
        """Every head the store held at the mark is held here (:meth:`every`)."""

    @classmethod
    def every(cls, mark: str, heads: Iterable[tuple[Document, Vector]]) -> HeadsAtMark:
        """Every head the store held at ``mark``, listed by a build: :attr:`complete`."""
        held = cls(mark, 0)
        held._heads = {doc.id: (doc, own_vector(vector)) for doc, vector in heads if doc.id is not None}
        held.size, held.complete = len(held._heads), True
        return held

    def found(self, ids: Sequence[str]) -> list[tuple[Document, Vector]]:
        """The heads ``ids`` name that are held here."""
        with self._lock:
            return [self._heads[i] for i in ids if i in self._heads]

    def documents_where(self, where: Any) -> frozenset[str] | None:
        """The documents whose head passes ``where`` (as stored), evaluated here; None unless :attr:`complete`."""
        if not self.complete:
            return None
        with self._lock:
            heads = [doc.metadata for doc, _ in self._heads.values()]
        return frozenset(str(meta[STORED_DOC]) for meta in heads if filters.matches(where, meta))

    def keep(self, heads: Iterable[tuple[Document, Vector]]) -> None:
        """Hold ``heads``, just read from the store, while there is room."""
        with self._lock:
            for doc, vector in heads:
                if doc.id is not None and len(self._heads) < self.size:
                    self._heads[doc.id] = (doc, own_vector(vector))


def completed(copy: LocalSentence, old: LocalSentence) -> LocalSentence:
    """``copy`` with what ``old``, the same sentence at its revision, knew and it does not.

    A sentence is one copy, wherever read: a head's local copy is written without its vector,
    a record made into a copy without counts.
    """
    if copy.vector is None:
        copy = copy._replace(vector=old.vector)
    if copy.tokens is None:
        copy = copy._replace(tokens=old.tokens, counter=old.counter, joined=old.joined)
    return copy


def own_vector(vector: Vector) -> np.ndarray:
    """``vector`` as a float32 array of its own: a row of a store's batch would keep the whole batch alive."""
    if isinstance(vector, np.ndarray) and vector.dtype == np.float32 and not isinstance(vector.base, np.ndarray):
        return vector  # its own memory, or the lexical index's bytes of this one vector
    return np.array(vector, dtype=np.float32)
