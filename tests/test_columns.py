"""Columns in memory (``windows/columns.py``), past the snapshot's limit (no texts); one similarity everywhere."""

from __future__ import annotations

import gc
from collections.abc import Sequence
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
)
from langchain_expand.store.lexical import LocalSentence
from langchain_expand.store.similarity import cosines
from langchain_expand.text.cues import cues
from langchain_expand.windows import guided, reads
from langchain_expand.windows import hits as hits_module
from langchain_expand.windows.columns import Columns
from langchain_expand.windows.growth import Growth
from langchain_expand.windows.views import StoreViews

from .conftest import Make, load_queries, tracked_slots
from .memory import Deferred, PositionsRead, past_the_limit, shown, snapshot_of, unscored, vector


class Seen:
    """What a query reads of a sentence in columns: its token count, similarity and cues (None: not held)."""

    def __init__(self, columns: Columns, query: Sequence[float]) -> None:
        self.columns, self.scores = columns, columns.scores(query)

    def sentence(self, position: Any, rev: str, counter: str | None) -> Any:
        def count(position: Any, copy: Any) -> int:
            msg = "counted by this counter: its count is held"
            raise AssertionError(msg)

        return self.columns.lookup(self.scores, counter, lambda doc_id: rev, count)(position)


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


def test_the_columns_hold_the_local_copies_counts_cues_and_vectors_at_their_revision(indexed: tuple[Any, Path]) -> None:
    lexical = LexicalIndex(indexed[1])
    copies: dict[str, tuple[str, list[Any]]] = {}
    for doc_id, rev, copy in lexical.copies():
        copies.setdefault(doc_id, (rev, []))[1].append(copy)
    assert len(Columns(lexical.copies())) == lexical.count() - len(copies)  # a head's copy has no vector: not held
    given = {(doc_id, rev): kept[1].vector for doc_id, (rev, kept) in copies.items()}  # as the store lists a head's
    columns = Columns(lexical.copies(), heads=given)
    assert len(columns) == lexical.count()
    query = np.random.default_rng(7).normal(size=384).tolist()
    seen = Seen(columns, query)
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
        assert head.vector is None  # the store holds a head's vector: the build gives it
        found = seen.sentence((doc_id, 0), rev, head.counter)
        assert found is not None
        assert found.similarity == expected[0]
        assert seen.sentence((doc_id, 1), "another revision", head.counter) is None
        assert seen.sentence((doc_id, 1), rev, "another counter") is None
        assert seen.sentence((doc_id, len(kept)), rev, head.counter) is None
    assert checked > 500
    assert seen.sentence(("not indexed", 1), "r", "c") is None


def test_a_sentence_has_one_similarity_whether_the_snapshot_the_columns_or_a_read_scores_it(
    reader: Make, minilm: Embeddings
) -> None:
    # Growth weighs a sentence by it: the same sentence must weigh the same on every path,
    # whatever was scored with it (all rows, a block, the rows read together).
    retriever = reader(lexical=True)
    lexical = retriever.lexical
    assert lexical is not None
    snapshot = snapshot_of(retriever)
    columns = Columns(lexical.copies())
    checked = 0
    for query in [q["query"] for q in load_queries("qmsum")[:3]]:
        vector = minilm.embed_query(query)
        held, seen = Seen(snapshot.columns, vector), Seen(columns, vector)
        held.scores.every()  # the snapshot scores every row at once
        copies = [(doc_id, rev, copy) for doc_id, rev, copy in lexical.copies() if copy.vector is not None]
        read = cosines([copy.vector for _, _, copy in copies], vector)  # type: ignore[misc]
        for (doc_id, rev, copy), alone in zip(copies, read, strict=True):
            whole = held.sentence((doc_id, copy.i), rev, copy.counter)
            found = seen.sentence((doc_id, copy.i), rev, copy.counter)
            assert whole is not None
            assert found is not None
            assert whole.similarity == found.similarity == alone == cosines([copy.vector], vector)[0]  # type: ignore[list-item]
            checked += 1
    assert checked > 1500


def test_the_columns_hold_no_python_object_per_sentence_without_texts() -> None:
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
        columns = Columns(index.copies())
        assert len(columns) == 5 * copies
        gc.collect()
        return tracked_slots(columns)

    small, large = walked(200), walked(2000)
    assert large < small + 100, (small, large)


def test_past_the_snapshot_limit_hits_are_made_from_the_columns_as_from_their_records(
    reader: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each hit's size, revision, cues, score and count, from the columns and the head read,
    # equal what its sentence read gives (the columns serving nothing); none is read for one.
    queries = [q["query"] for q in load_queries("qmsum")]
    seeded: dict[str, list[tuple[list[Any], list[int]]]] = {}
    made: dict[str, int] = {}
    seeded_by = guided.Growing.seeded
    for mode in ("columns", "records"):
        with monkeypatch.context() as patch:
            if mode == "records":
                patch.setattr(Columns, "lookup", lambda self, *args: lambda position: None)
            retriever = reader(lexical=True, performance=Performance(snapshot_limit=0))
            retriever._views = StoreViews(lambda fn: fn())
            retriever.invoke(queries[0], max_tokens=100)  # the build runs now
            seeds = seeded[mode] = []

            def spy(self: Any, hits: list[Any], counts: list[int], budget: int, seeds: Any = seeds) -> Any:
                seeds.append((list(hits), list(counts)))
                return seeded_by(self, hits, counts, budget)

            patch.setattr(guided.Growing, "seeded", spy)
            from_read = hits_module._hit
            made[mode] = 0

            def counted(position: Any, read: Any, score: float, from_read: Any = from_read, mode: str = mode) -> Any:
                made[mode] += 1
                return from_read(position, read, score)

            patch.setattr(hits_module, "_hit", counted)
            for query in queries:
                for budget in (300, 2000):
                    assert retriever.invoke(query, max_tokens=budget)
    assert seeded["columns"] == seeded["records"]
    assert sum(len(hits) for hits, _ in seeded["columns"]) > 500
    assert made == {"columns": 0, "records": made["records"]}
    assert made["records"] > 500


def test_past_the_snapshot_limit_the_hits_token_counts_are_the_columns(
    reader: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The hits' records were counted with tiktoken, about 55 a query; the columns hold each
    # copied sentence's count at its revision, and the hits made from them take it there, as do
    # the local copies without the columns. With neither, every record is counted: what the spy sees.
    queries = [q["query"] for q in load_queries("qmsum")]
    answers: dict[str, list[list[Document]]] = {}
    for held in ("columns", "copies", "records"):
        with monkeypatch.context() as patch:
            if held != "columns":
                patch.setattr(Columns, "row", lambda self, position, rev: None)
                patch.setattr(Columns, "lookup", lambda self, *args: lambda position: None)
            if held == "records":
                patch.setattr(reads.Reads, "read_copies", lambda self, positions: None)
            retriever = reader(lexical=True, performance=Performance(snapshot_limit=0))
            retriever._views = StoreViews(lambda fn: fn())
            retriever.invoke(queries[0], max_tokens=100)  # the build runs now
            counted: list[str] = []
            count_many = reads.count_many

            def spy(counter: Any, texts: Sequence[str], count_many: Any = count_many, counted: Any = counted) -> Any:
                counted.extend(texts)
                return count_many(counter, texts)

            patch.setattr(reads, "count_many", spy)
            answers[held] = [retriever.invoke(q, max_tokens=2000) for q in queries]
            assert bool(counted) == (held == "records")
    assert answers["columns"] == answers["copies"]
    # the store's vectors and the copies' differ in the last bits: so may a score computed from them
    assert [unscored(a) for a in answers["columns"]] == [unscored(a) for a in answers["records"]]


@pytest.mark.parametrize(("cache_size", "filtered"), [(20_000, False), (0, False), (20_000, True)])
def test_past_the_snapshot_limit_growth_reads_nothing_once_the_columns_are_built(
    reader: Make, indexed: tuple[Any, Path], cache_size: int, filtered: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Growth knows each neighbour from the columns: the same answers, and only the windows' text is read.

    Filtered too: the columns serve a sentence whatever the filter (a filtered query grew round by
    round from the copies before)."""
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
    lexical.name, other.name = "columns", "reads"
    retriever = reader(performance=Performance(snapshot_limit=10, cache_size=cache_size)).model_copy(
        update={"lexical": lexical}
    )
    retriever._views = StoreViews(submit)
    without = reader(performance=Performance(snapshot_limit=10, cache_size=cache_size)).model_copy(
        update={"lexical": other}
    )
    without._views = StoreViews(Deferred())  # never built: growth reads, round by round
    queries = [q["query"] for q in load_queries("qmsum")]
    retriever.invoke(queries[0], max_tokens=1000)
    submit.run()
    assert retriever._views.built is not None
    assert retriever._views.built.columns is not None
    retriever.clear_cache()
    during.clear()
    lexical.read.clear()
    other.read.clear()
    where = {"filter": {"doc_id": sorted(lexical.documents())[0]}} if filtered else {}
    for query in queries:
        for budget in (300, 2000):
            found = retriever.invoke(query, max_tokens=budget, **where)
            assert found
            assert shown(found) == shown(without.invoke(query, max_tokens=budget, **where))
    assert during["columns"] == 0
    assert lexical.read  # the windows' own text
    assert during["reads"] > 0  # without the columns, growth reads its neighbours
    if not filtered:  # one meeting: its windows' text is most of what growth read without the columns
        assert len(lexical.read) < len(other.read), (len(lexical.read), len(other.read))


def test_past_the_snapshot_limit_no_sentences_vector_is_read_once_the_columns_are_built(
    reader: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    # BM25's hits that the dense search did not find are scored by their similarity to the
    # query: read with their vectors before, from the columns now (the same similarity).
    asked: list[Any] = []
    sentences = reads.Reads.sentences

    def spy(self: reads.Reads, positions: Sequence[Any], *, vectors: bool = False) -> Any:
        asked.extend(positions if vectors else ())
        return sentences(self, positions, vectors=vectors)

    monkeypatch.setattr(reads.Reads, "sentences", spy)
    queries = [q["query"] for q in load_queries("qmsum")]
    answers = {}
    for built in (False, True):
        submit = Deferred()
        retriever = past_the_limit(reader, submit)
        retriever.invoke(queries[0], max_tokens=1000)
        if built:
            submit.run()
            assert retriever._views.built is not None
            assert retriever._views.built.columns is not None
        asked.clear()
        answers[built] = [retriever.invoke(q, max_tokens=2000) for q in queries]
        assert (asked == []) == built, len(asked)
    assert answers[True] == answers[False]


def test_past_the_snapshot_limit_columns_built_before_a_write_are_not_used_for_what_it_rewrote(
    tmp_path: Path, minilm: Embeddings
) -> None:
    store = chroma_store("refigured", persist_directory=tmp_path / "chroma", embeddings=minilm)
    lexical = tmp_path / "lexical.sqlite"
    submit = Deferred()
    reader = SentenceWindowRetriever(
        vectorstore=store, lexical=LexicalIndex(lexical), performance=Performance(snapshot_limit=2)
    )
    reader._views = StoreViews(submit)
    writer = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(lexical))
    words = ["lamp", "chair", "desk", "shelf", "rug", "clock", "vase", "mirror", "sofa", "stool"]
    old = " ".join(f"The {w} in room {i} is painted red." for i, w in enumerate(words))
    new = " ".join(f"The {w} in hall {i} is {'long and ' * i}painted blue." for i, w in enumerate(words))
    writer.add_documents([Document(old, id="rooms"), Document("Unrelated text about rivers. Fish swim.", id="other")])
    query = "what colour is the desk"
    reader.invoke(query, max_tokens=120)
    submit.run()  # the columns of the old text
    assert any("red" in d.page_content for d in reader.invoke(query, max_tokens=120))
    writer.add_documents([Document(new, id="rooms")])
    assert reader._views.built is not None
    assert reader._views.built.columns is not None  # not built again yet: the old ones
    fresh = SentenceWindowRetriever(
        vectorstore=store, lexical=LexicalIndex(lexical), performance=Performance(snapshot_limit=2)
    )
    fresh._views = StoreViews(Deferred())
    found = reader.invoke(query, max_tokens=120)
    assert shown(found) == shown(fresh.invoke(query, max_tokens=120))
    for doc in found:
        if doc.metadata["doc_id"] == "rooms":
            assert doc.page_content == new[doc.metadata["start_index"] : doc.metadata["end_index"]]
