import langchain_expand


def test_public_names_are_pinned() -> None:
    assert sorted(langchain_expand.__all__) == [
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
    for name in langchain_expand.__all__:
        assert getattr(langchain_expand, name) is not None
