"""Moving an index the stock ``ParentDocumentRetriever`` built onto :class:`BudgetedParentDocumentRetriever`.

The stock class writes children that carry only their parent's key (``id_key``) and parents
under random keys, with no document id, offsets or version: this class cannot serve them (it
could not tell a half-written document from a whole one), and skips them with a warning that
names :func:`migrate_stock_index`. Migrating adds the documents again with this class first,
so the index never answers with nothing, then removes the stock records: every child that
carries no document id of this class's, and every parent they name that is still the stock one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.documents import Document
from langchain_core.stores import BaseStore

from langchain_expand.units import DOC_ID, STORED_DOC

if TYPE_CHECKING:
    from langchain_expand.store.adapters import StoreAdapter

__all__ = ["Migrated", "is_stock_child", "is_stock_parent", "migrate_stock_index"]

_PAGE = 1_000


@dataclass(frozen=True)
class Migrated:
    """What :func:`migrate_stock_index` did."""

    documents: int
    """Documents added with this class."""
    children_removed: int
    """Stock children deleted from the vector store."""
    parents_removed: int
    """Stock parents deleted from the docstore."""


class _Retriever(Protocol):
    """What migrating reads of :class:`~langchain_expand.BudgetedParentDocumentRetriever`."""

    id_key: str
    docstore: BaseStore[str, Document]
    parent_splitter: Any

    def add_documents(self, documents: list[Document]) -> list[str]: ...


def is_stock_parent(parent: Document) -> bool:
    """A parent the stock class wrote: the docstore holds it without the document id this class adds.

    Such a parent is never served either way (no head can be found for it); this names the cause.
    """
    return DOC_ID not in parent.metadata


def is_stock_child(child: Document, id_key: str) -> bool:
    """A child the stock class wrote: its parent's key, and no document id of this class's."""
    return id_key in child.metadata and STORED_DOC not in child.metadata


def migrate_stock_index(
    retriever: _Retriever, vectors: StoreAdapter, documents: Sequence[Document] | None = None
) -> Migrated:
    """Re-add a stock index's documents with ``retriever``, then remove the stock records.

    Args:
        retriever: This class, over the vector store and docstore the stock class filled.
        vectors: The retriever's vector store, adapted.
        documents: The source documents. Without them, the stock parents are added back as
            documents (each under its docstore key, the id the stock class was given or drew),
            which is exact only where the stock class had no ``parent_splitter``: its parents
            were then the documents themselves.

    Raises:
        ValueError: When the store cannot list its records, or when ``documents`` is needed.
    """
    pages = vectors.pages(_PAGE)
    if pages is None:
        msg = (
            f"{type(vectors.store).__name__} cannot list its records, so the stock children cannot be "
            "found. Build a fresh collection and docstore and add the documents to them with this class."
        )
        raise ValueError(msg)
    children = [d for page in pages for d in page if is_stock_child(d, retriever.id_key)]
    keys = list(dict.fromkeys(str(c.metadata[retriever.id_key]) for c in children))
    if documents is None:
        if retriever.parent_splitter is not None:
            msg = (
                "The stock index holds parent chunks, not the documents they were cut from (this retriever has a "
                "parent_splitter): pass the source documents, migrate_stock_index(documents)."
            )
            raise ValueError(msg)
        stored = retriever.docstore.mget(keys)
        documents = [
            Document(doc.page_content, metadata=dict(doc.metadata), id=key)
            for key, doc in zip(keys, stored, strict=True)
            if doc is not None
        ]
    retriever.add_documents(list(documents))
    vectors.delete([str(c.id) for c in children if c.id is not None])
    # a stock key may now hold this class's parent (a document added back under its key): keep those
    now = retriever.docstore.mget(keys)
    still_stock = [key for key, doc in zip(keys, now, strict=True) if doc is not None and is_stock_parent(doc)]
    retriever.docstore.mdelete(still_stock)
    return Migrated(len(documents), len(children), len(still_stock))
