"""Sentence-window retrieval: the retriever and the machinery only it uses.

Read in the order a query flows: :mod:`.retriever` (the fields, one call's wiring) and
:mod:`.plan` (the call's settings); :mod:`.views` (what is held at the store's change mark:
:mod:`.columns`, :mod:`.bm25`, the heads of :mod:`.cache`) and :mod:`.scope`
(a filter); :mod:`.reads` (the query's reads of sentences, each at its revision); :mod:`.hits`
(the fused ranking); :mod:`.answer` (windows by shape: guided growth in :mod:`.guided`,
:mod:`.growth` and :mod:`.regions`); :mod:`.assembly` (a window's text and token count).
Writes: :mod:`.indexing` and :mod:`.layout`. What is held in memory: :mod:`.performance`.
"""

from langchain_expand.windows.retriever import SentenceWindowRetriever

__all__ = ["SentenceWindowRetriever"]
