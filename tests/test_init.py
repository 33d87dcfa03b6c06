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
    for name in langchain_expand.__all__:
        assert getattr(langchain_expand, name) is not None


def test_help_shows_every_field_of_every_public_pydantic_class() -> None:
    # issue #52, finding 8: 0 of 23 window and 0 of 18 parent fields had a description, so
    # help(), model_fields and an IDE's hover showed none (their docstrings sat in the source)
    import pydoc

    from pydantic import BaseModel

    langchains = {"name", "tags", "metadata"}  # BaseRetriever's and Runnable's own
    classes = [c for n in langchain_expand.__all__ if isinstance(c := getattr(langchain_expand, n), type)]
    models = [c for c in classes if issubclass(c, BaseModel)]
    assert {c.__name__ for c in models} >= {"SentenceWindowRetriever", "BudgetedParentDocumentRetriever", "FitToBudget"}
    for model in models:
        shown = pydoc.render_doc(model, renderer=pydoc.plaintext)
        for name, field in model.model_fields.items():
            if name in langchains:
                continue
            assert field.description, (model.__name__, name)
            assert f"{name}: {field.description.split()[0]}" in shown, (model.__name__, name)
