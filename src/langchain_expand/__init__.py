"""Match small, return big: sentence windows and parent documents inside a token budget."""

from __future__ import annotations

from langchain_expand.sentences import SentenceSplitter, Span, Splitter
from langchain_expand.stores import chroma_store, default_embeddings
from langchain_expand.tokens import TokenCounter
from langchain_expand.windows import SentenceWindowRetriever, window_bounds

__all__ = [
    "SentenceSplitter",
    "SentenceWindowRetriever",
    "Span",
    "Splitter",
    "TokenCounter",
    "chroma_store",
    "default_embeddings",
    "window_bounds",
]
