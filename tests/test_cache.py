"""The sentence cache, the lexical index's local copies and their snapshot: fewer store reads, never a stale record."""

from __future__ import annotations

import gc
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
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
    TokenCounter,
    chroma_store,
    default_embeddings,
)
from langchain_expand.store.adapters import StoreAdapter
from langchain_expand.store.adapters.base import tie_ordered
from langchain_expand.store.lexical import LocalSentence
from langchain_expand.store.records import unit_id
from langchain_expand.store.search import VectorSearch
from langchain_expand.text.cues import cues
from langchain_expand.text.tokens import _splits
from langchain_expand.windows import guided, reads
from langchain_expand.windows import hits as hits_module
from langchain_expand.windows.bm25 import LexicalRanking, ranked_bm25
from langchain_expand.windows.cache import HeadsAtMark
from langchain_expand.windows.figures import Figures, QueryFigures
from langchain_expand.windows.growth import Growth, grow
from langchain_expand.windows.similarity import cosines
from langchain_expand.windows.snapshot import Snapshot
from langchain_expand.windows.snapshot import build as build_snapshot
from langchain_expand.windows.views import StoreViews

from .conftest import as_documents, load_docs, load_queries, tracked_slots

Make = Callable[..., SentenceWindowRetriever]


def index_of(folder: Path, corpus: str, minilm: Embeddings) -> tuple[Any, Path]:
    """``corpus``'s test documents in one Chroma collection and lexical index under ``folder``."""
    store = chroma_store(corpus, persist_directory=folder / "chroma", embeddings=minilm)
    lexical = folder / "lexical.sqlite"
    SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(lexical)).add_documents(
        as_documents(load_docs(corpus))
    )
    return store, lexical


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings) -> tuple[Any, Path]:
    """The test meetings, for the read-only tests here."""
    return index_of(tmp_path_factory.mktemp("cache"), "qmsum", minilm)


def sqlite_copy(source: Path, target: Path) -> Path:
    """A consistent copy of a SQLite file, its write-ahead log included (SQLite's backup)."""
    with sqlite3.connect(source) as read, sqlite3.connect(target) as write:
        read.backup(write)
    return target


@pytest.fixture
def reader(indexed: tuple[Any, Path]) -> Make:
    """A new retriever over the indexed meetings: its own store adapter and cache; ``lexical=True`` opens the index."""
    store, path = indexed

    def make(*, lexical: bool = False, **kwargs: Any) -> SentenceWindowRetriever:
        return SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path) if lexical else None, **kwargs)

    return make


class ReadLog:
    """Every id the retriever reads from its store, by either read."""

    def __init__(self, adapter: StoreAdapter) -> None:
        self.ids: list[str] = []
        for name in ("get_by_ids", "with_vectors"):
            original = getattr(adapter, name)
            object.__setattr__(adapter, name, self._logged(original))

    def _logged(self, original: Callable[[Sequence[str]], Any]) -> Callable[[Sequence[str]], Any]:
        def read(ids: Sequence[str]) -> Any:
            self.ids.extend(ids)
            return original(ids)

        return read

    def taken(self) -> list[str]:
        ids, self.ids = self.ids, []
        return ids


def shown(docs: list[Document]) -> list[tuple[str, dict]]:
    return [(d.page_content, d.metadata) for d in docs]


def test_a_repeated_guided_query_reads_only_the_heads_again(reader: Make) -> None:
    retriever = reader()
    log = ReadLog(retriever._vectors)
    query = "who will design the remote control"
    first = retriever.invoke(query, max_tokens=1000)
    cold = log.taken()
    again = retriever.invoke(query, max_tokens=1000)
    warm = log.taken()
    assert shown(again) == shown(first)
    assert len(cold) > 50  # hits' neighbours, read with their vectors
    assert warm
    assert all(i.endswith("::0") for i in warm)  # each document's head, for its revision


@pytest.mark.parametrize(
    "settings",
    # a snapshot; past its limit (BM25 and figures built in the query); no snapshot; none of it (heads kept)
    [
        {},
        {"performance": Performance(snapshot_limit=1)},
        {"performance": Performance(snapshot_limit=0)},
        {"performance": Performance(in_memory=False)},
    ],
)
@pytest.mark.parametrize("writer_lexical", ["shared", "none"])
def test_a_document_rewritten_or_deleted_by_another_retriever_is_never_served_from_memory(
    tmp_path: Path, minilm: Embeddings, writer_lexical: str, settings: dict[str, Any]
) -> None:
    """With ``none``, the reader's lexical index keeps its local copies of the old version."""

    def opened(lexical: bool) -> SentenceWindowRetriever:
        store = chroma_store("shared", persist_directory=tmp_path / "chroma", embeddings=minilm)
        index = LexicalIndex(tmp_path / "lexical.sqlite") if lexical else None
        retriever = SentenceWindowRetriever(vectorstore=store, lexical=index, **settings)
        retriever._views = StoreViews(LexicalRanking(lambda fn: fn()))  # past the limit, built in the query
        return retriever

    words = ["lamp", "chair", "desk", "shelf", "rug", "clock", "vase", "mirror", "sofa", "stool"]
    old = " ".join(f"The {w} in room {i} is painted red." for i, w in enumerate(words))
    new = old.replace("painted red", "painted blue")
    reader, writer = opened(True), opened(True)
    writer.add_documents([Document(old, id="rooms"), Document("Unrelated text about rivers. Fish swim.", id="other")])
    query = "what colour is the desk in room 2"
    assert any("red" in d.page_content for d in reader.invoke(query, max_tokens=200))

    if writer_lexical == "none":
        writer = opened(False)
    writer.add_documents([Document(new, id="rooms")])
    found = reader.invoke(query, max_tokens=200)
    rooms = [d for d in found if d.metadata["doc_id"] == "rooms"]
    assert rooms
    for doc in rooms:
        assert doc.page_content == new[doc.metadata["start_index"] : doc.metadata["end_index"]]
        assert "red" not in doc.page_content

    writer.delete(["rooms"])
    assert all(d.metadata["doc_id"] == "other" for d in reader.invoke(query, max_tokens=200))


def test_the_cache_changes_no_answer_and_keeps_at_most_cache_size_records(reader: Make) -> None:
    cached = reader(performance=Performance(cache_size=300))
    uncached = reader(performance=Performance(cache_size=0))
    queries = [q["query"] for q in load_queries("qmsum")[:4]]
    for budget in (300, 2000):
        for query in queries + queries:  # each asked twice: the second time from memory
            assert shown(cached.invoke(query, max_tokens=budget)) == shown(uncached.invoke(query, max_tokens=budget))
            assert 0 < len(cached._cache) <= 300


def test_without_a_cache_every_query_reads_its_records_again(reader: Make) -> None:
    retriever = reader(performance=Performance(cache_size=0))
    log = ReadLog(retriever._vectors)
    retriever.invoke("the budget of the remote", max_tokens=800)
    first = log.taken()
    retriever.invoke("the budget of the remote", max_tokens=800)
    assert sorted(log.taken()) == sorted(first)
    assert len(retriever._cache) == 0


def test_guided_answers_are_the_same_whether_the_search_returns_ids_or_records(reader: Make) -> None:
    by_ids = reader(performance=Performance(cache_size=0))
    by_records = reader(performance=Performance(cache_size=0))
    object.__setattr__(by_records._vectors, "search_ids", lambda *args, **kwargs: None)  # as on any other store
    for query in [q["query"] for q in load_queries("qmsum")[:4]]:
        for budget in (300, 2000):
            assert shown(by_ids.invoke(query, max_tokens=budget)) == shown(by_records.invoke(query, max_tokens=budget))


def test_the_local_copies_change_no_answer_and_spare_the_store_its_reads(
    reader: Make, indexed: tuple[Any, Path], tmp_path: Path
) -> None:
    """Indexed with cl100k; ``o200k_base`` reads the same copies but cannot use their counts."""
    bare = LexicalIndex(sqlite_copy(indexed[1], tmp_path / "bare.sqlite"))
    with bare._db:
        bare._db.execute(f"DELETE FROM {bare.table}_records")  # the ranking alone: every record from the store
    queries = [q["query"] for q in load_queries("qmsum")[:4]]
    for encoding in ("cl100k_base", "o200k_base"):
        count = TokenCounter(encoding)
        copied = reader(
            lexical=True, performance=Performance(cache_size=0, in_memory=False), token_counter=count
        )  # copies read from SQLite
        from_store = reader(performance=Performance(cache_size=0, in_memory=False), token_counter=count).model_copy(
            update={"lexical": bare}
        )
        log = ReadLog(copied._vectors)
        for query in queries:
            for call in ({"max_tokens": 300}, {"max_tokens": 2000}, {"k": 3, "before": 1, "after": 2}):
                found = copied.invoke(query, **call)
                assert shown(found) == shown(from_store.invoke(query, **call))
                assert all(d.metadata["tokens"] == count(d.page_content) for d in found)
                read = log.taken()
                assert read
                assert all(i.endswith("::0") for i in read)  # heads only: each document's revision, fresh


class LoggedCounter(TokenCounter):
    """``cl100k_base``, noting every text it counts."""

    def __init__(self) -> None:
        super().__init__("cl100k_base")
        self.texts: list[str] = []

    def __call__(self, text: str) -> int:
        self.texts.append(text)
        return super().__call__(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        self.texts.extend(texts)
        return super().count_many(texts)


@pytest.mark.parametrize("snapshot_limit", [0, 1])
def test_past_the_snapshot_limit_windows_are_built_and_counted_from_the_local_copies(
    reader: Make, snapshot_limit: int
) -> None:
    """A window's sentences come from the copies growth read, and its count from theirs: no record, no recount.

    Where the copies' counts add up exactly (:func:`~langchain_expand.text.tokens.chained_count`:
    every inner sentence holds a space after a word), the window's text is never counted.
    (A window cut to fit the budget is counted as cut.)
    """
    counter = LoggedCounter()
    retriever = reader(lexical=True, token_counter=counter, performance=Performance(snapshot_limit=snapshot_limit))
    log = ReadLog(retriever._vectors)
    chained = 0
    for query in [q["query"] for q in load_queries("qmsum")[:3]]:
        found = retriever.invoke(query, max_tokens=2000)
        assert all(d.metadata["tokens"] == TokenCounter("cl100k_base")(d.page_content) for d in found)
        for window in found:
            start, spans = window.metadata["start_index"], window.metadata["sentences"]
            inner = [window.page_content[a - start : b - start] for a, b in spans[1:-1]]
            if len(spans) > 1 and not window.metadata["truncated"] and all(_splits(text) for text in inner):
                chained += 1
                assert window.page_content not in counter.texts
        assert all(i.endswith("::0") for i in log.taken())  # heads only
        counter.texts.clear()
    assert chained > 5


# -- the snapshot -------------------------------------------------------------------------------


def exact_search(retriever: SentenceWindowRetriever) -> SentenceWindowRetriever:
    """``retriever`` with its store searched exactly: every vector the store holds scored by cosine.

    Ties (to 6 decimals) go by document id, then position: every path's rule (``tie_ordered``).
    """
    got = retriever.vectorstore._collection.get(include=["embeddings"])  # type: ignore[attr-defined]
    ids, matrix = got["ids"], np.asarray(got["embeddings"], dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1)

    def search_ids(vector: Sequence[float], k: int, **kwargs: Any) -> list[tuple[str, float]]:
        q = np.asarray(vector, dtype=np.float64)
        similarity = matrix @ q / (norms * np.linalg.norm(q))
        scored = [(i, retriever._vectors.relevance(1.0 - s)) for i, s in zip(ids, similarity.tolist(), strict=True)]
        return tie_ordered(scored, str)[:k]

    object.__setattr__(retriever._vectors, "search_ids", search_ids)
    return retriever


def snapshot_of(retriever: SentenceWindowRetriever) -> Snapshot:
    assert retriever.lexical is not None
    current = retriever._current_snapshot(retriever.lexical, VectorSearch(retriever._vectors, "-"), 1)
    assert current is not None
    return current[0]


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
        found = snapshot.scores(vector).nearest(30)
        expected = exact.search_ids(vector, 30)
        assert [unit_id(*p) for p, _ in found] == [i for i, _ in expected]
        assert [s for _, s in found] == pytest.approx([s for _, s in expected], abs=1e-6)
        assert snapshot.bm25.search(query, 45) == retriever.lexical.search(query, 45)  # type: ignore[union-attr]


def unscored(docs: list[Document]) -> list[tuple[str, dict]]:
    """The units as :func:`shown`, without their scores (float32 sums differ in the last bits)."""
    return [(d.page_content, {k: v for k, v in d.metadata.items() if k != "score"}) for d in docs]


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


def test_bm25_ranked_while_the_query_is_embedded_counts_only_where_its_snapshot_is_still_current(
    tmp_path: Path, minilm: Embeddings
) -> None:
    """The last snapshot's BM25 runs beside the embedding; after a write its ranking is stale and is not used."""
    store = chroma_store("ahead", persist_directory=tmp_path / "chroma", embeddings=minilm)
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(tmp_path / "lex.sqlite"))
    retriever.add_documents([Document("Rivers carry water to the sea. Fish swim in rivers.", id="rivers")])
    query = "the zorblat code"

    def current() -> Any:
        assert retriever.lexical is not None
        found = retriever._current_snapshot(retriever.lexical, VectorSearch(retriever._vectors, query), 4)
        assert found is not None
        return found[1]

    retriever.invoke(query, max_tokens=200)  # builds the snapshot
    unchanged = current()
    assert unchanged.started is not None
    assert unchanged.search(query, 4) == unchanged.bm25.search(query, 4)

    retriever.add_documents([Document("The zorblat code opens the door. Nobody knows it.", id="zorblat")])
    moved = current()
    assert moved.started is None  # searched in the snapshot before the write: not used
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
    assert grown.ids == whole.ids
    assert grown.revs == whole.revs
    assert np.array_equal(grown._matrix, whole._matrix)
    assert [h.metadata for h, _ in grown.heads(whole.revs)] == [h.metadata for h, _ in whole.heads(whole.revs)]
    vector = minilm.embed_query(query)
    assert grown.scores(vector).nearest(40) == whole.scores(vector).nearest(40)
    for text in [query, "baby cigars waiting room", "mucus plug water broke", "one more line"]:
        assert grown.bm25.search(text, 30) == whole.bm25.search(text, 30) == lexical.search(text, 30)
    assert all(d.metadata["doc_id"] != "scene-1" for d in found)


def test_an_empty_store_with_a_lexical_index_answers_nothing(tmp_path: Path, minilm: Embeddings) -> None:
    store = chroma_store("empty", persist_directory=tmp_path / "chroma", embeddings=minilm)
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(tmp_path / "lexical.sqlite"))
    assert retriever.invoke("anything at all", max_tokens=300) == []
    assert retriever.invoke("anything at all", k=2, before=1, after=1) == []
    assert snapshot_of(retriever).ids == []


def test_a_sentences_similarity_does_not_depend_on_what_was_read_with_it() -> None:
    """Two reads of the same sentences in another order or grouping give bit-identical scores
    (a matrix-vector product in BLAS rounds a row by its place in the batch: 359 of 360 placings
    of one row differed in the last bit before)."""
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((64, 384)).astype(np.float32)
    query = rng.standard_normal(384).tolist()
    alone = cosines([vectors[0]], query)[0]
    for size in (2, 3, 5, 8, 13, 64):
        for place in range(size):
            batch = [*vectors[1:size]]
            batch.insert(place, vectors[0])
            assert cosines(batch, query)[place] == alone


class Deferred:
    """A ``submit`` that keeps what it is given until told to run it: a build beside the queries, held."""

    def __init__(self) -> None:
        self.waiting: list[Callable[[], None]] = []

    def __call__(self, fn: Callable[[], None]) -> None:
        self.waiting.append(fn)

    def run(self) -> None:
        waiting, self.waiting = self.waiting, []
        for fn in waiting:
            fn()


class Unranked(LexicalIndex):
    """A lexical index that does not list what it ranks: it answers every query itself."""

    def ranked(self) -> None:
        return None


def past_the_limit(reader: Make, submit: Deferred, **kwargs: Any) -> SentenceWindowRetriever:
    """A retriever over the test meetings whose snapshot limit they are past, its builds held by ``submit``."""
    retriever = reader(lexical=True, performance=Performance(snapshot_limit=10), **kwargs)
    retriever._views = StoreViews(LexicalRanking(submit))
    return retriever


def test_past_the_snapshot_limit_bm25_in_memory_ranks_and_answers_as_the_index_does(
    reader: Make, indexed: tuple[Any, Path]
) -> None:
    submit = Deferred()
    retriever = past_the_limit(reader, submit)
    by_index = retriever.model_copy(update={"lexical": Unranked(indexed[1])})
    by_index._views = StoreViews(LexicalRanking(Deferred()))
    lexical = retriever.lexical
    assert lexical is not None
    bm25 = ranked_bm25(lexical)
    assert bm25 is not None
    queries = [q["query"] for q in load_queries("qmsum")]
    for query in queries:
        assert bm25.search(query, 45) == lexical.search(query, 45)
    first = retriever.invoke(queries[0], max_tokens=1000)  # no ranking yet: the index answers, one build starts
    assert len(submit.waiting) == 1
    assert retriever.invoke(queries[1], max_tokens=1000) == by_index.invoke(queries[1], max_tokens=1000)
    assert len(submit.waiting) == 1  # one build at a time
    submit.run()
    searched = spied(lexical)
    for query in queries:
        assert retriever.invoke(query, max_tokens=1000) == by_index.invoke(query, max_tokens=1000), query
    assert searched == []  # every query was ranked in memory
    assert retriever.invoke(queries[0], max_tokens=1000) == first
    ranking = retriever._views.ranking.latest(lexical)
    assert ranking is not None
    threads: list[str] = []
    ranked = ranking.search
    ranking.search = lambda query, k: threads.append(threading.current_thread().name) or ranked(query, k)  # type: ignore[method-assign]
    retriever.invoke(queries[1], max_tokens=1000)
    assert len(threads) == 1  # ranked once, beside the query's embedding, as a snapshot's BM25 is
    assert threads[0].startswith("langchain-expand")


def test_past_the_snapshot_limit_the_stores_search_runs_beside_bm25_while_it_ranks(
    reader: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At a million sentences BM25 in memory takes 4 ms, as long as a near-free embedding and the
    # store's search together: that search then starts beside it. Where BM25 was done while the
    # query was embedded (a real model, a smaller store), the search runs on the query's thread:
    # a hand-over to the pool cost 0.3-0.7 ms there and saved nothing.
    queries = [q["query"] for q in load_queries("qmsum")[:3]]
    answers: dict[str, list[list[Document]]] = {}
    embedded = VectorSearch.vector
    for setting in ("ranking", "ranked", "snapshot"):
        retriever = reader(
            lexical=True, **({} if setting == "snapshot" else {"performance": Performance(snapshot_limit=0)})
        )
        retriever._views = StoreViews(LexicalRanking(lambda fn: fn()))
        retriever.invoke(queries[0], max_tokens=100)  # past the limit, the build runs now
        threads: list[str] = []
        searching = threading.Event()
        searched = retriever._vectors.search_ids

        def spy(
            *args: Any, searched: Any = searched, threads: Any = threads, searching: Any = searching, **kw: Any
        ) -> Any:
            threads.append(threading.current_thread().name)
            searching.set()
            return searched(*args, **kw)

        object.__setattr__(retriever._vectors, "search_ids", spy)
        started: list[Future[Any]] = []
        beside = retriever._views.beside

        def recorded(fn: Any, *args: Any, beside: Any = beside, started: Any = started, **kwargs: Any) -> Any:
            started.append(beside(fn, *args, **kwargs))
            return started[-1]

        retriever._views.beside = recorded  # type: ignore[assignment]
        ranking = retriever._views.ranking.latest(retriever.lexical)  # type: ignore[arg-type]
        with monkeypatch.context() as patch:
            if setting == "ranking":
                assert ranking is not None
                bm25 = ranking.search

                def held(query: str, k: int, bm25: Any = bm25, searching: Any = searching) -> Any:
                    assert searching.wait(30)  # BM25 still ranks when the store's search starts
                    return bm25(query, k)

                patch.setattr(ranking, "search", held)
            if setting == "ranked":  # the query is embedded once the mark is read and BM25 has ranked

                def slow(self: VectorSearch, started: list[Future[Any]] = started) -> Any:
                    wait(list(started))
                    return embedded(self)

                patch.setattr(VectorSearch, "vector", slow)
            answers[setting] = []
            for query in queries:
                searching.clear()
                started.clear()
                answers[setting].append(retriever.invoke(query, max_tokens=1000))
        if setting == "ranking":
            assert len(threads) == len(queries)  # once a query, on the views' pool
            assert all(name.startswith("langchain-expand") for name in threads)
        elif setting == "ranked":
            assert threads == ["MainThread"] * len(queries)
        else:
            assert threads == []  # the snapshot answers: no store search started for nothing
        threads.clear()
        assert retriever.invoke(queries[0], max_tokens=1000, window="fixed", k=3)
        assert threads == []  # fixed windows read records, not ids: none started
    assert answers["ranking"] == answers["ranked"]


def test_a_search_started_beside_answers_its_own_k_once(reader: Make) -> None:
    retriever = reader()
    asked: list[int] = []
    searched = retriever._vectors.search_ids

    def spy(vector: Sequence[float], k: int, **kwargs: Any) -> Any:
        asked.append(k)
        return searched(vector, k, **kwargs)

    object.__setattr__(retriever._vectors, "search_ids", spy)
    dense = VectorSearch(retriever._vectors, load_queries("qmsum")[0]["query"])
    dense.ids_beside(8, lambda fn, *args, **kwargs: ThreadPoolExecutor(1).submit(fn, *args, **kwargs))
    first = dense.ids(8)
    assert asked == [8]
    assert dense.ids(8) == first  # asked again (a refill after a write): searched again
    assert dense.ids(16)[:8] == first  # type: ignore[index]
    assert asked == [8, 8, 16]


def test_past_the_snapshot_limit_a_write_is_ranked_by_the_next_query(tmp_path: Path, minilm: Embeddings) -> None:
    submit = Deferred()
    store = chroma_store("past-limit", persist_directory=tmp_path / "chroma", embeddings=minilm)
    lexical = LexicalIndex(tmp_path / "lexical.sqlite")
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=lexical, performance=Performance(snapshot_limit=2))
    retriever._views = StoreViews(LexicalRanking(submit))
    retriever.add_documents(as_documents(load_docs("emanual")[:1]))
    retriever.invoke("How do I reset the remote?", max_tokens=300)
    submit.run()  # the ranking is current
    searched = spied(lexical)
    retriever.invoke("How do I reset the remote?", max_tokens=300)
    assert searched == []
    retriever.add_documents([Document("The quokka warranty covers zygomorphic remotes. It lasts a year.", id="new")])
    found = retriever.invoke("quokka zygomorphic", max_tokens=300)
    assert searched == ["quokka zygomorphic"]  # the mark moved: the index ranks until the ranking is built again
    assert found[0].metadata["doc_id"] == "new"
    submit.run()
    assert retriever.invoke("quokka zygomorphic", max_tokens=300) == found
    assert searched == ["quokka zygomorphic"]  # ranked in memory, the new document in it


def spied(lexical: LexicalIndex) -> list[str]:
    """The queries ``lexical`` ranks itself from now on."""
    searched: list[str] = []
    original = lexical.search

    def search(query: str, k: int) -> list[Any]:
        searched.append(query)
        return original(query, k)

    lexical.search = search  # type: ignore[method-assign]
    return searched


@pytest.mark.parametrize("broken", ["ranked", "figures"])
def test_a_ranking_or_figures_that_cannot_be_built_leave_the_index_answering(
    tmp_path: Path, minilm: Embeddings, caplog: pytest.LogCaptureFixture, broken: str
) -> None:
    def fails(self: LexicalIndex) -> Any:
        msg = "disk gone"
        raise OSError(msg)

    broken_index = type("Broken", (LexicalIndex,), {broken: fails})
    store = chroma_store("broken", persist_directory=tmp_path / "chroma", embeddings=minilm)
    retriever = SentenceWindowRetriever(
        vectorstore=store, lexical=broken_index(tmp_path / "lexical.sqlite"), performance=Performance(snapshot_limit=2)
    )
    retriever._views = StoreViews(LexicalRanking(lambda fn: fn()))  # built at once, in the query
    retriever.add_documents(as_documents(load_docs("emanual")[:1]))
    reads = SentenceWindowRetriever(
        vectorstore=store, lexical=LexicalIndex(tmp_path / "lexical.sqlite"), performance=Performance(in_memory=False)
    )
    answer = retriever.invoke("How do I reset the remote?", max_tokens=300)
    assert answer
    assert "disk gone" in caplog.text
    assert retriever.invoke("How do I reset the remote?", max_tokens=300) == answer
    assert (retriever._views.ranking.figures(retriever.lexical) is None) == (broken == "figures")
    assert shown(answer) == shown(reads.invoke("How do I reset the remote?", max_tokens=300))


def test_past_the_snapshot_limit_heads_are_read_once_a_change_mark(reader: Make) -> None:
    retriever = past_the_limit(reader, Deferred())
    log = ReadLog(retriever._vectors)
    query = load_queries("qmsum")[0]["query"]
    first = retriever.invoke(query, max_tokens=1000)
    assert any(i.endswith("::0") for i in log.taken())  # read from the store at the first query
    assert retriever.invoke(query, max_tokens=1000) == first
    assert not any(i.endswith("::0") for i in log.taken())  # the mark has not moved: none read again


@pytest.fixture(scope="module")
def passages(tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings) -> tuple[Any, Path]:
    """The 40 TAT-QA passages: many documents, of which a query meets a few."""
    return index_of(tmp_path_factory.mktemp("passages"), "tatqa", minilm)


def test_past_the_snapshot_limit_every_head_is_read_ahead_once_the_ranking_is_built(
    passages: tuple[Any, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, path = passages
    queries = [q["query"] for q in load_queries("tatqa")[:8]]
    answers: dict[bool, list[list[Document]]] = {}
    for ahead in (True, False):
        with monkeypatch.context() as patch:
            if not ahead:
                patch.setattr(HeadsAtMark, "claim_fill", lambda self: False)
            submit = Deferred()
            retriever = SentenceWindowRetriever(
                vectorstore=store, lexical=LexicalIndex(path), performance=Performance(snapshot_limit=10)
            )
            retriever._views = StoreViews(LexicalRanking(submit))
            assert retriever.lexical is not None
            heads = {unit_id(d, 0) for d in retriever.lexical.documents()}
            log = ReadLog(retriever._vectors)
            retriever.invoke(queries[0], max_tokens=300)  # the ranking's build starts
            submit.run()
            retriever.clear_cache()  # the heads that query read, forgotten
            log.taken()
            assert retriever.invoke(queries[0], max_tokens=300)  # finds the ranking built
            met = {i for i in log.taken() if i.endswith("::0")}
            assert met
            assert met < heads  # the heads this query met: read by it, not all
            assert len(submit.waiting) == (1 if ahead else 0)  # the fill, claimed once
            submit.run()
            assert set(log.taken()) == (heads - met if ahead else set())  # every other head, once
            answers[ahead] = [retriever.invoke(q, max_tokens=1000) for q in queries]
            read = [i for i in log.taken() if i.endswith("::0")]
            if ahead:
                assert read == []  # every head is known: none read
            else:
                assert read  # the queries read the heads they met
    assert answers[True] == answers[False]


def test_heads_read_ahead_are_kept_only_at_their_mark_and_while_there_is_room(
    reader: Make, caplog: pytest.LogCaptureFixture
) -> None:
    retriever = reader(lexical=True)
    assert retriever.lexical is not None
    docs = sorted(retriever.lexical.documents())
    store = retriever._vectors
    mark = store.marked()
    assert mark is not None
    moved = HeadsAtMark(mark, 100)
    moved.fill(store, docs, lambda: "another mark")  # a writer finished meanwhile: its heads may be newer
    assert moved.found([unit_id(d, 0) for d in docs]) == []
    small = HeadsAtMark(mark, 2)
    assert small.claim_fill()
    assert not small.claim_fill()  # one fill a mark
    small.fill(store, docs, store.marked)
    held = small.found([unit_id(d, 0) for d in docs])
    assert len(held) == 2
    assert [doc.metadata for doc, _ in held] == [d.metadata for d in store.get_by_ids([h.id for h, _ in held])]  # type: ignore[misc]
    assert not HeadsAtMark(mark, 0).claim_fill()  # no room: nothing to fill
    broken = reader()._vectors

    def unreadable(ids: Sequence[str]) -> Any:
        msg = "disk I/O error"
        raise sqlite3.OperationalError(msg)

    object.__setattr__(broken, "with_vectors", unreadable)
    failing = HeadsAtMark(mark, 100)
    failing.fill(broken, docs, store.marked)  # logged; the queries read the heads they need
    assert "could not be read ahead" in caplog.text
    assert failing.found([unit_id(d, 0) for d in docs]) == []


@pytest.mark.parametrize("cache_size", [20_000, 0])
def test_with_the_snapshot_off_heads_are_read_once_a_change_mark_where_the_cache_keeps_them(
    reader: Make, cache_size: int
) -> None:
    # in_memory=False turns the snapshot, BM25 and growth's figures in memory off; the heads
    # read at the store's change mark stay, as the sentence cache does (a query over TAT-QA's
    # 60 documents read every head again: 2.4 ms).
    retriever = reader(lexical=True, performance=Performance(in_memory=False, cache_size=cache_size))
    log = ReadLog(retriever._vectors)
    query = load_queries("qmsum")[0]["query"]
    first = retriever.invoke(query, max_tokens=1000)
    assert any(i.endswith("::0") for i in log.taken())
    assert retriever.invoke(query, max_tokens=1000) == first
    again = [i for i in log.taken() if i.endswith("::0")]
    if cache_size:
        assert again == []  # the mark has not moved: none read again
    else:
        assert again  # nothing is kept: read at every query
    retriever.clear_cache()
    assert retriever.invoke(query, max_tokens=1000) == first
    assert any(i.endswith("::0") for i in log.taken())  # forgotten with the sentences


def test_past_the_snapshot_limit_growth_starts_knowing_each_seeds_neighbours(
    reader: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first round would otherwise guess from its first step: every seed's neighbours are fetched before it."""
    first_rounds: list[list[bool]] = []

    def grown(seeds: list[Any], sentences: Any, *args: Any, resume: Any = None, **kwargs: Any) -> Growth:
        if resume is None and not kwargs.get("taken"):
            first_rounds.append(
                [
                    sentences.get((s.doc_id, j)) is not None
                    for s in seeds
                    for j in (s.index - 1, s.index + 1)
                    if 0 <= j < s.n
                ]
            )
        return grow(seeds, sentences, *args, resume=resume, **kwargs)

    monkeypatch.setattr(guided, "grow", grown)
    retriever = past_the_limit(reader, Deferred())
    for query in [q["query"] for q in load_queries("qmsum")[:2]]:
        assert retriever.invoke(query, max_tokens=1000)
    assert first_rounds
    assert all(all(known) and known for known in first_rounds)


class CountedCopies(LexicalIndex):
    """The lexical index, counting the local copies each query reads from SQLite."""

    read: int = 0

    def sentences_of(self, wanted: Mapping[tuple[str, str], Sequence[int]]) -> dict[tuple[str, str], list[Any]]:
        type(self).read += sum(len(indices) for indices in wanted.values())
        return super().sentences_of(wanted)


@pytest.mark.parametrize("cache_size", [20_000, 0])
def test_past_the_snapshot_limit_local_copies_are_read_once_while_cached(
    reader: Make, indexed: tuple[Any, Path], cache_size: int
) -> None:
    class Counted(CountedCopies):
        read = 0

    retriever = reader(performance=Performance(snapshot_limit=10, cache_size=cache_size)).model_copy(
        update={"lexical": Counted(indexed[1])}
    )
    retriever._views = StoreViews(LexicalRanking(Deferred()))
    query = load_queries("qmsum")[1]["query"]
    first = retriever.invoke(query, max_tokens=1000)
    assert Counted.read > 0
    before = Counted.read
    assert shown(retriever.invoke(query, max_tokens=1000)) == shown(first)
    if cache_size:
        assert Counted.read == before  # every copy the query wanted was held, at its head's revision
        assert 0 < len(retriever._cache._copies) <= cache_size
        gc.collect()  # held copies add nothing to what a full collection scans
        assert not any(gc.is_tracked(copy) for copy in retriever._cache._copies.values())
    else:
        assert Counted.read == 2 * before  # no cache: read again


def test_past_the_snapshot_limit_a_rewritten_document_is_served_new_at_the_next_query(
    tmp_path: Path, minilm: Embeddings
) -> None:
    store = chroma_store("rewritten", persist_directory=tmp_path / "chroma", embeddings=minilm)
    retriever = SentenceWindowRetriever(
        vectorstore=store, lexical=LexicalIndex(tmp_path / "lexical.sqlite"), performance=Performance(snapshot_limit=2)
    )
    retriever._views = StoreViews(LexicalRanking(lambda fn: fn()))
    old = "The warranty lasts two years. Keep the receipt. Call the service line."
    new = "The warranty lasts five years. Keep the box. Write to the service desk."
    retriever.add_documents([Document(old, id="memo"), Document("Unrelated words about cats. Dogs too.", id="pets")])
    assert retriever.invoke("How long does the warranty last?", max_tokens=200)[0].page_content == old
    retriever.add_documents([Document(new, id="memo")])
    assert retriever.invoke("How long does the warranty last?", max_tokens=200)[0].page_content == new


# -- growth's figures past the limit -----------------------------------------------------


class PositionsRead(LexicalIndex):
    """The lexical index, keeping every position whose local copy a query reads from SQLite."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read: list[tuple[str, int]] = []
        self.name = ""

    def sentences_of(self, wanted: Mapping[tuple[str, str], Sequence[int]]) -> dict[tuple[str, str], list[Any]]:
        self.read += [(doc_id, i) for (doc_id, _), indices in wanted.items() for i in indices]
        return super().sentences_of(wanted)


def test_growths_figures_are_the_local_copies_figures_at_their_revision(indexed: tuple[Any, Path]) -> None:
    lexical = LexicalIndex(indexed[1])
    rows = lexical.figures()
    assert rows is not None
    figures = Figures(rows)
    assert len(figures) == lexical.count()
    query = np.random.default_rng(7).normal(size=384).tolist()
    seen = figures.for_query(query)
    copies: dict[str, tuple[str, list[Any]]] = {}
    for doc_id, rev, copy in lexical.copies():
        copies.setdefault(doc_id, (rev, []))[1].append(copy)
    checked = 0
    for doc_id, (rev, kept) in copies.items():
        with_vectors = [c for c in kept if c.vector is not None]
        expected = cosines([c.vector for c in with_vectors], query)  # as a read computes them, all at once
        for copy, similarity in zip(with_vectors, expected, strict=True):
            found = seen.sentence((doc_id, copy.i), rev, copy.counter)
            assert found is not None
            assert found.tokens == copy.tokens
            assert found.similarity == similarity  # to the last bit, whatever block it falls in
            assert (found.tied, found.heading) == tuple(cues(copy.text, copy.gap))
            checked += 1
        head = kept[0]
        assert head.i == 0
        assert head.vector is None  # the store holds a head's vector: the query gives it
        assert seen.sentence((doc_id, 0), rev, head.counter) is None
        given = seen.sentence((doc_id, 0), rev, head.counter, vector=with_vectors[0].vector)
        assert given is not None
        assert given.similarity == expected[0]
        assert seen.sentence((doc_id, 1), "another revision", head.counter) is None
        assert seen.sentence((doc_id, 1), rev, "another counter") is None
        assert seen.sentence((doc_id, len(kept)), rev, head.counter) is None
    assert checked > 500
    assert seen.sentence(("not indexed", 1), "r", "c") is None


def test_a_sentence_has_one_similarity_whether_the_snapshot_its_figures_or_a_read_scores_it(
    reader: Make, minilm: Embeddings
) -> None:
    # Growth weighs a sentence by it: the same sentence must weigh the same on every path,
    # whatever was scored with it (all rows, a block, the rows read together).
    retriever = reader(lexical=True)
    lexical = retriever.lexical
    assert lexical is not None
    snapshot = snapshot_of(retriever)
    rows = lexical.figures()
    assert rows is not None
    figures = Figures(rows)
    checked = 0
    for query in [q["query"] for q in load_queries("qmsum")[:3]]:
        vector = minilm.embed_query(query)
        scores, seen = snapshot.scores(vector), figures.for_query(vector)
        copies = [(doc_id, rev, copy) for doc_id, rev, copy in lexical.copies() if copy.vector is not None]
        read = cosines([copy.vector for _, _, copy in copies], vector)  # type: ignore[misc]
        for (doc_id, rev, copy), alone in zip(copies, read, strict=True):
            held = scores.held((doc_id, copy.i))
            found = seen.sentence((doc_id, copy.i), rev, copy.counter)
            assert held is not None
            assert found is not None
            assert held[1] == found.similarity == alone == cosines([copy.vector], vector)[0]  # type: ignore[list-item]
            checked += 1
    assert checked > 1500


def test_growths_figures_hold_no_python_object_per_sentence() -> None:
    # As BM25's postings past the limit: ten times the sentences leave what a full
    # garbage collection walks the same.
    def walked(copies: int) -> int:
        index = LexicalIndex()
        rng = np.random.default_rng(copies)
        index.replace(
            (
                f"d{j}",
                "r",
                [LocalSentence(n, f"Sentence {n}.", 0, 1, " ", 3, "cl100k_base", vector(rng)) for n in range(copies)],
            )
            for j in range(5)
        )
        rows = index.figures()
        assert rows is not None
        figures = Figures(rows)
        assert len(figures) == 5 * copies
        gc.collect()
        return tracked_slots(figures)

    small, large = walked(200), walked(2000)
    assert large < small + 100, (small, large)


def vector(rng: np.random.Generator) -> np.ndarray:
    """A random vector of 8 dimensions, as float32."""
    return rng.normal(size=8).astype(np.float32)


def test_past_the_snapshot_limit_hits_are_made_from_the_figures_as_from_their_records(
    reader: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each hit's size, revision, cues, score and count, from the figures and the head read,
    # equal what its record gives (the figures serving nothing); no record is made for one.
    queries = [q["query"] for q in load_queries("qmsum")]
    seeded: dict[str, list[tuple[list[Any], list[int]]]] = {}
    made: dict[str, int] = {}
    seeded_by = guided.Growing.seeded
    for mode in ("figures", "records"):
        with monkeypatch.context() as patch:
            if mode == "records":
                patch.setattr(QueryFigures, "sentence", lambda self, *args, **kwargs: None)
            retriever = reader(lexical=True, performance=Performance(snapshot_limit=0))
            retriever._views = StoreViews(LexicalRanking(lambda fn: fn()))
            retriever.invoke(queries[0], max_tokens=100)  # the build runs now
            seeds = seeded[mode] = []

            def spy(self: Any, hits: list[Any], counts: list[int], budget: int, seeds: Any = seeds) -> Any:
                seeds.append((list(hits), list(counts)))
                return seeded_by(self, hits, counts, budget)

            patch.setattr(guided.Growing, "seeded", spy)
            to_hit = hits_module.to_hit
            made[mode] = 0

            def counted(doc: Document, score: float, to_hit: Any = to_hit, mode: str = mode) -> Any:
                made[mode] += 1
                return to_hit(doc, score)

            patch.setattr(hits_module, "to_hit", counted)
            for query in queries:
                for budget in (300, 2000):
                    assert retriever.invoke(query, max_tokens=budget)
    assert seeded["figures"] == seeded["records"]
    assert sum(len(hits) for hits, _ in seeded["figures"]) > 500
    assert made == {"figures": 0, "records": made["records"]}
    assert made["records"] > 500


def test_past_the_snapshot_limit_the_hits_token_counts_are_the_figures(
    reader: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The hits' records were counted with tiktoken, about 55 a query; the figures hold each
    # copied sentence's count at its revision, and the hits made from them take it there.
    queries = [q["query"] for q in load_queries("qmsum")]
    answers: dict[bool, list[list[Document]]] = {}
    for figures in (True, False):
        with monkeypatch.context() as patch:
            if not figures:
                patch.setattr(Figures, "tokens", lambda self, position, rev, counter: None)
                patch.setattr(QueryFigures, "sentence", lambda self, *args, **kwargs: None)
            retriever = reader(lexical=True, performance=Performance(snapshot_limit=0))
            retriever._views = StoreViews(LexicalRanking(lambda fn: fn()))
            retriever.invoke(queries[0], max_tokens=100)  # the build runs now
            counted: list[str] = []
            count_many = reads.count_many

            def spy(counter: Any, texts: Sequence[str], count_many: Any = count_many, counted: Any = counted) -> Any:
                counted.extend(texts)
                return count_many(counter, texts)

            patch.setattr(reads, "count_many", spy)
            answers[figures] = [retriever.invoke(q, max_tokens=2000) for q in queries]
            if figures:
                assert counted == []
            else:
                assert counted  # each hit's sentence, counted
    assert answers[True] == answers[False]


@pytest.mark.parametrize("cache_size", [20_000, 0])
def test_past_the_snapshot_limit_growth_reads_nothing_once_its_figures_are_built(
    reader: Make, indexed: tuple[Any, Path], cache_size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Growth knows each neighbour from the figures: the same answers, and only the windows' text is read."""
    during: dict[str, int] = {}  # copies read from SQLite while growth ran, by retriever
    rounds = guided.Growing.rounds

    def counted(self: guided.Growing, *args: Any, **kwargs: Any) -> Growth:
        index = self.reads.local
        assert isinstance(index, PositionsRead)
        before = len(index.read)
        try:
            return rounds(self, *args, **kwargs)
        finally:
            during[index.name] = during.get(index.name, 0) + len(index.read) - before

    monkeypatch.setattr(guided.Growing, "rounds", counted)
    submit = Deferred()
    lexical, other = PositionsRead(indexed[1]), PositionsRead(indexed[1])
    lexical.name, other.name = "figures", "reads"
    retriever = reader(performance=Performance(snapshot_limit=10, cache_size=cache_size)).model_copy(
        update={"lexical": lexical}
    )
    retriever._views = StoreViews(LexicalRanking(submit))
    without = reader(performance=Performance(snapshot_limit=10, cache_size=cache_size)).model_copy(
        update={"lexical": other}
    )
    without._views = StoreViews(LexicalRanking(Deferred()))  # never built: growth reads, round by round
    queries = [q["query"] for q in load_queries("qmsum")]
    retriever.invoke(queries[0], max_tokens=1000)
    submit.run()
    assert retriever._views.ranking.figures(lexical) is not None
    retriever.clear_cache()
    during.clear()
    lexical.read.clear()
    other.read.clear()
    for query in queries:
        for budget in (300, 2000):
            found = retriever.invoke(query, max_tokens=budget)
            assert shown(found) == shown(without.invoke(query, max_tokens=budget))
    assert during["figures"] == 0
    assert lexical.read  # the windows' own text
    assert during["reads"] > 0  # without the figures, growth reads its neighbours
    assert len(lexical.read) < len(other.read), (len(lexical.read), len(other.read))


def test_past_the_snapshot_limit_no_sentences_vector_is_read_once_the_figures_are_built(
    reader: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    # BM25's hits that the dense search did not find are scored by their similarity to the
    # query: read with their vectors before, from the figures now (the same similarity).
    asked: list[str] = []
    with_vectors = reads.Reads.with_vectors

    def spy(self: reads.Reads, ids: Sequence[str]) -> Any:
        asked.extend(ids)
        return with_vectors(self, ids)

    monkeypatch.setattr(reads.Reads, "with_vectors", spy)
    queries = [q["query"] for q in load_queries("qmsum")]
    answers = {}
    for built in (False, True):
        submit = Deferred()
        retriever = past_the_limit(reader, submit)
        retriever.invoke(queries[0], max_tokens=1000)
        if built:
            submit.run()
            assert retriever._views.ranking.figures(retriever.lexical) is not None  # type: ignore[arg-type]
        asked.clear()
        answers[built] = [retriever.invoke(q, max_tokens=2000) for q in queries]
        assert (asked == []) == built, len(asked)
    assert answers[True] == answers[False]


def test_past_the_snapshot_limit_figures_built_before_a_write_are_not_used_for_what_it_rewrote(
    tmp_path: Path, minilm: Embeddings
) -> None:
    store = chroma_store("refigured", persist_directory=tmp_path / "chroma", embeddings=minilm)
    lexical = tmp_path / "lexical.sqlite"
    submit = Deferred()
    reader = SentenceWindowRetriever(
        vectorstore=store, lexical=LexicalIndex(lexical), performance=Performance(snapshot_limit=2)
    )
    reader._views = StoreViews(LexicalRanking(submit))
    writer = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(lexical))
    words = ["lamp", "chair", "desk", "shelf", "rug", "clock", "vase", "mirror", "sofa", "stool"]
    old = " ".join(f"The {w} in room {i} is painted red." for i, w in enumerate(words))
    new = " ".join(f"The {w} in hall {i} is {'long and ' * i}painted blue." for i, w in enumerate(words))
    writer.add_documents([Document(old, id="rooms"), Document("Unrelated text about rivers. Fish swim.", id="other")])
    query = "what colour is the desk"
    reader.invoke(query, max_tokens=120)
    submit.run()  # the figures of the old text
    assert any("red" in d.page_content for d in reader.invoke(query, max_tokens=120))
    writer.add_documents([Document(new, id="rooms")])
    assert reader._views.ranking.figures(reader.lexical) is not None  # not built again yet: the old ones
    fresh = SentenceWindowRetriever(
        vectorstore=store, lexical=LexicalIndex(lexical), performance=Performance(snapshot_limit=2)
    )
    fresh._views = StoreViews(LexicalRanking(Deferred()))
    found = reader.invoke(query, max_tokens=120)
    assert shown(found) == shown(fresh.invoke(query, max_tokens=120))
    for doc in found:
        if doc.metadata["doc_id"] == "rooms":
            assert doc.page_content == new[doc.metadata["start_index"] : doc.metadata["end_index"]]


def test_snapshot_limit_0_takes_the_path_past_the_limit_and_in_memory_false_keeps_nothing(reader: Make) -> None:
    query = load_queries("qmsum")[0]["query"]
    no_snapshot = reader(lexical=True, performance=Performance(snapshot_limit=0))
    no_snapshot._views = StoreViews(LexicalRanking(lambda fn: fn()))
    first = no_snapshot.invoke(query, max_tokens=1000)  # starts the build, which runs at once here
    assert no_snapshot.invoke(query, max_tokens=1000) == first
    held = no_snapshot._views.snapshot
    assert held is None or held[1] is None  # no snapshot, even of a few sentences
    assert no_snapshot._views.ranking.figures(no_snapshot.lexical) is not None  # BM25 and growth's figures
    submit = Deferred()
    nothing = reader(lexical=True, performance=Performance(in_memory=False))
    nothing._views = StoreViews(LexicalRanking(submit))
    assert shown(nothing.invoke(query, max_tokens=1000)) == shown(first)
    assert nothing._views.snapshot is None
    assert submit.waiting == []  # no build started


MODES: dict[str, dict[str, Any]] = {
    "in memory": {},
    "past the limit": {"performance": Performance(snapshot_limit=0)},
    "nothing in memory": {"performance": Performance(in_memory=False)},
    "no cache": {"performance": Performance(cache_size=0)},
}
"""Every memory setting a retriever has: each changes what a query reads, never its answer."""


def test_every_memory_mode_answers_alike_where_the_store_searches_exactly(tmp_path: Path, minilm: Embeddings) -> None:
    # issue #51, finding 7, and #49: one query's answer differed by mode with the same dense
    # top 100. A repeated line ("Housekeeper: The Waltham Residence .") has one vector: the
    # snapshot gave its tie to the copy written first, Chroma's index in an order of its own,
    # and the windows differed. Every path now breaks ties by document id, then position.
    store = chroma_store("friends", persist_directory=tmp_path / "chroma", embeddings=minilm, ef_search=4096)
    path = tmp_path / "lexical.sqlite"  # 1,513 sentences: a beam past their count searches exactly
    SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path)).add_documents(
        as_documents(load_docs("friendsqa"))
    )
    modes = {m: SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path), **kw) for m, kw in MODES.items()}
    asked = [("What does the Janitor claim they forgot ?", "s01_e23")]
    asked += [(q["query"], q["doc_id"]) for q in load_queries("friendsqa")[::12]]
    for query, doc_id in asked:
        scoped = {"filter": {"doc_id": doc_id}}  # issue #49: a filtered query is hybrid on every path too
        for call in ({"max_tokens": 2000}, {"max_tokens": 300}, {"k": 4}, {"max_tokens": 2000, **scoped}):
            answers = {m: unscored(r.invoke(query, **call)) for m, r in modes.items()}
            for mode, answer in answers.items():
                assert answer == answers["in memory"], (mode, query, call, spans(answer), spans(answers["in memory"]))
        assert {m["doc_id"] for _, m in answers["in memory"]} == {doc_id}


def test_a_filter_that_passes_every_document_answers_as_no_filter(tmp_path: Path, minilm: Embeddings) -> None:
    # issue #49: any filter turned BM25 and the snapshot off, so a multi-tenant app's every query
    # was dense only. Now the filter narrows the hybrid search: one that passes every document
    # leaves the answer as it was, in every memory mode, and one document's keeps to it.
    store = chroma_store("friends", persist_directory=tmp_path / "chroma", embeddings=minilm, ef_search=4096)
    path = tmp_path / "lexical.sqlite"
    rows = load_docs("friendsqa")
    documents = [Document(r["text"], id=r["doc_id"], metadata={"season": int(r["doc_id"][1:3])}) for r in rows]
    SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path)).add_documents(documents)
    every = [{"season": {"$gte": 0}}, {"doc_id": {"$in": [r["doc_id"] for r in rows]}}, {"season": {"$ne": 99}}]
    queries = [q for q in load_queries("friendsqa")[::8]]
    dense_only = SentenceWindowRetriever(vectorstore=store)
    differs = 0
    for mode, options in MODES.items():
        retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path), **options)
        for q in queries:
            plain = unscored(retriever.invoke(q["query"], max_tokens=1000))
            for where in every:
                assert unscored(retriever.invoke(q["query"], max_tokens=1000, filter=where)) == plain, (mode, where)
            differs += plain != unscored(dense_only.invoke(q["query"], max_tokens=1000))
            season = int(q["doc_id"][1:3])
            found = retriever.invoke(q["query"], max_tokens=1000, filter={"season": season})
            assert found
            assert {d.metadata["season"] for d in found} == {season}
    assert differs  # the hybrid answer is not the dense one: the filters above kept BM25


def spans(units: list[tuple[str, dict]]) -> list[tuple[str, list[int], list[int]]]:
    return [(m["doc_id"], m["span"], m["hits"]) for _, m in units]
