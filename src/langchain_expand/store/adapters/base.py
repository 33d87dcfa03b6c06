"""The adapter's base: what the retrievers need of a vector store, as any LangChain store gives it.

Each store the library knows has its own adapter beside this one (:mod:`.chroma`,
:mod:`.memory`, :mod:`.faiss`, :mod:`.qdrant`), overriding only where that store differs or
can do better; any other store runs on this base.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from typing import Any, TypeAlias

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from langchain_expand.store import filters
from langchain_expand.store.adapters.ties import MAX_SEARCH, tie_ordered
from langchain_expand.store.records import decode_metadata
from langchain_expand.units import DOC_ID, STORED_DOC, STORED_INDEX, STORED_REV

__all__ = [
    "Matches",
    "Scored",
    "StoreAdapter",
    "Vector",
    "as_served",
    "clamped",
    "matched",
    "relevance",
    "renamed_filter",
]

Vector: TypeAlias = "Sequence[float] | np.ndarray"
"""A stored vector: a list, or a NumPy row as the store gives it."""
Scored = list[tuple[Document, float]]
"""Records with their relevance, best first."""


class Matches(list):  # type: ignore[type-arg]
    """A search's results, best first, and ``matched``: how many the store's index matched.

    A store's index may match records that are gone (Chroma's, in a process that was running
    when another deleted them): they are dropped, and ``matched`` still counts them, so that a
    caller over-fetching knows the store has more and asks again.
    """

    def __init__(self, found: Iterable[Any] = (), matched: int | None = None) -> None:
        """``found``; ``matched`` defaults to their number (nothing dropped)."""
        super().__init__(found)
        self.matched = len(self) if matched is None else matched


def matched(found: Sized) -> int:
    """How many records the store matched for ``found``: its ``matched``, else its length."""
    return int(getattr(found, "matched", len(found)))


def relevance(similarity: float) -> float:
    """A similarity as LangChain's relevance: clamped to [0, 1].

    LangChain expects relevance in [0, 1] and warns on every query otherwise; a cosine is
    negative only for texts that point away from the query, which rank last either way.
    """
    return min(1.0, max(0.0, similarity))


def clamped(fn: Callable[[float], float]) -> Callable[[float], float]:
    """``fn``'s relevance, clamped to [0, 1]."""
    return lambda raw: relevance(float(fn(raw)))


class StoreAdapter:
    """A vector store as the retrievers use it: ids kept, writes replacing, relevance in [0, 1].

    The method names are ``VectorStore``'s, with the behaviour :mod:`langchain_expand.store.adapters`
    lists. This base serves any store: it writes and reads through LangChain's interface, embeds
    texts again where vectors are asked for, and keeps no change marks.
    """

    keeps_marks = False
    """Whether the store keeps change marks (:meth:`mark`): what a snapshot of it is keyed by."""
    holds_lists = False
    """Whether the store holds a list of scalars as one metadata value and filters it (Chroma's ``$contains``);
    elsewhere a list is stored as JSON text (:func:`~langchain_expand.store.records.encode_metadata`)."""
    space: str | None = None
    """The distance the store ranks by, where a snapshot can rank as it does (Chroma's); else None."""
    nested_up_to = 0
    """The most results :meth:`search` may be asked for whose first ``k`` are its search for ``k``: how far a
    caller may read ahead (``VectorSearch(ahead=)``); 0 where not known (ties cut at ``k`` in an order of its own)."""

    def __init__(self, store: VectorStore) -> None:
        """Wrap ``store``; see :func:`~langchain_expand.store.adapters.adapt` for what it must implement."""
        self.store = store
        self.relevance = self._relevance_rule()

    def _relevance_rule(self) -> Callable[[float], float]:
        """Raw score to relevance in [0, 1]: the store's own relevance function, clamped."""
        try:
            return clamped(self.store._select_relevance_score_fn())
        except NotImplementedError:
            return clamped(float)

    @property
    def embeddings(self) -> Embeddings | None:
        """The store's embedding model, None for a store without one."""
        return self.store.embeddings

    def check_metadata(self, metadata: dict[str, Any], doc_id: str) -> None:
        """Refuse metadata the store would refuse mid-write, naming the document and the key.

        Called for every document of a batch before the first write, so one bad document
        leaves nothing of the others half-written. This base accepts what encoding accepted.
        """

    # -- writing ---------------------------------------------------------------------------

    def add_documents(
        self,
        documents: Sequence[Document],
        *,
        ids: Sequence[str],
        embedded: Sequence[str] | None = None,
        vectors: Mapping[str, Vector] | None = None,
        keep_vectors: bool = False,
        **kwargs: Any,
    ) -> dict[str, Vector]:
        """Write ``documents`` under ``ids``, replacing records whose id exists.

        ``embedded``: the text to embed for each record, where it is not its ``page_content``
        (a sentence with its context). A store whose adapter can write vectors stores each
        record's own text with that text's vector; any other store embeds ``page_content``
        (and embeds it again when a query asks for vectors, so the two agree).

        ``vectors``: a vector by id, embedded before from the same text (a record whose metadata
        alone is new, :meth:`vectors_at`): such a record is written with it, and only the others
        are embedded, where this adapter can write vectors (:meth:`takes_vectors`); any other
        store embeds every record, as without them.

        With ``keep_vectors``, returns the vectors written, by id, where this adapter embedded
        them (or was given them) and its store keeps them as given (to float32 rounding);
        otherwise, and for any other store, an empty dict.
        """
        docs, ids = list(documents), list(ids)
        if embedded is not None and len(embedded) != len(docs):
            msg = f"`embedded` has {len(embedded)} texts for {len(docs)} documents; give one per document."
            raise ValueError(msg)
        out: dict[str, Vector] = {}
        if vectors and self.takes_vectors():
            given = [j for j, i in enumerate(ids) if i in vectors]
            if given:
                named = [ids[j] for j in given]
                self._write_vectors(named, [docs[j] for j in given], [vectors[i] for i in named])
                out = self._as_stored(named, [vectors[i] for i in named]) if keep_vectors else {}
                rest = [j for j, i in enumerate(ids) if i not in vectors]
                docs, ids = [docs[j] for j in rest], [ids[j] for j in rest]
                embedded = None if embedded is None else [embedded[j] for j in rest]
        if not docs:
            return out
        written: Sequence[Vector] | None = None
        if embedded is not None:
            differs = any(t != d.page_content for t, d in zip(embedded, docs, strict=True))
            if differs and self.embeddings is not None and self.takes_vectors():
                written = self._embed(list(embedded))
                self._write_vectors(ids, docs, written)
        if written is None:
            written = self._write(docs, ids, **kwargs)
        if keep_vectors and written is not None:
            out.update(self._as_stored(ids, written))
        return out

    def _embed(self, texts: list[str]) -> Sequence[Vector]:
        """The store's model's vectors of ``texts``, as :meth:`_write_vectors` takes them (the model's lists here)."""
        assert self.embeddings is not None
        return self.embeddings.embed_documents(texts)

    def takes_vectors(self) -> bool:
        """Whether this adapter writes a vector given for a record (``add_documents(vectors=...)``) as it is.

        Where it does not, the store embeds every record it is given: reading a record's old
        vector to write it again would only cost a read (and, here, an embedding).
        """
        return False

    def _write_vectors(self, ids: list[str], docs: list[Document], vectors: Sequence[Vector]) -> None:
        raise NotImplementedError

    def _write(self, docs: list[Document], ids: list[str], **kwargs: Any) -> Sequence[Vector] | None:
        """Write through LangChain's ``add_documents`` (the store embeds); the vectors written where known."""
        self.store.add_documents(docs, ids=ids, **kwargs)
        return None

    def _as_stored(self, ids: list[str], vectors: Sequence[Vector]) -> dict[str, Vector]:
        """The vectors this adapter embedded and wrote, by id, where the store keeps them as given.

        Empty here: a store may change a vector as it keeps it (Qdrant normalizes for cosine,
        FAISS may), and only a read says how. An adapter whose store keeps them returns them,
        so that indexing need not read back what it has just written.
        """
        return {}

    def delete(self, ids: Sequence[str]) -> None:
        """Delete the records ``ids`` name; unknown ids are skipped."""
        if ids:
            self.store.delete(list(ids))

    def begin(self) -> str | None:
        """Say a writer has begun, so readers trust nothing they hold until it has finished; its token.

        None (a no-op) where the store keeps no marks.
        """
        return None

    def mark(self, writer: str | None = None) -> None:
        """Leave a new change mark: the writer :meth:`begin` named has finished (a no-op where the store keeps none)."""

    def marked(self) -> str | None:
        """The mark the last finished writer left: ``""`` before any, None where the store keeps none."""
        return None

    def count(self) -> int | None:
        """How many records the store holds; None where it cannot say without reading them all."""
        return None

    # -- reading ---------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        """The records ``ids`` name, with their own ids; unknown ids are left out."""
        if not ids:
            return []  # some stores refuse an empty list
        return self._restored(self.store.get_by_ids(list(ids)), ids)

    def holding(self, revisions: dict[str, str]) -> set[str]:
        """Of the ids in ``revisions``, those stored at the revision given for each (their metadata's)."""
        found = self.get_by_ids(list(revisions))
        return {d.id for d in found if d.id is not None and d.metadata.get(STORED_REV) == revisions.get(d.id)}

    def vectors_at(self, ids: Sequence[str], revisions: Mapping[str, Any]) -> dict[str, Vector]:
        """The stored vectors of the records ``ids`` whose document is at its revision in ``revisions``, by id.

        What a document added again with new metadata alone writes again (``add_documents(vectors=...)``):
        its records at the revision its head committed hold the vectors of the text it embeds. A
        record of another revision (an interrupted write's) is left out. Empty where this adapter
        does not write given vectors (:meth:`takes_vectors`): reading them would only cost.
        """
        if not ids or not self.takes_vectors():
            return {}
        kept: dict[str, Vector] = {}
        for record, vector in self.with_vectors(ids):
            meta = record.metadata
            if record.id is not None and meta.get(STORED_REV) == revisions.get(str(meta.get(STORED_DOC))):
                kept[record.id] = vector
        return kept

    def _restored(self, found: list[Document], asked: Sequence[str]) -> list[Document]:
        """The records as the store gave them, with their own ids."""
        return found

    def with_vectors(self, ids: Sequence[str]) -> list[tuple[Document, Vector]]:
        """The records ``ids`` name, each with its stored vector; unknown ids are left out.

        This base embeds their texts again (same vectors, more time); an adapter whose store
        hands vectors back reads them.
        """
        if not ids:
            return []
        docs = self.get_by_ids(ids)
        if self.embeddings is None:
            name = type(self.store).__name__
            msg = f"{name} has no embeddings to score sentences with; give it an embedding function."
            raise ValueError(msg)
        return list(zip(docs, self.embeddings.embed_documents([d.page_content for d in docs]), strict=True))

    def vectors(self, ids: Sequence[str]) -> dict[str, Vector]:
        """The stored vectors of the records ``ids`` name, by id, read without their text.

        Empty for a store that does not hand vectors back (nothing is embedded again).
        """
        return {}

    def where(self, where: dict[str, Any], *, vectors: bool = True) -> list[tuple[Document, Vector | None]] | None:
        """Every record whose metadata matches ``where``, with its vector unless ``vectors`` is False.

        None where the store cannot list records by metadata.
        """
        return None

    def whole_documents(self, where: Any) -> bool:
        """Whether ``where`` (on the units' metadata) picks whole documents in a syntax evaluated in memory.

        Such a filter keeps a query hybrid: BM25 searches within the documents it picks
        (:meth:`documents_where`, or the snapshot's rows). Where it does not (a store's own filter
        object, a key each record sets for itself, a syntax other than Chroma's), the store alone
        applies it, dense only, and a line says so once (INFO).
        """
        if not isinstance(where, dict):
            filters.said_once("filter %r: the store's own filter object; searched by it alone, dense only", where)
            return False
        try:
            filters.whole_documents(self.unit_filter(where))
        except filters.Unsupported as exc:
            filters.said_once("filter %r: searched by the store alone, dense only (%s)", where, exc)
            return False
        return True

    def documents_where(self, where: Any, key: str = STORED_DOC) -> frozenset[str] | None:
        """The documents whose head record passes ``where``, a filter on the units' metadata (:meth:`unit_filter`).

        Every record of a document carries its metadata, so a filter on it picks whole documents:
        what a filtered query's BM25 searches within. Each is named by its head's ``key`` (a
        parent's children name it by the retriever's ``id_key``). None where the store cannot list
        records, logged once.
        """
        heads = self.where({"$and": [self.unit_filter(where), {STORED_INDEX: 0}]}, vectors=False)
        if heads is None:
            filters.said_once(
                "filter on %s: the store lists no records by metadata; searched by it alone, dense only", self
            )
            return None
        return frozenset(str(d.metadata[key]) for d, _ in heads)

    def pages(self, size: int) -> Iterator[list[Document]] | None:
        """Every record, ``size`` at a time, without vectors; None where the store cannot list them."""
        return None

    # -- searching -------------------------------------------------------------------------

    def unit_filter(self, where: Any) -> Any:
        """A filter written on the served units' metadata, as this store's records hold it.

        A unit's ``doc_id`` is stored as ``lcx_doc`` (a child's ``doc_id`` holds its parent's
        key, as the stock retriever writes it), so a dict filter (Chroma's and FAISS's syntax,
        operators and all) has the key renamed at any depth. A store's own filter object
        goes through as written.
        """
        return renamed_filter(where) if isinstance(where, dict) else where

    def search_ids(self, vector: Sequence[float], k: int, **kwargs: Any) -> list[tuple[str, float]] | None:
        """The ids of the ``k`` records nearest ``vector``, with relevance, best first; records not read.

        None where the store always reads the records it finds (the caller searches instead).
        """
        return None

    def search(self, query: str, vector: list[float] | None, k: int, **kwargs: Any) -> Scored:
        """The ``k`` records nearest the query, with relevance in [0, 1], best first.

        By ``vector`` where the store searches by vector (no re-embedding), else by text.
        """
        k = min(k, MAX_SEARCH)
        by_vector = _by_vector_search(self.store)
        if by_vector is None or vector is None:
            found = self.store.similarity_search_with_score(query, k=k, **kwargs)
        else:
            found = by_vector(vector, k=k, **kwargs)
        return tie_ordered([(self._found(doc), self.relevance(raw)) for doc, raw in found], _doc_id)

    def _found(self, doc: Document) -> Document:
        """A search result as the retrievers read it."""
        return doc


def _doc_id(doc: Document) -> str | None:
    return doc.id


def renamed_filter(where: Any) -> Any:
    """A dict filter with each ``doc_id`` key (at any depth) as the records hold it: ``lcx_doc``."""
    if isinstance(where, dict):
        return {(STORED_DOC if key == DOC_ID else key): renamed_filter(value) for key, value in where.items()}
    if isinstance(where, list):
        return [renamed_filter(value) for value in where]
    return where


def as_served(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A record's metadata as its unit serves it: the source's own keys, and ``doc_id``."""
    out = decode_metadata(metadata)
    if STORED_DOC in metadata:
        out[DOC_ID] = metadata[STORED_DOC]
    return out


def _by_vector_search(store: VectorStore) -> Callable[..., Scored] | None:
    """The store's search by vector that returns raw scores, where it has one."""
    if store.embeddings is None:
        return None
    for name in ("similarity_search_by_vector_with_relevance_scores", "similarity_search_with_score_by_vector"):
        method = getattr(store, name, None)
        if callable(method):
            return method  # type: ignore[no-any-return]
    return None
