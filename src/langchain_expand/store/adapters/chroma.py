"""Chroma: vectors written and read directly, ids searched without reading records, change marks."""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from langchain_expand.store.adapters.base import Matches, Scored, StoreAdapter, Vector, clamped
from langchain_expand.store.adapters.chromaclient import DataVersion, Reopening, forked, is_embedded, refuse_after_fork
from langchain_expand.store.adapters.ties import MAX_SEARCH, TIE_GROWTH, nearest

__all__ = ["ChromaAdapter", "chroma_ef_search", "chroma_space"]

logger = logging.getLogger(__name__)

_MARK = "mark"
"""The change mark's record id and metadata key, in the collection beside the store's."""
_PENDING = "writing-"
"""What starts the id of the record a writer at work leaves beside the mark (:meth:`ChromaAdapter.begin`)."""
_BEAT = "beat"
"""The metadata key of a writer's record: when it last wrote (seconds since the epoch)."""
BEAT = 30.0
"""Seconds between a writer's renewals of its record, at most: a write renews it where it is older."""
STALE_WRITER = 3600.0
"""Seconds without a renewal after which a writer's record is a killed writer's: a writer that finishes removes it."""
TIE_SPARE = 64
"""Ids a search for ids asks beyond ``k + 1``: where repeated sentences tie the ``k``-th, the first
search then holds most ties whole, not a second search asking more; up to its ``ef_search`` more
ids cost Chroma little (benchmarks/README.md, "Scale")."""


def chroma_space(store: VectorStore) -> str:
    """The distance a Chroma collection ranks by: ``l2`` (Chroma's default), ``cosine`` or ``ip``."""
    collection = store._collection  # type: ignore[attr-defined]
    metadata = getattr(collection, "metadata", None) or {}
    if "hnsw:space" in metadata:
        return str(metadata["hnsw:space"])
    config = getattr(collection, "configuration", None) or {}
    for index in ("hnsw", "spann"):
        space = (config.get(index) or {}).get("space") if isinstance(config, dict) else None
        if space:
            return str(space)
    return "l2"


def chroma_ef_search(store: VectorStore) -> int:
    """The width of a Chroma collection's HNSW search beam (``ef_search``; Chroma's default 100); 0 for another index.

    Chroma searches with a beam of ``max(ef_search, k)``: up to ``ef_search`` results, the
    search is one and the same, and the first ``k`` of a larger result are the result for
    ``k``. A tie at the last place is completed by asking ``TIE_GROWTH`` times as many, within
    the beam (:func:`~langchain_expand.store.adapters.ties.nearest`), so a search of up to
    ``ef_search // TIE_GROWTH`` results reads ahead (:attr:`ChromaAdapter.nested_up_to`). A
    SPANN index (Chroma's distributed one) promises nothing of the kind.
    """
    collection = store._collection  # type: ignore[attr-defined]
    metadata = getattr(collection, "metadata", None) or {}
    if "hnsw:search_ef" in metadata:  # set the legacy way
        return int(metadata["hnsw:search_ef"])
    config = getattr(collection, "configuration", None)
    config = config if isinstance(config, dict) else {}
    if config.get("spann") is not None and config.get("hnsw") is None:
        return 0
    return int((config.get("hnsw") or {}).get("ef_search") or 100)


class ChromaAdapter(StoreAdapter):
    """A ``langchain_chroma.Chroma`` store, read and written through its collection.

    Every writer that finishes leaves a new random change mark in a small collection beside
    the store's, so a reader learns in one read whether anything was written since it last
    looked (:meth:`marked`).
    """

    keeps_marks = True
    holds_lists = True

    def __init__(self, store: VectorStore) -> None:
        """Wrap a Chroma store."""
        self.space = chroma_space(store)
        self.beam = chroma_ef_search(store)
        """How many results a search looks at, whatever fewer are asked (its ``ef_search``; 0 for a SPANN index)."""
        self.nested_up_to = max(0, self.beam // TIE_GROWTH - 1)
        super().__init__(store)
        self._marks: Any = None
        self._beats: dict[str, float] = {}
        self._version: DataVersion | None = None

    @property
    def collection(self) -> Any:
        """The store's collection.

        Raises:
            RuntimeError: In a process forked from one that had opened an embedded Chroma
                (its calls would never return); the message says what to do instead.
        """
        collection = self.store._collection  # type: ignore[attr-defined]
        if forked() and is_embedded(collection._client._system):
            refuse_after_fork(collection.name)
        return Reopening(collection, self._reopen)

    def _reopen(self, stale: Any) -> Any:
        """The store's collection on a new client of the same folder, where ``stale``'s could not read what is there.

        An embedded Chroma holds its index in the process: once another process writes the
        same folder, reading the new records raises "Error finding id" in this one for good,
        for every client of the folder (they share one system). A client opened again, on a
        system of its own, reads them. The store is handed the new client, so every retriever
        over it reads through it.
        """
        import chromadb
        from chromadb.api.shared_system_client import SharedSystemClient

        system = stale._client._system
        cached = SharedSystemClient._identifier_to_system
        for identifier in [i for i, held in cached.items() if held is system]:
            del cached[identifier]  # so the new client gets a system of its own
        client = chromadb.Client(settings=system.settings, tenant=stale.tenant, database=stale.database)
        reopened = client.get_collection(stale.name, embedding_function=None)
        self.store._client = client  # type: ignore[attr-defined]
        self.store._chroma_collection = reopened  # type: ignore[attr-defined]
        self._marks = self._version = None
        logger.warning(
            "Chroma could not find records in %s that another process wrote; its client was opened again. "
            "An embedded Chroma is for one process: run a Chroma server (chromadb.HttpClient) for several, "
            "or write from the process that reads.",
            system.settings.persist_directory,
        )
        return reopened

    def _relevance_rule(self) -> Callable[[float], float]:
        override = getattr(self.store, "override_relevance_score_fn", None)
        if override is not None:
            return clamped(override)
        return clamped(lambda d: 1.0 - d / 2.0) if self.space == "l2" else clamped(lambda d: 1.0 - d)

    def check_metadata(self, metadata: dict[str, Any], doc_id: str) -> None:
        """Refuse the keys Chroma refuses: ``chroma:document`` (its own) and those starting with ``$`` (operators)."""
        for key in metadata:
            if key.startswith("$") or key == "chroma:document":
                msg = (
                    f"Document {doc_id!r}: metadata key {key!r} is reserved by Chroma (its own key, or a "
                    "filter operator). Rename the key."
                )
                raise ValueError(msg)

    def takes_vectors(self) -> bool:
        """Chroma keeps the vector it is given."""
        return True

    def _embed(self, texts: list[str]) -> Sequence[Vector]:
        """The vectors as rows of one float32 array, as Chroma keeps them.

        Chroma converts a list of lists row by row, and the vectors kept for the lexical index
        (:meth:`_as_stored`) were converted again: one conversion serves both. A model's vectors
        of different lengths stay lists, for Chroma to refuse with its own message.
        """
        vectors = super()._embed(texts)
        try:
            return list(np.asarray(vectors, dtype=np.float32))
        except ValueError:
            return vectors

    def _write_vectors(self, ids: list[str], docs: list[Document], vectors: Sequence[Vector]) -> None:
        gone = self._gone(ids, docs)
        metadatas = [{**d.metadata, **dict.fromkeys(keys)} or None for d, keys in zip(docs, gone, strict=True)]
        texts = [d.page_content for d in docs]
        self.collection.upsert(ids=ids, embeddings=vectors, documents=texts, metadatas=metadatas)
        for writer in list(self._beats):  # the writers at work here are alive
            self._beat(writer)

    def _as_stored(self, ids: list[str], vectors: Sequence[Vector]) -> dict[str, Vector]:
        """Each vector as float32, as Chroma keeps it.

        A cosine collection hands a vector back within 2 units in the last place of float32
        (it rounds its own way); cosines from either agree to about 1e-7.
        """
        return {i: np.asarray(v, dtype=np.float32) for i, v in zip(ids, vectors, strict=True)}

    def _write(self, docs: list[Document], ids: list[str], **kwargs: Any) -> Sequence[Vector] | None:
        """Embed with the store's model and write as :meth:`_write_vectors` does, so metadata is replaced.

        With arguments for the store's own ``add_documents``, or no model, the store writes, and
        the keys its records no longer have are removed after.
        """
        if self.embeddings is not None and not kwargs:
            vectors = self._embed([d.page_content for d in docs])
            self._write_vectors(ids, docs, vectors)
            return vectors
        gone = self._gone(ids, docs)
        super()._write(docs, ids, **kwargs)
        stale = [(i, dict.fromkeys(keys)) for i, keys in zip(ids, gone, strict=True) if keys]
        if stale:
            self.collection.update(ids=[i for i, _ in stale], metadatas=[m for _, m in stale])
        return None

    def _gone(self, ids: list[str], docs: list[Document]) -> list[list[str]]:
        """Each record's stored metadata keys that its new version lacks.

        Chroma merges an upsert's metadata into the record it replaces: such a key would stay,
        and filters would go on matching it. Written as None, Chroma removes it.
        """
        got = self.collection.get(ids=ids, include=["metadatas"])
        stored = {i: m or {} for i, m in zip(got["ids"], got["metadatas"], strict=True)}
        return [[k for k in stored.get(i, {}) if k not in d.metadata] for i, d in zip(ids, docs, strict=True)]

    def begin(self) -> str:
        """Leave a record that a writer has begun: :meth:`marked` is None until :meth:`mark` removes it.

        A writer killed after writing a head but before its mark left readers trusting the
        mark they had, and serving what that head no longer commits, until another writer
        finished. With the record, a reader cannot tell what is current while a writer is at
        work, or was killed at it, and reads the store, as a store without marks is read. A
        writer beats the record as it writes (:meth:`_beat`); one that finishes removes its
        own, and any other not beaten for ``STALE_WRITER`` seconds (a writer killed).
        """
        writer = uuid.uuid4().hex
        self._beat(writer, force=True)
        return writer

    def _beat(self, writer: str, *, force: bool = False) -> None:
        """Renew ``writer``'s record's time, at most every ``BEAT`` seconds."""
        now = time.time()
        if force or now - self._beats.get(writer, 0.0) >= BEAT:
            marks = self._mark_collection(create=True)
            marks.upsert(ids=[_PENDING + writer], embeddings=[[0.0]], metadatas=[{_BEAT: now}])
            self._beats[writer] = now

    def mark(self, writer: str | None = None) -> None:
        """Leave a new change mark; remove the record of ``writer``, and of writers long dead."""
        marks = self._mark_collection(create=True)
        marks.upsert(ids=[_MARK], embeddings=[[0.0]], metadatas=[{_MARK: uuid.uuid4().hex}])
        held = marks.get(include=["metadatas"])
        stale = time.time() - STALE_WRITER
        done = [
            i
            for i, m in zip(held["ids"], held["metadatas"], strict=True)
            if i == _PENDING + str(writer) or (i.startswith(_PENDING) and float((m or {}).get(_BEAT, 0)) < stale)
        ]
        if done:
            marks.delete(ids=done)
        self._beats.pop(str(writer), None)

    def marked(self) -> str | None:
        """The mark the last finished writer left: ``""`` before any; None while a writer has not finished.

        Read again only once the database may have changed (:meth:`DataVersion.read`): a read
        costs 300-500 microseconds, a query's tenth.
        """
        if forked():
            return self._read_mark()  # refused
        if self._version is None:
            self._version = DataVersion(self.store._client)  # type: ignore[attr-defined]
        return self._version.read(self._read_mark)

    def _read_mark(self) -> str | None:
        """:meth:`marked`, read from the store."""
        marks = self._mark_collection(create=False)
        if marks is None:
            return ""
        held = marks.get(include=["metadatas"])
        if any(i.startswith(_PENDING) for i in held["ids"]):
            return None
        return next((str(m[_MARK]) for i, m in zip(held["ids"], held["metadatas"], strict=True) if i == _MARK), "")

    def _mark_collection(self, *, create: bool) -> Any:
        """The collection beside the store's that holds its mark; a reader does not create it."""
        collection = self.collection  # refused first in a forked process
        if self._marks is None:
            client = self.store._client  # type: ignore[attr-defined]
            name = f"lcx-marks-{collection.id}"
            if create:
                self._marks = client.get_or_create_collection(name, embedding_function=None)
            else:
                try:
                    self._marks = client.get_collection(name, embedding_function=None)
                except Exception:
                    return None
        return self._marks

    def count(self) -> int | None:
        """How many records the collection holds."""
        return int(self.collection.count())

    def with_vectors(self, ids: Sequence[str]) -> list[tuple[Document, Vector]]:
        """The records with their stored vectors, as rows of one NumPy array.

        Not converted to lists: that conversion was a tenth of a guided query's time.
        """
        if not ids:
            return []
        got = self.collection.get(ids=list(ids), include=["embeddings", "documents", "metadatas"])
        rows = zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True)
        return [(Document(text, metadata=dict(meta or {}), id=i), vec) for i, text, meta, vec in rows]

    def vectors(self, ids: Sequence[str]) -> dict[str, Vector]:
        """The stored vectors, by id, read without their text."""
        if not ids:
            return {}
        got = self.collection.get(ids=list(ids), include=["embeddings"])
        return dict(zip(got["ids"], got["embeddings"], strict=True))

    def where(self, where: dict[str, Any], *, vectors: bool = True) -> list[tuple[Document, Vector | None]] | None:
        """Every record whose metadata matches ``where``, with its vector unless ``vectors`` is False."""
        include = ["documents", "metadatas", *(["embeddings"] if vectors else [])]
        got = self.collection.get(where=where, include=include)
        found = got["embeddings"] if vectors else [None] * len(got["ids"])
        rows = zip(got["ids"], got["documents"], got["metadatas"], found, strict=True)
        return [(Document(text, metadata=dict(meta or {}), id=i), vec) for i, text, meta, vec in rows]

    def pages(self, size: int) -> Iterator[list[Document]] | None:
        """Every record of the collection, ``size`` at a time, without vectors."""
        return self._pages(size)

    def _pages(self, size: int) -> Iterator[list[Document]]:
        for offset in itertools.count(0, size):
            got = self.collection.get(include=["documents", "metadatas"], limit=size, offset=offset)
            rows = zip(got["ids"], got["documents"], got["metadatas"], strict=True)
            yield [Document(text, metadata=dict(meta or {}), id=i) for i, text, meta in rows]
            if len(got["ids"]) < size:
                return

    def search(self, query: str, vector: list[float] | None, k: int, **kwargs: Any) -> Scored:
        """The ``k`` records nearest ``vector``, read in the query itself; records gone are dropped.

        Chroma's index in a process that was running when another deleted records still
        matches them; the query hands them back without text or metadata. They are left out
        and counted in the result's ``matched`` (:class:`Matches`), so over-fetching goes on.
        """
        if vector is None or set(kwargs) - {"filter", "where_document"}:
            return super().search(query, vector, k, **kwargs)

        def fetch(n: int) -> list[tuple[tuple[str, Any, Any], float]]:
            got = self._query(vector, n, kwargs, ["documents", "metadatas", "distances"])
            ids, texts, metas, distances = (
                got[key][0] if got[key] else [] for key in ("ids", "documents", "metadatas", "distances")
            )
            return [((i, t, m), d) for i, t, m, d in zip(ids, texts, metas, distances, strict=True)]

        near = nearest(fetch, min(k, MAX_SEARCH), lambda row: row[0], beam=self.beam)
        found = [
            (Document(text, metadata=dict(meta or {}), id=i), self.relevance(d))
            for (i, text, meta), d in near
            if text is not None  # a record deleted has neither text nor metadata; one written without metadata has text
        ]
        return Matches(found, matched=len(near))

    def search_ids(self, vector: Sequence[float], k: int, **kwargs: Any) -> list[tuple[str, float]] | None:
        """The ids of the ``k`` nearest records, with relevance; their metadata is not read.

        Reading each result's metadata from SQLite is about half of a query's time at k=45,
        which a caller holding the records already can skip. ``kwargs`` are those
        :meth:`search` takes (``filter``, ``where_document``); None for any other.
        """
        if set(kwargs) - {"filter", "where_document"}:
            return None

        def fetch(n: int) -> list[tuple[str, float]]:
            got = self._query(vector, n, kwargs, ["distances"])
            distances = got["distances"][0] if got["distances"] else []
            return list(zip(got["ids"][0], distances, strict=True))

        return [
            (i, self.relevance(d)) for i, d in nearest(fetch, min(k, MAX_SEARCH), str, spare=TIE_SPARE, beam=self.beam)
        ]

    def _query(self, vector: Sequence[float], k: int, kwargs: dict[str, Any], include: list[str]) -> Any:
        """Chroma's nearest ``k`` to ``vector`` (at most ``MAX_SEARCH``), filtered as ``kwargs`` say.

        Raises:
            ValueError: When Chroma refuses the filter; the message shows it and Chroma's syntax.
        """
        where, where_document = kwargs.get("filter") or None, kwargs.get("where_document") or None
        try:
            return self.collection.query(
                query_embeddings=[list(vector)],
                n_results=min(k, MAX_SEARCH),
                where=where,
                where_document=where_document,
                include=include,
            )
        except Exception as exc:
            refused = isinstance(exc, ValueError) or type(exc).__name__ == "InvalidArgumentError"
            if not (refused and "where" in str(exc).lower() and (where or where_document)):
                raise
            shown = where if where_document is None else {"filter": where, "where_document": where_document}
            msg = (
                f"Chroma refused the filter {shown!r} ({exc}). A filter is Chroma's `where` on the units' "
                "metadata (`doc_id` included): {'key': value}, {'key': {'$in': [a, b]}} with $eq, $ne, $gt, "
                "$gte, $lt, $lte, $in or $nin, and {'$and': [...]} or {'$or': [...]} of two or more."
            )
            raise ValueError(msg) from exc
