"""The snapshot (``windows/snapshot.py``): every committed sentence in memory, searched exactly, at one change mark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand import (
    LexicalIndex,
    Performance,
    SentenceWindowRetriever,
    chroma_store,
    default_embeddings,
)
from langchain_expand.store.records import unit_id
from langchain_expand.store.search import VectorSearch
from langchain_expand.windows import guided
from langchain_expand.windows.bm25 import LexicalRanking
from langchain_expand.windows.growth import Growth, grow
from langchain_expand.windows.snapshot import build as build_snapshot
from langchain_expand.windows.views import StoreViews

from .conftest import Make, load_docs, load_queries
from .memory import ReadLog, exact_search, nearest_of, shown, snapshot_of, unscored


def test_on_a_snapshot_or_its_figures_growth_knows_every_sentence_it_weighs_and_runs_once_a_search(
    reader: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every sentence's similarity is in the snapshot's scores, or the figures': growth never waits on a fetch."""
    runs: list[Growth] = []

    def counted(*args: Any, **kwargs: Any) -> Growth:
        runs.append(grow(*args, **kwargs))
        return runs[-1]

    monkeypatch.setattr(guided, "grow", counted)
    queries = [q["query"] for q in load_queries("qmsum")[:4]]
    for settings, expected in (
        ({}, "once"),
        ({"performance": Performance(snapshot_limit=0)}, "once"),  # past the limit: growth's figures
        ({"performance": Performance(in_memory=False)}, "in rounds"),
    ):
        retriever = reader(lexical=True, **settings)
        retriever._views = StoreViews(LexicalRanking(lambda fn: fn()))
        retriever.invoke(queries[-1], max_tokens=100)  # past the limit, the build runs now
        for query in queries:
            runs.clear()
            assert retriever.invoke(query, max_tokens=2000)
            if expected == "once":
                assert len(runs) == 1  # one search's hits filled the budget; no top-up was needed
                assert not runs[0].wanted
            else:  # from the store: named, fetched, grown again
                assert len(runs) > 1
                assert runs[0].wanted


def test_the_snapshot_finds_the_exact_nearest_sentences_and_bm25s_ranking(reader: Make, minilm: Embeddings) -> None:
    retriever = reader(lexical=True)
    snapshot = snapshot_of(retriever)
    assert len(snapshot) == retriever.vectorstore._collection.count()  # type: ignore[attr-defined]
    exact = exact_search(reader())._vectors
    for query in [q["query"] for q in load_queries("qmsum")]:
        vector = minilm.embed_query(query)
        found = nearest_of(snapshot, retriever, vector, 30)
        assert found is not None
        expected = exact.search_ids(vector, 30)
        assert [unit_id(*p) for p, _ in found] == [i for i, _ in expected]
        assert [s for _, s in found] == pytest.approx([s for _, s in expected], abs=1e-6)
        assert snapshot.bm25.search(query, 45) == retriever.lexical.search(query, 45)  # type: ignore[union-attr]


def test_answers_from_the_snapshot_equal_answers_from_the_store_searched_exactly(
    reader: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot changes what a query reads (nothing from the store), and nothing else.

    Guided growth knows every sentence of the snapshot when it first looks at it; from the
    store it fetches what it wants round by round, and a query's rounds are capped (what is
    still wanted then is taken on trust). Uncapped, the rounds end where growth wants nothing,
    which is the growth that knows every sentence: the same windows.
    """
    monkeypatch.setattr(guided, "GROWTH_ROUNDS", 10_000)
    snapshot = reader(lexical=True, performance=Performance(cache_size=0))
    store = exact_search(reader(lexical=True, performance=Performance(cache_size=0, in_memory=False)))
    log = ReadLog(snapshot._vectors)
    for query in [q["query"] for q in load_queries("qmsum")[:4]]:
        for call in (
            {"max_tokens": 300},
            {"max_tokens": 2000},
            {"k": 3, "before": 1, "after": 2},
            {"max_tokens": 800, "before": 1, "after": 1},
        ):
            found = snapshot.invoke(query, **call)
            expected = store.invoke(query, **call)
            assert found
            assert unscored(found) == unscored(expected)
            assert [d.metadata["score"] for d in found] == pytest.approx(
                [d.metadata["score"] for d in expected], abs=1e-6
            )
            assert log.taken() == []


def test_a_new_retriever_over_the_same_files_searches_the_same_snapshot(indexed: tuple[Any, Path]) -> None:
    """What a restart keeps: the store, its mark and the lexical index; the snapshot is built from them."""
    _, path = indexed
    folder = path.parent
    query = "who will design the remote control"
    answers = []
    for _ in range(2):
        store = chroma_store("qmsum", persist_directory=folder / "chroma", embeddings=default_embeddings())
        retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path))
        answers.append(shown(retriever.invoke(query, max_tokens=600)))
        assert retriever._views.snapshot is not None
        assert retriever._views.snapshot[1] is not None
    assert answers[0] == answers[1]
    assert answers[0]


def test_a_document_written_without_the_lexical_index_is_found_until_the_copies_cover_it_again(
    tmp_path: Path, minilm: Embeddings
) -> None:
    """Such a writer leaves no copy: the snapshot would miss its document, so the store is searched."""

    def opened(lexical: bool) -> SentenceWindowRetriever:
        store = chroma_store("shared", persist_directory=tmp_path / "chroma", embeddings=minilm)
        return SentenceWindowRetriever(
            vectorstore=store, lexical=LexicalIndex(tmp_path / "lex.sqlite") if lexical else None
        )

    reader = opened(True)
    reader.add_documents([Document("Rivers carry water to the sea. Fish swim in rivers.", id="rivers")])
    query = "which planet has the tallest volcano"
    assert all(d.metadata["doc_id"] == "rivers" for d in reader.invoke(query, max_tokens=200))
    assert reader._views.snapshot is not None
    assert reader._views.snapshot[1] is not None

    mars = "Olympus Mons on Mars is the tallest volcano of any planet. It is three times as high as Everest."
    opened(False).add_documents([Document(mars, id="mars")])
    assert any(d.metadata["doc_id"] == "mars" for d in reader.invoke(query, max_tokens=200))
    assert reader._views.snapshot[1] is None  # not built: the store answered

    opened(True).add_documents([Document(mars, id="mars")])  # the copies, read back without embedding
    assert any(d.metadata["doc_id"] == "mars" for d in reader.invoke(query, max_tokens=200))
    assert reader._views.snapshot[1] is not None


def test_the_snapshots_bm25_ranks_a_write_from_the_next_query(tmp_path: Path, minilm: Embeddings) -> None:
    """After a write, the next query's BM25 in memory is the new snapshot's: the written document ranks."""
    store = chroma_store("ahead", persist_directory=tmp_path / "chroma", embeddings=minilm)
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(tmp_path / "lex.sqlite"))
    retriever.add_documents([Document("Rivers carry water to the sea. Fish swim in rivers.", id="rivers")])
    query = "the zorblat code"

    def current() -> Any:
        found = retriever._searched(None, VectorSearch(retriever._vectors, query)).current
        assert found is not None
        return found.bm25

    retriever.invoke(query, max_tokens=200)  # builds the snapshot
    unchanged = current()
    assert unchanged.search(query, 4) == unchanged.bm25.search(query, 4)
    assert all(hit.doc_id == "rivers" for hit in unchanged.search(query, 4))

    retriever.add_documents([Document("The zorblat code opens the door. Nobody knows it.", id="zorblat")])
    moved = current()
    assert moved.search(query, 4)[0].doc_id == "zorblat"
    assert any(d.metadata["doc_id"] == "zorblat" for d in retriever.invoke(query, max_tokens=200))


def test_over_its_limit_the_snapshot_is_not_built_and_the_store_answers(reader: Make) -> None:
    limited = reader(lexical=True, performance=Performance(snapshot_limit=10))
    found = limited.invoke("who will design the remote control", max_tokens=500)
    assert found
    assert limited._views.snapshot is not None
    assert limited._views.snapshot[1] is None
    with pytest.raises(ValueError, match="snapshot_limit"):
        reader(lexical=True, performance=Performance(snapshot_limit=-1))


def test_a_snapshot_built_on_the_last_one_equals_a_snapshot_built_whole(
    tmp_path: Path, minilm: Embeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After writes, the next snapshot reads only the documents written since; it is the same as one built whole."""
    lines = load_docs("friendsqa")[0]["text"].split("\n")
    scenes = [Document("\n".join(lines[i : i + 40]), id=f"scene-{i // 40}") for i in range(0, 200, 40)]
    lexical = LexicalIndex(tmp_path / "lexical.sqlite")
    store = chroma_store("scenes", persist_directory=tmp_path / "chroma", embeddings=minilm)
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=lexical)
    retriever.add_documents(scenes[:4])
    query = "what is Joey going to do when he has a baby"
    retriever.invoke(query, max_tokens=300)
    first = snapshot_of(retriever)

    retriever.add_documents([scenes[4]])  # new
    retriever.add_documents([Document(scenes[0].page_content + "\nRoss Geller: One more line .", id="scene-0")])
    retriever.delete(["scene-1"])
    asked: list[object] = []
    copies = lexical.copies
    monkeypatch.setattr(lexical, "copies", lambda doc_ids=None: asked.append(doc_ids) or copies(doc_ids))
    found = retriever.invoke(query, max_tokens=300)
    grown = snapshot_of(retriever)
    assert grown is not first
    assert asked == [{"scene-0", "scene-4"}]  # the unchanged scenes are taken from the last snapshot
    whole = build_snapshot(retriever._vectors, lexical, "whole", 10**6)
    assert whole is not None
    held = whole.columns.documents()
    assert grown.columns.documents() == held
    assert [grown.columns.position(r) for r in range(len(grown))] == [
        whole.columns.position(r) for r in range(len(whole))
    ]
    assert [grown.columns.document(d) for d in held] == [whole.columns.document(d) for d in held]
    assert [grown.columns.copy(r) for r in range(len(grown))] == [whole.columns.copy(r) for r in range(len(whole))]
    assert np.array_equal(grown.columns._matrix, whole.columns._matrix)
    heads = [unit_id(d, 0) for d in held]
    assert [h.metadata for h, _ in grown.heads.found(heads)] == [h.metadata for h, _ in whole.heads.found(heads)]
    vector = minilm.embed_query(query)
    assert nearest_of(grown, retriever, vector, 40) == nearest_of(whole, retriever, vector, 40)
    for text in [query, "baby cigars waiting room", "mucus plug water broke", "one more line"]:
        assert grown.bm25.search(text, 30) == whole.bm25.search(text, 30) == lexical.search(text, 30)
    assert all(d.metadata["doc_id"] != "scene-1" for d in found)


def test_an_empty_store_with_a_lexical_index_answers_nothing(tmp_path: Path, minilm: Embeddings) -> None:
    store = chroma_store("empty", persist_directory=tmp_path / "chroma", embeddings=minilm)
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(tmp_path / "lexical.sqlite"))
    assert retriever.invoke("anything at all", max_tokens=300) == []
    assert retriever.invoke("anything at all", k=2, before=1, after=1) == []
    assert len(snapshot_of(retriever)) == 0
