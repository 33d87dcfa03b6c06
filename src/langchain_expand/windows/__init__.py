"""Sentence-window retrieval: the retriever and the machinery only it uses.

Read in the order a query flows: :mod:`.retriever` (the plan and the budget), :mod:`.hits`
(dense and lexical search, over-fetch), :mod:`.snapshot` and :mod:`.cache` (the in-memory and
local copies a query reads neighbours from), :mod:`.growth` (how a guided window grows),
:mod:`.layout` (how a document is written). BM25 beside the dense search, and the local copies,
are storage: :mod:`langchain_expand.store.lexical`.
"""

from langchain_expand.windows.retriever import SentenceWindowRetriever

__all__ = ["SentenceWindowRetriever"]
