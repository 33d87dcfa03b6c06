import langchain_expand


def test_public_names_are_pinned() -> None:
    assert sorted(langchain_expand.__all__) == [
        "SentenceSplitter",
        "SentenceWindowRetriever",
        "Span",
        "Splitter",
        "TokenCounter",
        "chroma_store",
        "default_embeddings",
        "window_bounds",
    ]
    for name in langchain_expand.__all__:
        assert getattr(langchain_expand, name) is not None
