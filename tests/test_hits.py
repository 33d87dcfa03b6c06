"""The query's one ranking (``windows/hits.py``): dense and BM25 fused, each hit made once, in every memory mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    LexicalIndex,
    Performance,
    SentenceWindowRetriever,
    chroma_store,
)
from langchain_expand.store.records import unit_id
from langchain_expand.windows.hits import Hit, Ranking
from langchain_expand.windows.views import StoreViews

from .conftest import as_documents, load_docs, load_queries

MODES: dict[str, dict[str, Any]] = {
    "in memory": {},
    "past the limit": {"performance": Performance(snapshot_limit=0)},
    "nothing in memory": {"performance": Performance(in_memory=False)},
}
"""The three places a hit comes from: the snapshot, the columns past its limit, the records read."""


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings) -> tuple[Any, Path]:
    """TAT-QA's test passages (each table row a sentence), searched exactly by Chroma (a beam past their count)."""
    folder = tmp_path_factory.mktemp("hits")
    store = chroma_store("tatqa", persist_directory=folder / "chroma", embeddings=minilm, ef_search=4096)
    SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(folder / "lexical.sqlite")).add_documents(
        as_documents(load_docs("tatqa"))
    )
    return store, folder / "lexical.sqlite"


def ranking_of(retriever: SentenceWindowRetriever, query: str, **call: Any) -> Ranking:
    """The ranking ``retriever`` makes for ``query`` (a guided call by default, as ``invoke`` builds it)."""
    arguments = ("k", "before", "after", "expand", "merge", "window", "score_threshold", "relative_score_threshold")
    plan = retriever._plan(**{**dict.fromkeys(arguments), "max_tokens": 2000, **call})
    return retriever._ranking(query, None, plan)[0]


def made(hits: list[Hit], ranking: Ranking) -> tuple[list[tuple[Any, ...]], list[float]]:
    """What each hit says and its sentence's count; apart, the scores (a float32 distance in memory, Chroma's own)."""
    counts = ranking.tokens(hits)
    said = [(h.doc_id, h.index, h.n, h.rev, h.cues, n) for h, n in zip(hits, counts, strict=True)]
    return said, [h.score for h in hits]


def test_every_memory_mode_makes_the_same_hits_with_the_same_counts(indexed: tuple[Any, Path]) -> None:
    # One ranking, three sources of a hit: the snapshot, the columns past its limit, the
    # records read. With the dense search exact, the hits are the same to the last
    # count, in the order fusion by both scores gives, guided (ids first) and fixed alike.
    store, path = indexed
    retrievers = {
        mode: SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path), **kw) for mode, kw in MODES.items()
    }
    retrievers["past the limit"]._views = StoreViews(lambda fn: fn())  # built at the first query
    queries = [q["query"] for q in load_queries("tatqa")][:12]
    for call in ({}, {"window": "fixed"}):
        for query in queries:
            found = {}
            for mode, retriever in retrievers.items():
                ranking = ranking_of(retriever, query, **call)
                found[mode] = made(ranking(16), ranking)
            said, scores = found["in memory"]
            assert len(said) > 16, query  # BM25 found some the dense ranking did not
            for mode, (hits, scored) in found.items():
                assert hits == said, (mode, query, call)
                assert scored == pytest.approx(scores, abs=1e-6), (mode, query, call)


def test_a_hit_bm25_alone_found_is_scored_by_its_vectors_cosine_similarity(
    indexed: tuple[Any, Path], minilm: Embeddings
) -> None:
    # A sentence only BM25 ranked has no relevance from the dense search: it is scored as a
    # dense hit would be, by the cosine similarity of its stored vector to the query's.
    store, path = indexed
    checked = 0
    for mode, kw in MODES.items():
        retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path), **kw)
        for query in [q["query"] for q in load_queries("tatqa")][:6]:
            ranking = ranking_of(retriever, query)
            hits = ranking(8)
            dense = {d.id for d in store.similarity_search(query, k=8)}
            alone = [h for h in hits if unit_id(h.doc_id, h.index) not in dense]
            got = store._collection.get(ids=[unit_id(h.doc_id, h.index) for h in alone], include=["embeddings"])
            vectors = dict(zip(got["ids"], got["embeddings"], strict=True))
            q = np.asarray(minilm.embed_query(query), dtype=np.float64)
            for hit in alone:
                v = np.asarray(vectors[unit_id(hit.doc_id, hit.index)], dtype=np.float64)
                cosine = float(v @ q / (np.linalg.norm(v) * np.linalg.norm(q)))
                assert hit.score == pytest.approx(min(1.0, max(0.0, cosine)), abs=1e-5), (mode, query, hit)
                checked += 1
    assert checked > 20


@pytest.mark.parametrize("window", ["guided", "fixed"])
def test_a_record_another_writer_put_in_the_collection_is_an_error_naming_it(
    tmp_path: Path, minilm: Embeddings, window: str
) -> None:
    """On both dense paths (ids first, guided; the records, fixed) a record without sentence positions is named."""
    store = chroma_store("shared", persist_directory=tmp_path / "chroma", embeddings=minilm)
    retriever = SentenceWindowRetriever(vectorstore=store)
    retriever.add_documents(as_documents(load_docs("tatqa"))[:3])
    store.add_texts(["Total revenue in 2019 was 4.2 billion dollars."], ids=["not-a-sentence"])
    with pytest.raises(ValueError, match=r"without sentence positions \('not-a-sentence'\).*only it writes to"):
        retriever.invoke("total revenue in 2019", max_tokens=500, window=window)


@pytest.mark.parametrize("window", ["guided", "fixed"])
def test_a_parents_child_in_the_collection_is_the_same_error(tmp_path: Path, minilm: Embeddings, window: str) -> None:
    # A child's id ("b::0") reads as a sentence's: guided growth read it as a head and failed
    # with KeyError('lcx_gap'); a window retriever over a parents' collection now says what is wrong.
    store = chroma_store("parents", persist_directory=tmp_path / "chroma", embeddings=minilm)
    BudgetedParentDocumentRetriever(vectorstore=store, docstore=InMemoryStore()).add_documents(
        [Document("Total revenue in 2019 was 4.2 billion dollars. Costs rose.", id="b")]
    )
    with pytest.raises(ValueError, match=r"without sentence positions \('b::0'\).*only it writes to"):
        SentenceWindowRetriever(vectorstore=store).invoke("total revenue in 2019", max_tokens=500, window=window)
