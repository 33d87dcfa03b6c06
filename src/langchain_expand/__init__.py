"""Match small, return big: sentence windows and parent documents inside a token budget."""

from __future__ import annotations

from typing import Any

from langchain_expand.budget import BudgetReport, FitToBudget, fit_to_budget
from langchain_expand.merge import MergeOverlaps, merge_overlaps
from langchain_expand.parents.retriever import BudgetedParentDocumentRetriever
from langchain_expand.policy import BudgetPolicy
from langchain_expand.prompt import count_prompt_tokens, format_docs
from langchain_expand.rerank import (
    EmbeddingsReranker,
    Expandable,
    RerankThenExpand,
    rerank,
    rerank_then_expand_chain,
)
from langchain_expand.store.defaults import chroma_store, default_embeddings
from langchain_expand.store.docstore import SQLDocStore
from langchain_expand.store.pglexical import PostgresLexicalIndex
from langchain_expand.store.sqlite import LexicalIndex
from langchain_expand.text.prefixes import EmbeddingPrefix, StructuralPrefix
from langchain_expand.text.ranges import window_bounds
from langchain_expand.text.sections import MarkdownSectionSplitter, SectionSplitter
from langchain_expand.text.sentences import SentenceSplitter, Span, Splitter
from langchain_expand.text.tokens import TokenCounter
from langchain_expand.version import VERSION
from langchain_expand.windows.performance import Performance
from langchain_expand.windows.retriever import SentenceWindowRetriever

__version__ = VERSION

__all__ = [
    "BudgetPolicy",
    "BudgetReport",
    "BudgetedParentDocumentRetriever",
    "EmbeddingPrefix",
    "EmbeddingsReranker",
    "Expandable",
    "FitToBudget",
    "LexicalIndex",
    "MarkdownSectionSplitter",
    "MergeOverlaps",
    "Performance",
    "PostgresLexicalIndex",
    "RerankThenExpand",
    "SQLDocStore",
    "SectionSplitter",
    "SentenceSplitter",
    "SentenceWindowRetriever",
    "Span",
    "Splitter",
    "StructuralPrefix",
    "TokenCounter",
    "chroma_store",
    "count_prompt_tokens",
    "default_embeddings",
    "fit_to_budget",
    "format_docs",
    "merge_overlaps",
    "rerank",
    "rerank_then_expand_chain",
    "window_bounds",
]

_RENAMED = {"SentenceContext": "EmbeddingPrefix", "StructuralContext": "StructuralPrefix"}
"""Old public names, still importable with a warning: "context" now means the prompt's only."""


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        from langchain_expand.calls import deprecated

        deprecated(f"langchain_expand.{name} is now {_RENAMED[name]}; the old name will be removed.")
        return globals()[_RENAMED[name]]
    msg = f"module 'langchain_expand' has no attribute {name!r}"
    raise AttributeError(msg)
