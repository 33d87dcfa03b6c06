"""A filtered query, kept hybrid: every search narrowed to the documents the filter picks.

A ``filter`` on the units' metadata (the document's own keys and ``doc_id``) picks whole
documents. It is evaluated in memory (:mod:`langchain_expand.store.filters`, Chroma's
semantics) on the heads the query finds held, the snapshot's or those read at the store's
change mark where every one is held; else the store lists the documents that pass. BM25 (in
memory, else the lexical index) and the exact dense search in memory (:meth:`Reads.nearest`)
keep to those documents. A filter this cannot narrow BM25 by (a store's own filter object, a
syntax other than Chroma's) is searched by the store alone, dense only, and logged once.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from langchain_expand.store.adapters import StoreAdapter
from langchain_expand.store.lexical import BaseLexicalIndex, Within
from langchain_expand.windows.bm25 import Bm25Search
from langchain_expand.windows.views import Current

__all__ = ["Scoped", "narrowed"]


class Scoped(NamedTuple):
    """What a query searches besides the store: the views (narrowed to a filter), and the lexical index."""

    current: Current | None
    lexical: BaseLexicalIndex | Within | None


def narrowed(
    vectors: StoreAdapter,
    lexical: BaseLexicalIndex,
    where: dict[str, Any],
    current: Current | None,
) -> Scoped:
    """The query's views and lexical search, narrowed to the documents ``where`` picks (see the module).

    ``where`` has passed :meth:`StoreAdapter.whole_documents`.
    """
    held = None if current is None else current.heads
    doc_ids = None if held is None else held.documents_where(vectors.unit_filter(where))
    if doc_ids is None:
        doc_ids = vectors.documents_where(where)
    if doc_ids is None:
        return Scoped(current, None)
    if current is None:
        return Scoped(None, Within(lexical, doc_ids))
    # The columns serve a sentence whatever the filter, at its document's revision.
    ranked = None if current.bm25 is None else current.bm25.bm25
    bm25 = None if ranked is None or ranked.documents is None else Bm25Search(ranked, ranked.documents(doc_ids))
    return Scoped(current._replace(bm25=bm25, documents=doc_ids), Within(lexical, doc_ids))
