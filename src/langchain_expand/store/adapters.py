"""One face for every vector store: what the retrievers need, the same on each.

The retrievers ask a vector store for five things: write records under their own ids
(replacing a record whose id exists), read records by id, read records with their stored
vectors, delete by id, and search by vector with a relevance score. LangChain's stores
differ on each, so :class:`StoreAdapter` wraps the user's store and smooths them:

* **Relevance in [0, 1], equal to the cosine similarity** for unit-length embeddings (the
  bundled MiniLM normalises; most hosted models do), whatever the store's distance:

  ======================  ============================  ====================
  store, distance         raw score                     relevance
  ======================  ============================  ====================
  Chroma cosine / ip      ``1 - cos``                   ``1 - d``
  Chroma l2 (default)     squared L2 ``2 - 2 cos``      ``1 - d / 2``
  FAISS euclidean         squared L2                    ``1 - d / 2``
  FAISS inner product     ``cos``                       ``d``
  Qdrant cosine / dot     ``cos``                       ``d``
  Qdrant euclid           L2 ``sqrt(2 - 2 cos)``        ``1 - d^2 / 2``
  InMemoryVectorStore     ``cos``                       ``d``
  any other store         its own relevance function
  ======================  ============================  ====================

  each clamped to [0, 1]. LangChain's own functions for L2 (``1 - d / sqrt 2``) go below
  zero for a third of a typical ranking, and warn on every query.
* **Ids.** Qdrant accepts only UUIDs and integers: each id is written as a UUID derived
  from it (``uuid5``), the original kept in the record's metadata and handed back as
  ``Document.id``. FAISS refuses an id it holds and fails to delete one it does not:
  writes replace, deletes skip unknown ids.
* **Stored vectors.** Chroma, FAISS, Qdrant and ``InMemoryVectorStore`` hand them back;
  any other store has the texts embedded again (same vectors, more time). The same four
  take a record's text with the vector of another text (a sentence embedded with its
  context, :mod:`langchain_expand.text.context`); any other store embeds the record's own text.
* **A change mark** (Chroma only): every writer that finishes leaves a new random mark in
  a small collection beside the store's, so a reader learns in one read whether anything
  was written since it last looked (:meth:`StoreAdapter.marked`).

A store that lacks a by-id read or a delete cannot keep a document's units consistent;
:func:`adapt` refuses it when the retriever is built, naming what is missing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

Vector: TypeAlias = "Sequence[float] | np.ndarray"
"""A stored vector: a list, or a NumPy row as the store gives it."""

__all__ = ["StoreAdapter", "adapt", "relevance_rule"]

Scored = list[tuple[Document, float]]

ID_KEY = "lcx_id"
"""Metadata key holding a record's own id in stores that rename ids (Qdrant)."""
_QDRANT_EXTRA = ("_id", "_collection_name")
"""Keys ``langchain-qdrant`` adds to every record's metadata on the way out."""
_MARK = "mark"
"""The change mark's record id and metadata key, in the collection beside the store's."""
_ID_NAMESPACE = uuid.UUID("7f6d1c2e-6a1b-5c3e-9f3a-1d2b3c4d5e6f")


def adapt(store: VectorStore, owner: str) -> StoreAdapter:
    """``store`` behind the adapter, or an error naming what the retriever needs and it lacks."""
    missing = [
        name for name in ("get_by_ids", "delete") if getattr(type(store), name, None) is getattr(VectorStore, name)
    ]
    if missing:
        msg = (
            f"{owner} cannot run on {type(store).__name__}: it does not implement "
            f"{' and '.join(f'`{m}`' for m in missing)}, which the retriever needs to read a "
            "document's units by id and to replace them. Use a store that does (Chroma, FAISS, "
            "Qdrant, InMemoryVectorStore, PGVector, ...)."
        )
        raise TypeError(msg)
    return StoreAdapter(store)


def _kind(store: VectorStore) -> str:
    name = type(store).__name__
    if callable(getattr(getattr(store, "_collection", None), "get", None)):
        return "chroma"
    if name == "FAISS" and hasattr(store, "index_to_docstore_id"):
        return "faiss"
    if name in ("QdrantVectorStore", "Qdrant") and hasattr(store, "client"):
        return "qdrant"
    if isinstance(getattr(store, "store", None), dict) and name == "InMemoryVectorStore":
        return "memory"
    return "other"


def relevance(similarity: float) -> float:
    """A similarity as LangChain's relevance: clamped to [0, 1].

    LangChain expects relevance in [0, 1] and warns on every query otherwise; a cosine is
    negative only for texts that point away from the query, which rank last either way.
    """
    return min(1.0, max(0.0, similarity))


def _clamped(fn: Callable[[float], float]) -> Callable[[float], float]:
    return lambda raw: relevance(float(fn(raw)))


def relevance_rule(store: VectorStore) -> Callable[[float], float]:
    """Raw score to relevance in [0, 1] for ``store``, by the table in the module docstring."""
    kind = _kind(store)
    if kind == "chroma":
        if getattr(store, "override_relevance_score_fn", None) is not None:
            return _clamped(store.override_relevance_score_fn)  # type: ignore[attr-defined]
        space = _chroma_space(store)
        return _clamped(lambda d: 1.0 - d / 2.0) if space == "l2" else _clamped(lambda d: 1.0 - d)
    if kind == "faiss":
        if getattr(store, "override_relevance_score_fn", None) is not None:
            return _clamped(store.override_relevance_score_fn)  # type: ignore[attr-defined]
        strategy = str(getattr(store, "distance_strategy", "")).upper()
        if "EUCLIDEAN" in strategy:
            return _clamped(lambda d: 1.0 - d / 2.0)
        if "INNER_PRODUCT" in strategy:
            return _clamped(float)
    if kind == "qdrant":
        distance = str(getattr(store, "distance", "")).upper()
        if "EUCLID" in distance:
            return _clamped(lambda d: 1.0 - d * d / 2.0)
        return _clamped(float)
    if kind == "memory":
        return _clamped(float)
    try:
        return _clamped(store._select_relevance_score_fn())
    except NotImplementedError:
        return _clamped(float)


def _chroma_space(store: VectorStore) -> str:
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


class StoreAdapter:
    """A vector store as the retrievers use it: ids kept, writes replacing, relevance in [0, 1].

    The method names are ``VectorStore``'s, with the behaviour the module docstring lists.
    """

    def __init__(self, store: VectorStore) -> None:
        """Wrap ``store``; see :func:`adapt` for the check of what it must implement."""
        self.store = store
        self.kind = _kind(store)
        self.relevance = relevance_rule(store)
        self.space = _chroma_space(store) if self.kind == "chroma" else None
        self._marks: Any = None

    @property
    def embeddings(self) -> Embeddings | None:
        """The store's embedding model, None for a store without one."""
        return self.store.embeddings

    # -- ids -----------------------------------------------------------------------------

    def _out_id(self, own: str) -> str:
        return str(uuid.uuid5(_ID_NAMESPACE, own)) if self.kind == "qdrant" else own

    def _restored(self, doc: Document, asked: str | None = None) -> Document:
        """``doc`` with its own id and without the keys the store added."""
        if self.kind == "qdrant":
            meta = {k: v for k, v in doc.metadata.items() if k not in _QDRANT_EXTRA and k != ID_KEY}
            return Document(doc.page_content, metadata=meta, id=doc.metadata.get(ID_KEY, asked))
        if doc.id is None and asked is not None:
            return Document(doc.page_content, metadata=doc.metadata, id=asked)
        return doc

    # -- writing ---------------------------------------------------------------------------

    def add_documents(
        self,
        documents: Sequence[Document],
        *,
        ids: Sequence[str],
        embedded: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """Write ``documents`` under ``ids``, replacing records whose id exists.

        ``embedded``: the text to embed for each record, where it is not its ``page_content``
        (a sentence with its context). Chroma, FAISS, Qdrant (dense) and ``InMemoryVectorStore``
        store each record's own text with that text's vector; any other store embeds
        ``page_content`` (and embeds it again when a query asks for vectors, so the two agree).
        """
        docs = list(documents)
        if embedded is not None and self._add_embedded(docs, ids, embedded):
            return
        if self.kind == "qdrant":
            docs = [
                Document(d.page_content, metadata={**d.metadata, ID_KEY: i}) for d, i in zip(docs, ids, strict=True)
            ]
        if self.kind == "faiss":
            self.delete(list(ids))
        self.store.add_documents(docs, ids=[self._out_id(i) for i in ids], **kwargs)

    def _add_embedded(self, docs: list[Document], ids: Sequence[str], embedded: Sequence[str]) -> bool:
        """Write ``docs`` with the vectors of ``embedded``; False where the store cannot take vectors."""
        if len(embedded) != len(docs):
            msg = f"`embedded` has {len(embedded)} texts for {len(docs)} documents; give one per document."
            raise ValueError(msg)
        if all(t == d.page_content for t, d in zip(embedded, docs, strict=True)):
            return False
        store: Any = self.store
        if self.kind == "qdrant":
            from langchain_qdrant import RetrievalMode

            if getattr(store, "retrieval_mode", None) != RetrievalMode.DENSE:
                return False
        elif self.kind not in ("chroma", "memory", "faiss"):
            return False
        if self.embeddings is None:
            return False
        vectors = self.embeddings.embed_documents(list(embedded))
        texts = [d.page_content for d in docs]
        metadatas = [dict(d.metadata) for d in docs]
        if self.kind == "chroma":
            store._collection.upsert(ids=list(ids), embeddings=vectors, documents=texts, metadatas=metadatas)
        elif self.kind == "memory":
            for id_, text, meta, vector in zip(ids, texts, metadatas, vectors, strict=True):
                store.store[id_] = {"id": id_, "vector": vector, "text": text, "metadata": meta}
        elif self.kind == "faiss":
            self.delete(list(ids))
            store.add_embeddings(list(zip(texts, vectors, strict=True)), metadatas=metadatas, ids=list(ids))
        else:
            from qdrant_client import models

            points = [
                models.PointStruct(
                    id=self._out_id(id_),
                    vector={store.vector_name: vector},
                    payload={store.content_payload_key: text, store.metadata_payload_key: {**meta, ID_KEY: id_}},
                )
                for id_, text, meta, vector in zip(ids, texts, metadatas, vectors, strict=True)
            ]
            store.client.upsert(collection_name=store.collection_name, points=points)
        return True

    def delete(self, ids: Sequence[str]) -> None:
        """Delete the records ``ids`` name; unknown ids are skipped."""
        if self.kind == "faiss":
            held = set(self.store.index_to_docstore_id.values())  # type: ignore[attr-defined]
            ids = [i for i in ids if i in held]
        if ids:
            self.store.delete([self._out_id(i) for i in ids])

    def mark(self) -> None:
        """Leave a new change mark: a writer has finished (a no-op where the store keeps none)."""
        marks = self._mark_collection(create=True)
        if marks is not None:
            marks.upsert(ids=[_MARK], embeddings=[[0.0]], metadatas=[{_MARK: uuid.uuid4().hex}])

    @property
    def keeps_marks(self) -> bool:
        """Whether the store keeps change marks (:meth:`mark`): what a snapshot of it is keyed by."""
        return self.kind == "chroma"

    def count(self) -> int | None:
        """How many records the store holds; None where it cannot say without reading them all."""
        if self.kind == "chroma":
            return int(self.store._collection.count())  # type: ignore[attr-defined]
        if self.kind == "memory":
            return len(self.store.store)  # type: ignore[attr-defined]
        return None

    def marked(self) -> str | None:
        """The mark the last finished writer left: ``""`` before any, None where the store keeps none."""
        if not self.keeps_marks:
            return None
        marks = self._mark_collection(create=False)
        if marks is None:
            return ""
        got = marks.get(ids=[_MARK], include=["metadatas"])
        return str(got["metadatas"][0][_MARK]) if got["ids"] else ""

    def _mark_collection(self, *, create: bool) -> Any:
        """The collection beside the store's that holds its mark (Chroma only); a reader does not create it."""
        if self.kind != "chroma":
            return None
        if self._marks is None:
            client = self.store._client  # type: ignore[attr-defined]
            name = f"lcx-marks-{self.store._collection.id}"  # type: ignore[attr-defined]
            if create:
                self._marks = client.get_or_create_collection(name, embedding_function=None)
            else:
                try:
                    self._marks = client.get_collection(name, embedding_function=None)
                except Exception:
                    return None
        return self._marks

    # -- reading ---------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        """The records ``ids`` name, with their own ids; unknown ids are left out."""
        if not ids:
            return []  # Chroma refuses an empty list
        if self.kind == "qdrant":
            return [self._restored(d) for d in self.store.get_by_ids([self._out_id(i) for i in ids])]
        found = self.store.get_by_ids(list(ids))
        if self.kind == "faiss":  # FAISS hands back records without ids, in the order asked
            return [self._restored(d, i) for d, i in zip(found, [i for i in ids if self._faiss_has(i)], strict=True)]
        return found

    def _faiss_has(self, id_: str) -> bool:
        return isinstance(self.store.docstore.search(id_), Document)  # type: ignore[attr-defined]

    def with_vectors(self, ids: Sequence[str]) -> list[tuple[Document, Vector]]:
        """The records ``ids`` name, each with its stored vector; unknown ids are left out.

        Vectors come as the store holds them (Chroma: rows of one NumPy array, not converted
        to lists: that conversion was a tenth of a guided query's time).
        """
        if not ids:
            return []
        if self.kind == "chroma":
            got = self.store._collection.get(ids=list(ids), include=["embeddings", "documents", "metadatas"])  # type: ignore[attr-defined]
            rows = zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True)
            return [(Document(text, metadata=dict(meta or {}), id=i), vec) for i, text, meta, vec in rows]
        if self.kind == "memory":  # id -> {"id", "text", "metadata", "vector"}
            held = self.store.store  # type: ignore[attr-defined]
            found = [held[i] for i in ids if i in held]
            return [(Document(r["text"], metadata=dict(r["metadata"]), id=r["id"]), list(r["vector"])) for r in found]
        if self.kind == "faiss":
            position = {v: k for k, v in self.store.index_to_docstore_id.items()}  # type: ignore[attr-defined]
            docs = self.get_by_ids([i for i in ids if i in position])
            index = self.store.index  # type: ignore[attr-defined]
            return [(d, index.reconstruct(position[d.id])) for d in docs]
        if self.kind == "qdrant":
            return self._qdrant_vectors(ids)
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
        if not ids:
            return {}
        if self.kind == "chroma":
            got = self.store._collection.get(ids=list(ids), include=["embeddings"])  # type: ignore[attr-defined]
            return dict(zip(got["ids"], got["embeddings"], strict=True))
        if self.kind in ("memory", "faiss", "qdrant"):
            return {d.id: v for d, v in self.with_vectors(ids) if d.id is not None}
        return {}

    def where(self, where: dict[str, Any], *, vectors: bool = True) -> list[tuple[Document, Vector | None]] | None:
        """Every record whose metadata matches ``where``, with its vector unless ``vectors`` is False.

        Chroma only; None elsewhere.
        """
        if self.kind != "chroma":
            return None
        include = ["documents", "metadatas", *(["embeddings"] if vectors else [])]
        got = self.store._collection.get(where=where, include=include)  # type: ignore[attr-defined]
        found = got["embeddings"] if vectors else [None] * len(got["ids"])
        rows = zip(got["ids"], got["documents"], got["metadatas"], found, strict=True)
        return [(Document(text, metadata=dict(meta or {}), id=i), vec) for i, text, meta, vec in rows]

    def _qdrant_vectors(self, ids: Sequence[str]) -> list[tuple[Document, Vector]]:
        store: Any = self.store
        points = store.client.retrieve(
            store.collection_name, [self._out_id(i) for i in ids], with_payload=True, with_vectors=True
        )
        out: list[tuple[Document, Vector]] = []
        for point in points:
            payload = point.payload or {}
            meta = dict(payload.get(store.metadata_payload_key) or {})
            doc = Document(payload.get(store.content_payload_key, ""), metadata=meta)
            vector = point.vector[store.vector_name] if isinstance(point.vector, dict) else point.vector
            out.append((self._restored(doc), [float(x) for x in vector]))
        return out

    def search_ids(self, vector: Sequence[float], k: int, **kwargs: Any) -> list[tuple[str, float]] | None:
        """The ids of the ``k`` records nearest ``vector``, with relevance, best first; records not read.

        Chroma only (None elsewhere): it reads each result's metadata from SQLite (about half
        of a query's time at k=45), which a caller holding the records already can skip.
        ``kwargs`` are those :meth:`search` takes (``filter``, ``where_document``).
        """
        if self.kind != "chroma" or set(kwargs) - {"filter", "where_document"}:
            return None
        got = self.store._collection.query(  # type: ignore[attr-defined]
            query_embeddings=[list(vector)],
            n_results=k,
            where=kwargs.get("filter") or None,
            where_document=kwargs.get("where_document") or None,
            include=["distances"],
        )
        distances = got["distances"][0] if got["distances"] else []
        return [(i, self.relevance(d)) for i, d in zip(got["ids"][0], distances, strict=True)]

    def search(self, query: str, vector: list[float] | None, k: int, **kwargs: Any) -> Scored:
        """The ``k`` records nearest the query, with relevance in [0, 1], best first.

        By ``vector`` where the store searches by vector (no re-embedding), else by text.
        """
        by_vector = _by_vector_search(self.store)
        if by_vector is None or vector is None:
            found = self.store.similarity_search_with_score(query, k=k, **kwargs)
        else:
            found = by_vector(vector, k=k, **kwargs)
        return [(self._restored(doc), self.relevance(raw)) for doc, raw in found]


def _by_vector_search(store: VectorStore) -> Callable[..., Scored] | None:
    """The store's search by vector that returns raw scores, where it has one."""
    if store.embeddings is None:
        return None
    for name in ("similarity_search_by_vector_with_relevance_scores", "similarity_search_with_score_by_vector"):
        method = getattr(store, name, None)
        if callable(method):
            return method  # type: ignore[no-any-return]
    return None
