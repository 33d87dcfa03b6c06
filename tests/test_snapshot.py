"""The snapshot (``windows/views.py``, built whole): every committed sentence in memory, searched exactly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
from langchain_expand.store.lexical import LocalSentence
from langchain_expand.store.records import unit_id
from langchain_expand.windows import guided
from langchain_expand.windows.growth import Growth, grow
from langchain_expand.windows.views import StoreViews

from .conftest import Make, load_docs, load_queries
from .memory import Deferred, ReadLog, exact_search, nearest_of, shown, snapshot_of


def test_on_a_snapshot_or_the_columns_growth_knows_every_sentence_it_weighs_and_runs_once_a_search(
    reader: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every sentence's similarity is in the snapshot's scores, or the columns': growth never waits on a fetch."""
    runs: list[Growth] = []

    def counted(*args: Any, **kwargs: Any) -> Growth:
        runs.append(grow(*args, **kwargs))
        return runs[-1]

    monkeypatch.setattr(guided, "grow", counted)
    queries = [q["query"] for q in load_queries("qmsum")[:4]]
    for settings, expected in (
        ({}, "once"),
        ({"performance": Performance(snapshot_limit=0)}, "once"),  # past the limit: the columns
        ({"performance": Performance(in_memory=False)}, "in rounds"),
    ):
        retriever = reader(lexical=True, **settings)
        retriever._views = StoreViews(lambda fn: fn())
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
    assert len(snapshot.columns) == retriever.vectorstore._collection.count()  # type: ignore[attr-defined]
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
    snapshot_of(snapshot)
    store = exact_search(reader(lexical=True, performance=Performance(cache_size=0, in_memory=False)))
    log = ReadLog(snapshot._vectors)
    for query in [q["query"] for q in load_queries("qmsum")[:4]]:
        for call in (
            {"max_tokens": 300},
            {"max_tokens": 2000},
            {"k": 3, "before": 1, "after": 2},
            {"max_tokens": 800, "before": 1, "after": 1},
            {"max_tokens": 2000, "filter": {"doc_id": "IS1004a"}},  # the store's exact search keeps to it too
            {"max_tokens": 600, "filter": {"doc_id": {"$in": ["ES2005a", "ES2013a"]}}},
        ):
            found = snapshot.invoke(query, **call)
            expected = store.invoke(query, **call)
            assert found
            assert shown(found) == shown(expected)  # scores too, to the last bit
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
        snapshot_of(retriever)
        answers.append(shown(retriever.invoke(query, max_tokens=600)))
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
    reader._views = StoreViews(lambda build: build())  # built in the query that finds a new mark
    reader.add_documents([Document("Rivers carry water to the sea. Fish swim in rivers.", id="rivers")])
    query = "which planet has the tallest volcano"
    assert all(d.metadata["doc_id"] == "rivers" for d in reader.invoke(query, max_tokens=200))
    assert reader._views.built is not None
    assert reader._views.built.whole

    mars = "Olympus Mons on Mars is the tallest volcano of any planet. It is three times as high as Everest."
    opened(False).add_documents([Document(mars, id="mars")])
    assert any(d.metadata["doc_id"] == "mars" for d in reader.invoke(query, max_tokens=200))
    assert not reader._views.built.whole  # built, but not whole: the store answered

    opened(True).add_documents([Document(mars, id="mars")])  # the copies, read back without embedding
    assert any(d.metadata["doc_id"] == "mars" for d in reader.invoke(query, max_tokens=200))
    assert reader._views.built.whole


def test_a_write_is_ranked_by_the_next_query_and_by_bm25_in_memory_once_built(
    tmp_path: Path, minilm: Embeddings
) -> None:
    """After a write, the next query finds the written document (the index ranks it), and starts the build that will."""
    store = chroma_store("ahead", persist_directory=tmp_path / "chroma", embeddings=minilm)
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(tmp_path / "lex.sqlite"))
    retriever._views = StoreViews(lambda build: build())  # built in the query that finds a new mark
    retriever.add_documents([Document("Rivers carry water to the sea. Fish swim in rivers.", id="rivers")])
    query = "the zorblat code"

    def current() -> Any:
        found = retriever._searched(None).current
        assert found is not None
        return found.bm25

    retriever.warm()
    unchanged = current()
    assert unchanged.search(query, 4) == unchanged.bm25.search(query, 4)
    assert all(hit.doc_id == "rivers" for hit in unchanged.search(query, 4))

    retriever.add_documents([Document("The zorblat code opens the door. Nobody knows it.", id="zorblat")])
    assert current() is None  # the build at the new mark runs now, and serves the next query
    assert any(d.metadata["doc_id"] == "zorblat" for d in retriever.invoke(query, max_tokens=200))
    moved = current()
    assert moved.search(query, 4)[0].doc_id == "zorblat"


def test_over_its_limit_the_snapshot_is_not_built_and_the_store_answers(reader: Make) -> None:
    limited = reader(lexical=True, performance=Performance(snapshot_limit=10))
    limited.warm()
    found = limited.invoke("who will design the remote control", max_tokens=500)
    assert found
    held = limited._views.built
    assert held is not None
    assert held.columns is not None
    assert not held.whole
    doc_id = held.columns.documents()[0]
    assert held.columns.copies(doc_id, held.columns.document(doc_id)[0], range(4)) == []  # no text held past the limit
    with pytest.raises(ValueError, match="snapshot_limit"):
        reader(lexical=True, performance=Performance(snapshot_limit=-1))


def test_between_a_write_and_its_build_queries_answer_as_the_build_does(tmp_path: Path, minilm: Embeddings) -> None:
    """Until the build at a new mark is done, the last one serves each document only at its head's revision.

    After a write, a rewrite and a delete, queries answered before the next build (the store and
    the lexical index searched, the last build's columns read where their revision holds) equal
    those answered after it, from the snapshot, with the store searched exactly.
    """
    lines = load_docs("friendsqa")[0]["text"].split("\n")
    scenes = [Document("\n".join(lines[i : i + 40]), id=f"scene-{i // 40}") for i in range(0, 200, 40)]
    store = chroma_store("scenes", persist_directory=tmp_path / "chroma", embeddings=minilm)
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(tmp_path / "lexical.sqlite"))
    builds = Deferred()
    retriever._views = StoreViews(builds)
    retriever.add_documents(scenes[:4])
    first = snapshot_of(retriever)

    retriever.add_documents([scenes[4]])  # new
    retriever.add_documents([Document(scenes[0].page_content + "\nRoss Geller: One more line .", id="scene-0")])
    retriever.delete(["scene-1"])
    exact_search(retriever)
    calls: list[dict[str, Any]] = [{"max_tokens": 300}, {"max_tokens": 2000}, {"k": 3, "before": 1, "after": 1}]
    queries = [q["query"] for q in load_queries("friendsqa")[:3]] + ["one more line"]
    before = [retriever.invoke(q, **call) for q in queries for call in calls]
    assert retriever._views.built is first  # not built again yet
    builds.run()
    after = [retriever.invoke(q, **call) for q in queries for call in calls]
    assert retriever._views.built is not first
    assert retriever._views.built.whole
    assert [shown(found) for found in before] == [shown(found) for found in after]
    ids = {d.metadata["doc_id"] for found in after for d in found}
    assert "scene-1" not in ids
    assert {"scene-0", "scene-4"} <= ids


def test_an_empty_store_with_a_lexical_index_answers_nothing(tmp_path: Path, minilm: Embeddings) -> None:
    store = chroma_store("empty", persist_directory=tmp_path / "chroma", embeddings=minilm)
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(tmp_path / "lexical.sqlite"))
    assert retriever.invoke("anything at all", max_tokens=300) == []
    assert retriever.invoke("anything at all", k=2, before=1, after=1) == []
    assert len(snapshot_of(retriever).columns) == 0


def test_copies_whose_head_was_never_written_are_not_held(tmp_path: Path, minilm: Embeddings) -> None:
    """A write killed after its copies, before its records and head: nothing of it is searched or served."""
    store = chroma_store("orphans", persist_directory=tmp_path / "chroma", embeddings=minilm)
    lexical = LexicalIndex(tmp_path / "lexical.sqlite")
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=lexical)
    retriever.add_documents([Document("Rivers carry water to the sea. Fish swim in rivers.", id="rivers")])
    sentences = ["Olympus Mons on Mars is the tallest volcano of any planet.", "It is three times as high as Everest."]
    vectors = minilm.embed_documents(sentences)
    lexical.replace(
        [
            (
                "mars",
                "r1",
                [
                    LocalSentence(i, s, 0, len(s), " ", vector=v)
                    for i, (s, v) in enumerate(zip(sentences, vectors, strict=True))
                ],
            )
        ]
    )
    held = snapshot_of(retriever)
    assert held.columns is not None
    assert held.columns.document("mars") is None
    for call in ({"max_tokens": 200}, {"k": 3}):
        found = retriever.invoke("which planet has the tallest volcano", **call)
        assert found
        assert {d.metadata["doc_id"] for d in found} == {"rivers"}
