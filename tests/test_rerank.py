"""Rerank-then-expand with real scorers that read the text they are given."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
from langchain_community.cross_encoders.base import BaseCrossEncoder
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings
from pydantic import Field
from rank_bm25 import BM25Okapi

from langchain_expand import (
    EmbeddingsReranker,
    RerankThenExpand,
    SentenceSplitter,
    SentenceWindowRetriever,
    rerank_then_expand_chain,
)
from langchain_expand.rerank import rerank

from .conftest import load_docs


class RecordingBM25(BaseDocumentCompressor):
    """BM25 over exactly the texts it receives; keeps them for inspection."""

    received: list[str] = Field(default_factory=list)

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        self.received.extend(d.page_content for d in documents)
        bm25 = BM25Okapi([d.page_content.lower().split() for d in documents])
        scores = bm25.get_scores(query.lower().split())
        order = np.argsort(-scores)
        return [
            Document(
                documents[i].page_content,
                metadata={**documents[i].metadata, "relevance_score": float(scores[i])},
                id=documents[i].id,
            )
            for i in order
        ]


class MiniLMCrossScorer(BaseCrossEncoder):
    """A cross-encoder interface over the bundled MiniLM (no cross-encoder model can be downloaded)."""

    def __init__(self, embeddings: Embeddings) -> None:
        self.embeddings = embeddings
        self.pairs: list[tuple[str, str]] = []

    def score(self, text_pairs: list[tuple[str, str]]) -> list[float]:
        self.pairs.extend(text_pairs)
        q = np.asarray(self.embeddings.embed_query(text_pairs[0][0]))
        m = np.asarray(self.embeddings.embed_documents([t for _, t in text_pairs]))
        return list(m @ q)


QUERY = "what functions should the remote control have"


def sentences_of_corpus() -> set[str]:
    splitter = SentenceSplitter()
    return {d["text"][s:e] for d in load_docs("qmsum") for s, e in splitter(d["text"])}


def test_reranker_sees_only_matched_sentences_and_expansion_comes_after(qmsum_index: SentenceWindowRetriever) -> None:
    reranker = RecordingBM25()
    pipeline = RerankThenExpand(retriever=qmsum_index, reranker=reranker, fetch_k=15, k=4)
    results = pipeline.invoke(QUERY, merge=False)  # one window a reranked hit
    sentences = sentences_of_corpus()
    assert len(reranker.received) == 15
    assert all(text in sentences for text in reranker.received)  # single sentences, never windows
    assert len(results) == 4
    for doc in results:
        m = doc.metadata
        assert m["span"][1] - m["span"][0] > 1 or m["hit"] in (0, m["n_sentences"] - 1)
        assert "score" in m
        assert "rerank_score" in m
    scores = [d.metadata["rerank_score"] for d in results]
    assert scores == sorted(scores, reverse=True)
    # the windows are those of the 4 matches BM25 ranks best among the 15
    matches = qmsum_index.invoke(QUERY, k=15, expand=False)
    bm25 = BM25Okapi([d.page_content.lower().split() for d in matches]).get_scores(QUERY.lower().split())
    best = [(matches[i].metadata["doc_id"], matches[i].metadata["hit"]) for i in np.argsort(-bm25)[:4]]
    assert [(d.metadata["doc_id"], d.metadata["hit"]) for d in results] == best


def test_the_reranker_scores_fetch_k_matches_whatever_the_retrievers_budget(
    qmsum_index: SentenceWindowRetriever,
) -> None:
    # the matching call ran under the retriever's max_tokens: with a budget of 60 tokens the
    # reranker was given the 3-4 matches that fit it, not fetch_k=15; the budget bounds the expansion
    budgeted = qmsum_index.model_copy(update={"max_tokens": 60})
    pipelines = {
        "class": lambda reranker: RerankThenExpand(retriever=budgeted, reranker=reranker, fetch_k=15, k=2),
        "chain": lambda reranker: rerank_then_expand_chain(budgeted, reranker, fetch_k=15, k=2),
    }
    for make in pipelines.values():
        reranker = RecordingBM25()
        results = make(reranker).invoke(QUERY)
        assert len(reranker.received) == 15
        assert results
        assert sum(d.metadata["tokens"] for d in results) <= 60


def test_crossencoder_reranker_keeps_its_scores(qmsum_index: SentenceWindowRetriever, minilm: Embeddings) -> None:
    scorer = MiniLMCrossScorer(minilm)
    pipeline = RerankThenExpand(
        retriever=qmsum_index, reranker=CrossEncoderReranker(model=scorer, top_n=3), fetch_k=10, k=3
    )
    results = pipeline.invoke(QUERY)
    sentences = sentences_of_corpus()
    assert len(scorer.pairs) == 10
    assert all(text in sentences for _, text in scorer.pairs)
    assert [round(d.metadata["rerank_score"], 6) for d in results] == sorted(
        (round(d.metadata["rerank_score"], 6) for d in results), reverse=True
    )


async def test_explicit_chain_matches_the_retriever_sync_and_async(
    qmsum_index: SentenceWindowRetriever, minilm: Embeddings
) -> None:
    reranker = EmbeddingsReranker(embeddings=minilm)
    retriever = RerankThenExpand(retriever=qmsum_index, reranker=reranker, fetch_k=12, k=3)
    chain = rerank_then_expand_chain(qmsum_index, reranker, fetch_k=12, k=3)
    expected = [d.page_content for d in retriever.invoke(QUERY)]
    assert [d.page_content for d in chain.invoke(QUERY)] == expected
    assert [d.page_content for d in await chain.ainvoke(QUERY)] == expected
    assert [d.page_content for d in await retriever.ainvoke(QUERY)] == expected


def test_k_counts_units_as_sent_where_the_reranked_matches_windows_merge(
    qmsum_index: SentenceWindowRetriever, minilm: Embeddings
) -> None:
    # RerankThenExpand(k=4) returned 2 units on half of a manual's questions: the windows of the
    # reranked matches merged, and k counted matches, where the retriever's own k counts units
    reranker = EmbeddingsReranker(embeddings=minilm)
    pipeline = RerankThenExpand(retriever=qmsum_index, reranker=reranker, fetch_k=20, k=4)
    chain = rerank_then_expand_chain(qmsum_index, reranker, fetch_k=20, k=4)
    merged = 0
    for query in (QUERY, "the price of the remote", "how many buttons", "what colour should it be"):
        ranked = rerank(reranker, qmsum_index.invoke(query, k=20, expand=False), query, 20)
        units = pipeline.invoke(query)
        assert len(units) == 4, query
        hits = [(u.metadata["doc_id"], h) for u in units for h in u.metadata["hits"]]
        first = [(m.metadata["doc_id"], m.metadata["hit"]) for m in ranked[: len(hits)]]
        assert sorted(hits) == sorted(first)  # the first reranked matches, none skipped
        merged += len(hits) > 4
        assert [u.page_content for u in chain.invoke(query)] == [u.page_content for u in units]
    assert merged, "no two reranked matches merged: the test shows nothing"
    assert len(pipeline.invoke(QUERY, merge=False)) == 4  # unmerged: k windows, one a match


def test_over_parents_k_counts_parents_so_a_run_of_overlapping_ones_is_never_longer_than_k(
    tmp_path: Any, minilm: Embeddings
) -> None:
    # counted as units, a run of hit parents that share text joined into one as long as the run
    from langchain_core.stores import InMemoryStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from langchain_expand import BudgetedParentDocumentRetriever, chroma_store

    size = 600
    parents = BudgetedParentDocumentRetriever(
        vectorstore=chroma_store("chained", persist_directory=tmp_path, embeddings=minilm),
        docstore=InMemoryStore(),
        parent_splitter=RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=150),
    )
    text = " ".join(f"Fact {i}: the value of item {i} is {i * 7} units." for i in range(100))  # every part alike
    parents.add_documents([Document(text, id="facts")])
    pipeline = RerankThenExpand(retriever=parents, reranker=EmbeddingsReranker(embeddings=minilm), fetch_k=20, k=3)
    units = pipeline.invoke("the value of item 42")
    assert sum(len(u.page_content) for u in units) <= 3 * size
    assert len({c["id"] for u in units for c in u.metadata["children"]}) >= 3


def test_a_reranker_that_rewrites_or_strips_the_matches_is_an_error_naming_it(
    qmsum_index: SentenceWindowRetriever,
) -> None:
    # a compressor that rewrites its input (as LLMChainExtractor does) gave an empty answer, with a
    # warning that the document had been deleted; one that strips metadata, an error about expand_hits
    class Rewriting(BaseDocumentCompressor):
        def compress_documents(self, documents: Sequence[Document], query: str, callbacks: Any = None) -> Any:
            return [Document(d.page_content.upper(), metadata=d.metadata) for d in documents]

    class Stripping(BaseDocumentCompressor):
        def compress_documents(self, documents: Sequence[Document], query: str, callbacks: Any = None) -> Any:
            return [Document(d.page_content) for d in documents]

    for reranker in (Rewriting(), Stripping()):
        pipeline = RerankThenExpand(retriever=qmsum_index, reranker=reranker, fetch_k=5, k=2)
        with pytest.raises(
            ValueError, match=rf"{type(reranker).__name__} handed back a match changed .*LLMChainExtractor"
        ):
            pipeline.invoke(QUERY)
    kept = RecordingBM25()  # one that scores and orders passes
    assert len(RerankThenExpand(retriever=qmsum_index, reranker=kept, fetch_k=5, k=2).invoke(QUERY)) == 2


def test_a_retriever_that_cannot_expand_is_refused(minilm: Embeddings) -> None:
    from langchain_core.retrievers import BaseRetriever

    class Plain(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            return []

    with pytest.raises(ValueError, match="must match first and expand after"):
        RerankThenExpand(retriever=Plain(), reranker=EmbeddingsReranker(embeddings=minilm))


def test_k_above_fetch_k_is_refused(qmsum_index: SentenceWindowRetriever, minilm: Embeddings) -> None:
    with pytest.raises(ValueError, match="Need 1 <= `k` <= `fetch_k`"):
        RerankThenExpand(retriever=qmsum_index, reranker=EmbeddingsReranker(embeddings=minilm), fetch_k=2, k=3)
    # per call as when built: k=20 of fetch_k=10 was taken as 10, without a word
    pipeline = RerankThenExpand(retriever=qmsum_index, reranker=EmbeddingsReranker(embeddings=minilm), fetch_k=10)
    with pytest.raises(ValueError, match=r"Need 1 <= `k` <= `fetch_k`, got k=20, fetch_k=10"):
        pipeline.invoke("the remote's price", k=20)
    with pytest.raises(ValueError, match=r"Need 1 <= `k` <= `fetch_k`, got k=4, fetch_k=3"):
        pipeline.model_copy(update={"k": 4}).invoke("the remote's price", fetch_k=3)
    assert len(pipeline.invoke("the remote's price", k=3, fetch_k=3, merge=False)) == 3


def test_an_unknown_argument_is_refused_naming_the_closest(
    qmsum_index: SentenceWindowRetriever, minilm: Embeddings
) -> None:
    with pytest.raises(ValueError, match=r"unknown argument `fetch_kk`\. Did you mean `fetch_k`"):
        RerankThenExpand(retriever=qmsum_index, reranker=EmbeddingsReranker(embeddings=minilm), fetch_kk=3)
    rerank = RerankThenExpand(retriever=qmsum_index, reranker=EmbeddingsReranker(embeddings=minilm))
    with pytest.raises(ValueError, match=r"invoke got an unknown argument `fetchk`\. Did you mean `fetch_k`"):
        rerank.invoke("the remote's price", fetchk=8)
