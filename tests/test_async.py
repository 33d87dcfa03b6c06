"""Async entry points run the one sync implementation and honour every per-call argument.

LangChain's default ``_aget_relevant_documents`` drops keyword arguments; these tests pin
that ``ainvoke`` returns exactly what ``invoke`` returns with the same arguments, on real
Chroma and real MiniLM, for both retrievers and for rerank-then-expand.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    EmbeddingsReranker,
    MarkdownSectionSplitter,
    RerankThenExpand,
    SentenceWindowRetriever,
    SQLDocStore,
    TokenCounter,
    chroma_store,
)
from langchain_expand.calls import ExpandDeprecationWarning
from langchain_expand.store.adapters import adapt
from langchain_expand.store.search import VectorSearch

from .conftest import CountingEmbeddings, as_documents, load_docs

pytestmark = pytest.mark.integration

QUERY = "what did they decide about the price of the remote control"
COUNTER = TokenCounter()


def as_pairs(docs: list[Document]) -> list[tuple[str, dict]]:
    return [(d.page_content, d.metadata) for d in docs]


async def test_window_ainvoke_forwards_every_argument(qmsum_index: SentenceWindowRetriever) -> None:
    args = {"before": 3, "after": 0, "k": 2, "max_tokens": 300, "merge": False}
    sync = qmsum_index.invoke(QUERY, **args)
    got = await qmsum_index.ainvoke(QUERY, **args)
    assert as_pairs(got) == as_pairs(sync)
    assert len(got) == 2
    for doc in got:
        assert doc.metadata["hit"] == doc.metadata["span"][1] - 1  # after=0
    assert COUNTER("\n\n".join(d.page_content for d in got)) <= 300
    defaults = await qmsum_index.ainvoke(QUERY)
    assert as_pairs(defaults) != as_pairs(got)  # the arguments changed the answer
    merged = {"k": 3, "merge": True, "expand": True, "filter": {"title": load_docs("qmsum")[1]["doc_id"]}}
    assert as_pairs(await qmsum_index.ainvoke(QUERY, **merged)) == as_pairs(qmsum_index.invoke(QUERY, **merged))
    assert {d.metadata["doc_id"] for d in await qmsum_index.ainvoke(QUERY, **merged)} == {merged["filter"]["title"]}


async def test_parent_ainvoke_forwards_every_argument(tmp_path: Path, minilm: Embeddings) -> None:
    retriever = BudgetedParentDocumentRetriever(
        vectorstore=chroma_store("async-parents", persist_directory=tmp_path, embeddings=minilm),
        docstore=SQLDocStore(f"sqlite:///{tmp_path}/docstore.sqlite"),
        parent_splitter=MarkdownSectionSplitter(max_level=2),
    )
    rows = load_docs("emanual")
    await retriever.aadd_documents(
        [Document(r["text"], id=r["doc_id"], metadata={"manual": r["doc_id"]}) for r in rows]
    )
    query = "how do I pair the remote control with the TV"
    args = {"k": 2, "max_tokens": 300, "filter": {"manual": rows[0]["doc_id"]}}
    sync = retriever.invoke(query, **args)
    got = await retriever.ainvoke(query, **args)
    assert as_pairs(got) == as_pairs(sync)
    assert 1 <= len(got) <= 2
    assert COUNTER("\n\n".join(d.page_content for d in got)) <= 300
    matches = await retriever.ainvoke(query, k=3, expand=False)
    assert matches == retriever.invoke(query, k=3, expand=False)
    assert all("child_id" in m.metadata for m in matches)
    assert as_pairs(await retriever.aexpand_hits(matches, max_tokens=200)) == as_pairs(
        retriever.expand_hits(matches, max_tokens=200)
    )
    await retriever.adelete([rows[0]["doc_id"]])
    assert await retriever.ainvoke(query, **args) == []


async def test_rerank_then_expand_ainvoke_forwards_every_argument(
    qmsum_index: SentenceWindowRetriever, minilm: Embeddings
) -> None:
    pipeline = RerankThenExpand(retriever=qmsum_index, reranker=EmbeddingsReranker(embeddings=minilm), fetch_k=12)
    args = {"before": 3, "after": 0, "k": 2, "max_tokens": 300, "merge": False}
    sync = pipeline.invoke(QUERY, **args)
    got = await pipeline.ainvoke(QUERY, **args)
    assert as_pairs(got) == as_pairs(sync)
    assert len(got) == 2
    assert all(d.metadata["hit"] == d.metadata["span"][1] - 1 for d in got)
    assert all("rerank_score" in d.metadata for d in got)
    assert COUNTER("\n\n".join(d.page_content for d in got)) <= 300
    with pytest.raises(ValueError, match="`top_n` is the old name of `k`"), pytest.warns(ExpandDeprecationWarning):
        await pipeline.ainvoke(QUERY, k=2, top_n=3)


def test_a_query_is_embedded_once_however_many_searches_it_takes(
    make_retriever: object, counting: CountingEmbeddings
) -> None:
    retriever = make_retriever(k=6, merge=True, before=4, after=4)  # type: ignore[operator]
    retriever.add_documents(as_documents(load_docs("qmsum")[:1]))
    searches: list[int] = []
    adapter = retriever._vectors  # each search of the store, by vector (Chroma's own query)
    original = adapter.search

    def counted(query, vector, k, **kwargs):  # type: ignore[no-untyped-def]
        searches.append(k)
        return original(query, vector, k, **kwargs)

    object.__setattr__(adapter, "search", counted)
    before = counting.queries_embedded
    docs = retriever.invoke("the remote control")
    assert 1 <= len(docs) < 6  # wide windows of one meeting merge: fewer units than k ...
    assert len(searches) > 2  # ... so it searched again, and again
    assert counting.queries_embedded == before + 1


def test_search_by_vector_gives_the_stores_own_relevance_scores(qmsum_index: SentenceWindowRetriever) -> None:
    store = qmsum_index.vectorstore
    by_text = store.similarity_search_with_relevance_scores(QUERY, k=10)
    by_vector = VectorSearch(adapt(store, "test"), QUERY)(10)
    assert [d.id for d, _ in by_vector] == [d.id for d, _ in by_text]
    assert [s for _, s in by_vector] == pytest.approx([s for _, s in by_text], abs=1e-6)
    assert all(0.0 <= s <= 1.0 for _, s in by_vector)
