"""One face for every vector store: what the retrievers need, the same on each.

The retrievers ask a vector store for five things: write records under their own ids
(replacing a record whose id exists), read records by id, read records with their stored
vectors, delete by id, and search by vector with a relevance score. LangChain's stores
differ on each, so :func:`adapt` wraps the user's store in its adapter, one per store
(:mod:`.chroma`, :mod:`.memory`, :mod:`.faiss`, :mod:`.qdrant`; any other store runs on
:mod:`.base`), and each smooths what its store does differently:

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
  take a record's text with the vector of another text (a sentence embedded after its
  prefix, :mod:`langchain_expand.text.prefixes`); any other store embeds the record's own text.
* **A change mark** (Chroma only): every writer that finishes leaves a new random mark in
  a small collection beside the store's, so a reader learns in one read whether anything
  was written since it last looked (:meth:`StoreAdapter.marked`).

A store that lacks a by-id read or a delete cannot keep a document's units consistent;
:func:`adapt` refuses it when the retriever is built, naming what is missing.
"""

from __future__ import annotations

from langchain_core.vectorstores import VectorStore

from langchain_expand.store.adapters.base import Scored, StoreAdapter, Vector, relevance

__all__ = ["Scored", "StoreAdapter", "Vector", "adapt", "collection_name", "relevance"]


def adapt(store: VectorStore, owner: str) -> StoreAdapter:
    """``store`` behind its adapter, or an error naming what the retriever needs and it lacks."""
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
    return _adapter_class(store)(store)


def collection_name(store: VectorStore) -> str | None:
    """The name of the collection ``store`` writes (Chroma's, Qdrant's, PGVector's ``collection_name``); else None."""
    named = getattr(getattr(store, "_collection", None), "name", None) or getattr(store, "collection_name", None)
    return named if isinstance(named, str) else None


def _adapter_class(store: VectorStore) -> type[StoreAdapter]:
    """The adapter written for ``store``'s class, recognised by what it holds; the base for any other."""
    name = type(store).__name__
    if callable(getattr(getattr(store, "_collection", None), "get", None)):
        from langchain_expand.store.adapters.chroma import ChromaAdapter

        return ChromaAdapter
    if name == "FAISS" and hasattr(store, "index_to_docstore_id"):
        from langchain_expand.store.adapters.faiss import FaissAdapter

        return FaissAdapter
    if name in ("QdrantVectorStore", "Qdrant") and hasattr(store, "client"):
        from langchain_expand.store.adapters.qdrant import QdrantAdapter

        return QdrantAdapter
    if isinstance(getattr(store, "store", None), dict) and name == "InMemoryVectorStore":
        from langchain_expand.store.adapters.memory import MemoryAdapter

        return MemoryAdapter
    return StoreAdapter
