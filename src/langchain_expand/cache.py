"""Sentence records kept in memory between queries, served only at their current revision.

A guided query reads a few hundred sentence records with their vectors, and counts their
tokens. In Chroma a record read by id costs about 80 us (its metadata lives in SQLite), so
those reads were most of a query's own time, and the next queries over the same documents
read many of the same sentences again.

:class:`SentenceCache` keeps what was read: the record, its vector, its token count. A query
is served from it through a :class:`Reads`, which hands out a cached record only when the
record's revision equals the one the query saw fresh from the store for that document (its
search hits, or the lexical index's). A revision hashes the document's text, splitter and
metadata, so a record of that revision is the record the store holds: a document re-added with
new text, or deleted, is read from the store again. Heads (sentence 0, the commit marker) are
always read from the store, so the final version check sees the store as it is now.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from langchain_core.documents import Document

from langchain_expand.adapters import StoreAdapter, Vector
from langchain_expand.records import unit_id
from langchain_expand.tokens import count_many
from langchain_expand.units import STORED_DOC, STORED_INDEX, STORED_REV

__all__ = ["Reads", "SentenceCache"]


_NONE = object()  # no revision known: matches no record


@dataclass(slots=True)
class _Entry:
    doc: Document
    vector: Vector | None
    tokens: int | None


class SentenceCache:
    """The most recently used sentence records, up to ``size``; safe to share between threads."""

    def __init__(self) -> None:
        """An empty cache; its size is given on every use (the retriever's ``cache_size``)."""
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._counter: object = None

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        """Forget every record."""
        with self._lock:
            self._entries.clear()

    def find(self, ids: Iterable[str], revs: dict[str, object], counter: object) -> dict[str, _Entry]:
        """The entries for ``ids`` whose revision is their document's in ``revs``.

        Token counts are kept only for one counter: when ``counter`` is another, they are dropped.
        """
        found: dict[str, _Entry] = {}
        with self._lock:
            if counter is not self._counter:
                for kept in self._entries.values():
                    kept.tokens = None
                self._counter = counter
            for id_ in ids:
                entry = self._entries.get(id_)
                if entry is None:
                    continue
                meta = entry.doc.metadata
                if revs.get(meta[STORED_DOC], _NONE) == meta.get(STORED_REV):
                    self._entries.move_to_end(id_)
                    found[id_] = entry
        return found

    def keep(self, entries: Iterable[_Entry], size: int) -> None:
        """Remember ``entries`` (an entry of another revision replaces the old one); keep at most ``size``."""
        with self._lock:
            for entry in entries:
                id_ = entry.doc.id or ""
                old = self._entries.get(id_)
                if old is not None and old.doc.metadata.get(STORED_REV) == entry.doc.metadata.get(STORED_REV):
                    old.vector = old.vector if entry.vector is None else entry.vector
                    old.tokens = old.tokens if entry.tokens is None else entry.tokens
                else:
                    self._entries[id_] = entry
                self._entries.move_to_end(id_)
            while len(self._entries) > size:
                self._entries.popitem(last=False)


class Reads:
    """One query's reads of sentence records: what it read already, the cache, else the store.

    Revisions come from fresh reads only: the heads (:meth:`heads`), the records the search
    returned (:meth:`saw`) and the lexical index's hits (:meth:`expect`); a cached record is
    served only at the revision so learned for its document. Without a cache (``size`` 0) every
    record is read from the store, once per query.
    """

    def __init__(self, store: StoreAdapter, cache: SentenceCache, size: int, counter: Callable[[str], int]) -> None:
        """Reads from ``store`` through ``cache`` (at most ``size`` records), counting with ``counter``."""
        self.store = store
        self.cache = cache
        self.size = size
        self.counter = counter
        self.revs: dict[str, object] = {}
        self._read: dict[str, tuple[Document, Vector | None]] = {}

    def saw(self, docs: Iterable[Document]) -> None:
        """Learn the revisions of records the store just returned; keep the records."""
        fresh = [d for d in docs if STORED_DOC in d.metadata and d.id not in self._read]
        self._learn((d, None) for d in fresh)

    def expect(self, doc_id: str, rev: object) -> None:
        """Learn a document's revision from another fresh source (unless already known)."""
        self.revs.setdefault(doc_id, rev)

    def heads(self, doc_ids: Iterable[str]) -> None:
        """Read the documents' heads (sentence 0, the commit marker) with their vectors, once a query."""
        ids = [i for i in dict.fromkeys(unit_id(d, 0) for d in doc_ids) if i not in self._read]
        self._learn(self.store.with_vectors(ids))

    def records(self, ids: Sequence[str]) -> list[Document]:
        """The records ``ids`` name (unknown ids left out), each read from the store at most once."""
        known = {i: self._read[i][0] for i in ids if i in self._read}
        known.update((i, e.doc) for i, e in self._cached([i for i in ids if i not in known]).items())
        read = self.store.get_by_ids([i for i in ids if i not in known])
        self._learn((d, None) for d in read)
        return [*known.values(), *read]

    def with_vectors(self, ids: Sequence[str]) -> list[tuple[Document, Vector]]:
        """The records ``ids`` name, each with its stored vector, each read from the store at most once."""
        known: dict[str, tuple[Document, Vector]] = {}
        for i in ids:
            doc, vector = self._read.get(i, (None, None))
            if doc is not None and vector is not None:
                known[i] = (doc, vector)
        for i, entry in self._cached([i for i in ids if i not in known]).items():
            if entry.vector is not None:
                known[i] = (entry.doc, entry.vector)
        read = self.store.with_vectors([i for i in ids if i not in known])
        self._learn(read)
        return [*known.values(), *read]

    def tokens(self, docs: Sequence[Document]) -> list[int]:
        """Each record's token count: counted once per revision while the cache holds it."""
        known = self._cached([d.id or "" for d in docs])
        todo = [d for d in docs if d.id not in known or known[d.id or ""].tokens is None]
        counted = dict(zip([d.id for d in todo], count_many(self.counter, [d.page_content for d in todo]), strict=True))
        for doc in todo:
            entry = known.get(doc.id or "")
            if entry is not None:
                entry.tokens = counted[doc.id]
        return [counted[d.id] if d.id in counted else known[d.id or ""].tokens or 0 for d in docs]

    def _learn(self, read: Iterable[tuple[Document, Vector | None]]) -> None:
        """Records just read from the store: remembered for this query, their revisions learned, cached."""
        kept: list[_Entry] = []
        for doc, vector in read:
            meta = doc.metadata
            if STORED_DOC not in meta or doc.id is None:
                continue
            self._read[doc.id] = (doc, vector)
            self.revs.setdefault(meta[STORED_DOC], meta.get(STORED_REV))
            if self.size and int(meta.get(STORED_INDEX, 0)) != 0:  # heads are never served from the cache
                kept.append(_Entry(doc, None if vector is None else np.array(vector, dtype=np.float32), None))
        if kept:
            self.cache.keep(kept, self.size)

    def _cached(self, ids: Sequence[str]) -> dict[str, _Entry]:
        if not self.size:
            return {}
        return self.cache.find(ids, self.revs, self.counter)
