"""A filtered query, kept hybrid: the snapshot and BM25 narrowed to the documents the filter picks.

A ``filter`` on the units' metadata (the document's own keys and ``doc_id``) picks whole
documents. With a snapshot it is evaluated in memory on each head
(:mod:`langchain_expand.store.filters`, Chroma's semantics) and the dense search and BM25 keep
those rows alone. Without one, it is evaluated on the heads held at the store's change mark
where they are all held (else the store lists the documents that pass); BM25 in memory (past
the limit), else the lexical index, ranks within those documents, and past the limit the dense
search is exact in growth's figures where they hold them (:meth:`Reads.nearest`). A filter
this cannot narrow BM25 by (a store's own filter object, a syntax other than Chroma's) is
searched by the store alone, dense only, and logged once.
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
    held = None if current is None else current.snapshot
    if held is not None:
        rows = held.within(vectors.unit_filter(where))
        return Scoped(Current(held, Bm25Search(held.bm25, rows), None, rows=rows), lexical)
    heads = None if current is None else current.heads
    doc_ids = None if heads is None else heads.documents_where(vectors.unit_filter(where))
    if doc_ids is None:
        doc_ids = vectors.documents_where(where)
    if doc_ids is None:
        return Scoped(current, None)
    if current is None or current.heads is None:
        return Scoped(None, Within(lexical, doc_ids))
    # Growth's figures serve a sentence whatever the filter, at its document's revision.
    ranked = None if current.bm25 is None else current.bm25.bm25
    bm25 = None if ranked is None or ranked.documents is None else Bm25Search(ranked, ranked.documents(doc_ids))
    return Scoped(Current(None, bm25, current.heads, current.figures, documents=doc_ids), Within(lexical, doc_ids))
