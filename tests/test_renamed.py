"""Renamed names keep working, with a warning, and a rename re-embeds nothing.

"context" now means the prompt's only (the text embedded before a unit is its *prefix*), and
the count of units a call keeps is ``k`` everywhere (``top_n`` was a second name for it).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

import langchain_expand
from langchain_expand import (
    BudgetedParentDocumentRetriever,
    BudgetPolicy,
    EmbeddingsReranker,
    RerankThenExpand,
    SentenceWindowRetriever,
    StructuralPrefix,
    chroma_store,
    rerank,
    rerank_then_expand_chain,
)
from langchain_expand.calls import ExpandDeprecationWarning
from langchain_expand.store.records import fingerprint, revision

QUERY = "what functions should the remote control have"


RENAMED = [("SentenceContext", "EmbeddingPrefix"), ("StructuralContext", "StructuralPrefix")]


@pytest.mark.parametrize(("old", "new"), RENAMED)
def test_an_old_public_name_still_imports_with_a_warning(old: str, new: str) -> None:
    with pytest.warns(ExpandDeprecationWarning, match=f"{old} is now {new}"):
        value = getattr(langchain_expand, old)
    assert value is getattr(langchain_expand, new)
    assert old not in langchain_expand.__all__
    with pytest.raises(AttributeError, match="no attribute 'SentenceContexts'"):
        langchain_expand.SentenceContexts  # noqa: B018


def test_the_prefix_rename_keeps_every_stored_revision() -> None:
    """Revisions written before the rename stay current: re-adding a document embeds nothing again."""
    assert fingerprint(StructuralPrefix()) == (
        "langchain_expand.text.context.StructuralContext"
        "[('headings', True), ('labels', True), ('max_chars', 200), ('tables', True)]"
    )
    assert revision("Plug it in. Then wait.", StructuralPrefix(headings=False, max_chars=50)) == "3dc79a17f51c5547"


def test_sentence_context_sets_sentence_prefix_with_a_warning(make_retriever: Any) -> None:
    with pytest.warns(ExpandDeprecationWarning, match=r"sentence_context=\.\.\.\) is now sentence_prefix"):
        retriever: SentenceWindowRetriever = make_retriever(sentence_context=None)
    assert retriever.sentence_prefix is None
    with pytest.warns(ExpandDeprecationWarning, match="sentence_context is now sentence_prefix"):
        retriever.sentence_context = StructuralPrefix(labels=False)
    assert retriever.sentence_prefix == StructuralPrefix(labels=False)
    with pytest.warns(ExpandDeprecationWarning):
        assert retriever.sentence_context == StructuralPrefix(labels=False)
    with pytest.raises(ValueError, match="`sentence_context` is the old name of `sentence_prefix`"):
        make_retriever(sentence_context=None, sentence_prefix=StructuralPrefix())


def test_child_context_sets_child_prefix_with_a_warning(tmp_path: Any, minilm: Embeddings) -> None:
    def parents(**kwargs: Any) -> BudgetedParentDocumentRetriever:
        return BudgetedParentDocumentRetriever(
            vectorstore=chroma_store("renamed", persist_directory=tmp_path, embeddings=minilm),
            docstore=InMemoryStore(),
            child_splitter=RecursiveCharacterTextSplitter(chunk_size=200),
            **kwargs,
        )

    with pytest.warns(ExpandDeprecationWarning, match=r"child_context=\.\.\.\) is now child_prefix"):
        retriever = parents(child_context=None)
    assert retriever.child_prefix is None
    retriever.add_documents([Document("# Remote\nIt should have a power button.", id="memo")])
    assert retriever.invoke("power button")
    with pytest.raises(ValueError, match="`child_context` is the old name of `child_prefix`"):
        parents(child_context=None, child_prefix=StructuralPrefix())


def test_top_n_is_the_old_name_of_k(qmsum_index: SentenceWindowRetriever, minilm: Embeddings) -> None:
    reranker = EmbeddingsReranker(embeddings=minilm)
    with pytest.warns(ExpandDeprecationWarning, match=r"top_n=\.\.\.\) is now k"):
        pipeline = RerankThenExpand(retriever=qmsum_index, reranker=reranker, fetch_k=10, top_n=3)
    assert pipeline.k == 3
    with pytest.warns(ExpandDeprecationWarning, match="top_n is now k"):
        assert pipeline.top_n == 3
    assert len(pipeline.invoke(QUERY, merge=False)) == 3
    with pytest.warns(ExpandDeprecationWarning, match=r"invoke\(top_n=\.\.\.\) is now k"):
        assert len(pipeline.invoke(QUERY, top_n=2, merge=False)) == 2
    hits = qmsum_index.invoke(QUERY, k=6, expand=False)
    with pytest.warns(ExpandDeprecationWarning, match=r"rerank\(top_n=\.\.\.\) is now k"):
        assert len(rerank(reranker, hits, QUERY, top_n=2)) == 2
    assert len(rerank(reranker, hits, QUERY, 2)) == 2
    with pytest.warns(ExpandDeprecationWarning, match=r"rerank_then_expand_chain\(top_n=\.\.\.\) is now k"):
        chain = rerank_then_expand_chain(qmsum_index, reranker, fetch_k=10, top_n=3)
    pipeline = RerankThenExpand(retriever=qmsum_index, reranker=reranker, fetch_k=10, k=3)
    assert [d.page_content for d in chain.invoke(QUERY)] == [d.page_content for d in pipeline.invoke(QUERY)]


def test_without_k_the_retrievers_policy_says_how_many_reranked_matches_are_expanded(
    qmsum_index: SentenceWindowRetriever, minilm: Embeddings
) -> None:
    retriever = copy.deepcopy(qmsum_index)  # the same index, settings of its own
    pipeline = RerankThenExpand(retriever=retriever, reranker=EmbeddingsReranker(embeddings=minilm), fetch_k=10)
    assert len(pipeline.invoke(QUERY, merge=False)) == 4  # no budget: BudgetPolicy.reranked_k
    retriever.budget_policy = BudgetPolicy(reranked_k=2)
    assert len(pipeline.invoke(QUERY, merge=False)) == 2
    hits = [d.metadata["hit"] for d in pipeline.invoke(QUERY, merge=False, max_tokens=100_000, before=0, after=0)]
    assert len(hits) == 10  # a budget that holds them all: every match fetched, in reranked order


def test_the_memory_settings_moved_into_performance_and_the_old_names_still_work(make_retriever: Any) -> None:
    # issue #49: snapshot_limit, in_memory, cache_size and batch_size change speed only, and sit apart
    from langchain_expand import Performance

    with pytest.warns(ExpandDeprecationWarning, match=r"snapshot_limit=0, cache_size=5\) is now performance="):
        retriever: SentenceWindowRetriever = make_retriever(snapshot_limit=0, cache_size=5)
    assert retriever.performance == Performance(snapshot_limit=0, cache_size=5)
    with pytest.warns(ExpandDeprecationWarning, match=r"\.in_memory = \.\.\. is now performance="):
        retriever.in_memory = False
    assert retriever.performance == Performance(snapshot_limit=0, in_memory=False, cache_size=5)
    with pytest.warns(ExpandDeprecationWarning, match=r"\.batch_size is now SentenceWindowRetriever\.performance"):
        assert retriever.batch_size == 4096
    with pytest.raises(ValueError, match="pass `performance=Performance"):
        make_retriever(cache_size=0, performance=Performance())
    with pytest.raises(ValueError, match="`cache_size` must be an integer >= 0"):
        retriever.performance = Performance(cache_size=-1)
    with pytest.raises(ValueError, match="`in_memory` must be True or False"):
        Performance(in_memory=0)  # type: ignore[arg-type]
    assert retriever.performance.limit is None  # nothing in memory: no snapshot at any size
    retriever.performance = Performance(batch_size=2)
    text = "The first is about apples and pears. The second is about boats on a river. The third is about trains."
    retriever.add_documents([Document(text, id="d")])  # two sentences a write
    assert [d.metadata["hit"] for d in retriever.invoke("trains", k=1)] == [2]
