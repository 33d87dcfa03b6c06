"""Match small, return big: sentence windows and parent documents inside a token budget."""

from __future__ import annotations

from langchain_expand.budget import BudgetReport, FitToBudget, count_prompt_tokens, fit_to_budget, format_docs
from langchain_expand.context import SentenceContext, StructuralContext
from langchain_expand.docstore import SQLDocStore
from langchain_expand.lexical import LexicalIndex
from langchain_expand.parents import BudgetedParentDocumentRetriever
from langchain_expand.pglexical import PostgresLexicalIndex
from langchain_expand.ranges import window_bounds
from langchain_expand.rerank import (
    EmbeddingsReranker,
    Expandable,
    RerankThenExpand,
    rerank,
    rerank_then_expand_chain,
)
from langchain_expand.sections import MarkdownSectionSplitter, SectionSplitter
from langchain_expand.sentences import SentenceSplitter, Span, Splitter
from langchain_expand.spans import MergeOverlaps, merge_overlaps
from langchain_expand.stores import chroma_store, default_embeddings
from langchain_expand.tokens import TokenCounter
from langchain_expand.windows import SentenceWindowRetriever

__all__ = [
    "BudgetReport",
    "BudgetedParentDocumentRetriever",
    "EmbeddingsReranker",
    "Expandable",
    "FitToBudget",
    "LexicalIndex",
    "MarkdownSectionSplitter",
    "MergeOverlaps",
    "PostgresLexicalIndex",
    "RerankThenExpand",
    "SQLDocStore",
    "SectionSplitter",
    "SentenceContext",
    "SentenceSplitter",
    "SentenceWindowRetriever",
    "Span",
    "Splitter",
    "StructuralContext",
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
