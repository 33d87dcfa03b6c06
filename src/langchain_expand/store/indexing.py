"""LangChain's indexing API on both retrievers: ``index(docs, record_manager, retriever, ...)``.

LangChain's :func:`~langchain_core.indexing.index` writes into a ``VectorStore`` or a
``DocumentIndex`` and keeps a ``RecordManager`` of what it wrote, so that a run again writes
only what changed and removes what the source no longer holds (``cleanup="incremental"``,
``"full"``). Given a retriever's vector store it would write whole documents beside the
units, which the retriever never reads; given the retriever, it writes through
:class:`DocumentIndexed`: each document is added as ``add_documents`` adds it (split,
embedded and committed under its id) and deleted whole.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.indexing.base import DeleteResponse, DocumentIndex, UpsertResponse

from langchain_expand import calls
from langchain_expand.store.commit import checked_ids

__all__ = ["DocumentIndexed"]


class DocumentIndexed(DocumentIndex):
    """LangChain's ``DocumentIndex`` for a retriever that adds, deletes and rebuilds whole documents.

    ``upsert`` is ``add_documents`` under each ``Document.id`` (a hash of the text where it has
    none), ``delete`` removes every unit of the documents named, and ``get`` rebuilds each
    document from what is stored.
    """

    @abstractmethod
    def add_documents(self, documents: Sequence[Document], ids: Sequence[str] | None = None) -> list[str]:
        """Store ``documents``, replacing earlier versions; their ids."""

    @abstractmethod
    def _delete_documents(self, ids: list[str]) -> list[str]:
        """Remove the documents ``ids``; those that had anything stored."""

    @abstractmethod
    def _stored_documents(self, ids: list[str]) -> list[Document]:
        """The stored documents of ``ids`` (unknown ids left out), each with its id."""

    def upsert(self, items: Sequence[Document], /, **kwargs: Any) -> UpsertResponse:
        """Add ``items`` (``add_documents``), each under its ``id``: a document stored under it is replaced.

        Raises:
            ValueError: As ``add_documents`` does; nothing is written then.
        """
        calls.reject_unknown(f"{type(self).__name__}.upsert", kwargs, ())
        return {"succeeded": self.add_documents(list(items)), "failed": []}

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> DeleteResponse:
        """Remove every unit of the documents ``ids``; unknown ids are ignored, and not counted.

        Raises:
            ValueError: Without ``ids`` (LangChain's contract: nothing is deleted by default).
        """
        calls.reject_unknown(f"{type(self).__name__}.delete", kwargs, ())
        if ids is None:  # LangChain's contract: a ValueError, and nothing deleted by default
            msg = "delete takes a list of document ids, got None: name the documents to remove, e.g. delete(['a.md'])."
            raise ValueError(msg)
        deleted = self._delete_documents(checked_ids(ids))
        return {"num_deleted": len(deleted), "succeeded": deleted, "num_failed": 0, "failed": []}

    def get(self, ids: Sequence[str], /, **kwargs: Any) -> list[Document]:
        """The stored documents ``ids`` name, text and metadata rebuilt from their units; unknown ids left out."""
        calls.reject_unknown(f"{type(self).__name__}.get", kwargs, ())
        return self._stored_documents(checked_ids(ids))
