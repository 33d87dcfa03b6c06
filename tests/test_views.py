"""Past the snapshot's limit (``windows/views.py``, ``windows/bm25.py``): BM25 built beside queries, heads at a mark."""

from __future__ import annotations

import gc
import sqlite3
import weakref
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
)
from langchain_expand.store.records import unit_id
from langchain_expand.windows import guided
from langchain_expand.windows.growth import Growth, grow
from langchain_expand.windows.views import StoreViews, build

from .conftest import Make, as_documents, load_docs, load_queries
from .memory import Deferred, ReadLog, past_the_limit, ranked_bm25, shown, spied, unscored


def test_past_the_snapshot_limit_bm25_in_memory_ranks_and_answers_as_the_index_does(
    reader: Make, indexed: tuple[Any, Path]
) -> None:
    submit = Deferred()
    retriever = past_the_limit(reader, submit)
    by_index = retriever.model_copy(  # an index of its own ranks every query
        update={"lexical": LexicalIndex(indexed[1]), "performance": Performance(in_memory=False)}
    )
    lexical = retriever.lexical
    assert lexical is not None
    bm25 = ranked_bm25(lexical)
    assert bm25 is not None
    queries = [q["query"] for q in load_queries("qmsum")]
    doc_ids = sorted(lexical.documents())
    assert bm25.documents is not None
    assert len(doc_ids) > 2
    for query in queries:
        assert bm25.search(query, 45) == lexical.search(query, 45)
        for scope in ({doc_ids[0]}, set(doc_ids[1:3])):  # a filter's documents: ranked as the index ranks them
            assert bm25.search(query, 45, bm25.documents(scope)) == lexical.search(query, 45, scope)
    first = retriever.invoke(queries[0], max_tokens=1000)  # no ranking yet: the index answers, one build starts
    assert len(submit.waiting) == 1
    assert retriever.invoke(queries[1], max_tokens=1000) == by_index.invoke(queries[1], max_tokens=1000)
    assert len(submit.waiting) == 1  # one build at a time
    submit.run()
    searched = spied(lexical)
    for query in queries:
        assert retriever.invoke(query, max_tokens=1000) == by_index.invoke(query, max_tokens=1000), query
        where = {"doc_id": doc_ids[0]}  # issue #49: filtered too (searched exactly: the scores' last bits differ)
        assert unscored(retriever.invoke(query, max_tokens=1000, filter=where)) == unscored(
            by_index.invoke(query, max_tokens=1000, filter=where)
        ), query
    assert searched == []  # every query was ranked in memory, filtered or not
    assert retriever.invoke(queries[0], max_tokens=1000) == first
    held = retriever._views.built
    assert held is not None
    ranking = held.bm25
    assert ranking is not None
    asked: list[str] = []
    scored = ranking.scored
    ranking.scored = lambda query: asked.append(query) or scored(query)  # type: ignore[method-assign]
    retriever.invoke(queries[1], max_tokens=1000)
    assert asked == [queries[1]]  # scored once a query, in memory: its search and the candidates' scores


def test_past_the_snapshot_limit_a_write_is_ranked_by_the_next_query(tmp_path: Path, minilm: Embeddings) -> None:
    submit = Deferred()
    store = chroma_store("past-limit", persist_directory=tmp_path / "chroma", embeddings=minilm)
    lexical = LexicalIndex(tmp_path / "lexical.sqlite")
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=lexical, performance=Performance(snapshot_limit=2))
    retriever._views = StoreViews(submit)
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


def test_a_build_that_fails_leaves_the_store_and_the_index_answering(
    tmp_path: Path, minilm: Embeddings, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(LexicalIndex):
        def copies(self, doc_ids: Any = None) -> Any:
            if doc_ids is None:  # the build's listing
                msg = "disk gone"
                raise OSError(msg)
            return super().copies(doc_ids)

    store = chroma_store("broken", persist_directory=tmp_path / "chroma", embeddings=minilm)
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=Broken(tmp_path / "lexical.sqlite"))
    retriever._views = StoreViews(lambda build: build())  # built at once, in the query
    retriever.add_documents(as_documents(load_docs("emanual")[:1]))
    reads = SentenceWindowRetriever(
        vectorstore=store, lexical=LexicalIndex(tmp_path / "lexical.sqlite"), performance=Performance(in_memory=False)
    )
    answer = retriever.invoke("How do I reset the remote?", max_tokens=300)
    assert answer
    assert "disk gone" in caplog.text
    assert retriever.invoke("How do I reset the remote?", max_tokens=300) == answer
    held = retriever._views.built
    assert held is not None
    assert held.columns is None  # built at this mark, holding nothing: not tried again until the mark moves
    assert shown(answer) == shown(reads.invoke("How do I reset the remote?", max_tokens=300))


def test_past_the_snapshot_limit_heads_are_read_once_a_change_mark(reader: Make) -> None:
    retriever = past_the_limit(reader, Deferred())
    log = ReadLog(retriever._vectors)
    query = load_queries("qmsum")[0]["query"]
    first = retriever.invoke(query, max_tokens=1000)
    assert any(i.endswith("::0") for i in log.taken())  # read from the store at the first query
    assert retriever.invoke(query, max_tokens=1000) == first
    assert not any(i.endswith("::0") for i in log.taken())  # the mark has not moved: none read again


def test_past_the_snapshot_limit_every_head_is_listed_by_the_build_where_there_is_room(
    passages: tuple[Any, Path],
) -> None:
    store, path = passages
    queries = [q["query"] for q in load_queries("tatqa")[:8]]
    answers: dict[int, list[list[Document]]] = {}
    for room in (20_000, 0):
        submit = Deferred()
        retriever = SentenceWindowRetriever(
            vectorstore=store, lexical=LexicalIndex(path), performance=Performance(snapshot_limit=10, cache_size=room)
        )
        retriever._views = StoreViews(submit)
        assert retriever.lexical is not None
        heads = {unit_id(d, 0) for d in retriever.lexical.documents()}
        log = ReadLog(retriever._vectors)
        retriever.invoke(queries[0], max_tokens=300)  # the build starts
        assert any(i.endswith("::0") for i in log.taken())  # this query read the heads it met
        submit.run()
        assert log.taken() == []  # the build lists the heads, in one call: none read by id
        held = retriever._views.built
        assert held is not None
        assert (held.heads is not None) == (room > 0)
        if held.heads is not None:
            assert held.heads.complete
            assert {doc.id for doc, _ in held.heads.found(sorted(heads))} == heads
        answers[room] = [retriever.invoke(q, max_tokens=1000) for q in queries]
        read = [i for i in log.taken() if i.endswith("::0")]
        assert (read == []) == (room > 0)  # every head known, else the queries read those they meet
    assert answers[20_000] == answers[0]


def test_heads_listed_by_a_build_are_kept_only_at_their_mark_and_while_there_is_room(
    reader: Make, caplog: pytest.LogCaptureFixture
) -> None:
    retriever = reader(lexical=True)
    lexical = retriever.lexical
    assert lexical is not None
    docs = sorted(lexical.documents())
    store = retriever._vectors
    mark = store.marked()
    assert mark is not None
    assert build(store, lexical, "another mark", 10**6, 100).heads is None  # a writer finished meanwhile
    assert build(store, lexical, mark, 0, len(docs) - 1).heads is None  # past the limit, more heads than room
    every = build(store, lexical, mark, 0, len(docs)).heads
    assert every is not None
    held = every.found([unit_id(d, 0) for d in docs])
    assert len(held) == len(docs)
    stored = {d.id: d.metadata for d in store.get_by_ids([h.id for h, _ in held])}  # type: ignore[misc]
    assert {doc.id: doc.metadata for doc, _ in held} == stored
    assert build(store, lexical, mark, 10**6, 0).heads is not None  # texts held: every head, whatever the room
    broken = reader()._vectors

    def unreadable(*args: Any, **kwargs: Any) -> Any:
        msg = "disk I/O error"
        raise sqlite3.OperationalError(msg)

    object.__setattr__(broken, "where", unreadable)
    failing = build(broken, lexical, mark, 10**6, 100)  # logged; the queries read what they need
    assert "Nothing could be built" in caplog.text
    assert failing.heads is None
    assert failing.columns is None


@pytest.mark.parametrize("cache_size", [20_000, 0])
def test_with_the_snapshot_off_heads_are_read_once_a_change_mark_where_the_cache_keeps_them(
    reader: Make, cache_size: int
) -> None:
    # in_memory=False turns the snapshot, BM25 and the columns in memory off; the heads
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

    def grown(seeds: list[Any], sentences: Any, *args: Any, **kwargs: Any) -> Growth:
        if not kwargs.get("taken"):  # every round knows what the first did
            first_rounds.append(
                [
                    sentences.get((s.doc_id, j)) is not None
                    for s in seeds
                    for j in (s.index - 1, s.index + 1)
                    if 0 <= j < s.n
                ]
            )
        return grow(seeds, sentences, *args, **kwargs)

    monkeypatch.setattr(guided, "grow", grown)
    retriever = past_the_limit(reader, Deferred())
    for query in [q["query"] for q in load_queries("qmsum")[:2]]:
        assert retriever.invoke(query, max_tokens=1000)
    assert first_rounds
    assert all(all(known) and known for known in first_rounds)


def test_past_the_snapshot_limit_a_filtered_query_is_searched_exactly_in_memory(
    tmp_path: Path, minilm: Embeddings
) -> None:
    # issue #49: at a million sentences Chroma's filtered search took 0.7 s a query, and listing
    # the documents a filter passes 80 ms. With the heads at the mark all held and the
    # columns holding the filter's documents, neither goes to the store; a document written
    # since the columns were built is searched by the store, and answers with its new text.
    store = chroma_store("tat", persist_directory=tmp_path / "chroma", embeddings=minilm, ef_search=4096)
    path = tmp_path / "lexical.sqlite"
    rows = load_docs("tatqa")[:8]
    writer = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path))
    writer.add_documents(as_documents(rows))
    held = {r["doc_id"] for r in rows}
    asked = [(q["query"], q["doc_id"]) for q in load_queries("tatqa") if q["doc_id"] in held][::6]
    snapshot = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path))
    submit = Deferred()
    past = SentenceWindowRetriever(
        vectorstore=store, lexical=LexicalIndex(path), performance=Performance(snapshot_limit=0)
    )
    past._views = StoreViews(submit)
    for _ in range(2):  # the ranking and the columns built, then every head read ahead
        past.invoke(asked[0][0], max_tokens=500)
        submit.run()
    held = past._views.built
    assert held is not None
    heads = held.heads
    assert heads is not None
    assert heads.complete
    searched: list[str] = []

    def spied_on(name: str) -> Any:
        original = getattr(past._vectors, name)
        return lambda *args, **kwargs: searched.append(name) or original(*args, **kwargs)

    for name in ("search_ids", "search", "where"):
        object.__setattr__(past._vectors, name, spied_on(name))
    for query, doc_id in asked:
        scoped = {"filter": {"doc_id": doc_id}, "max_tokens": 1000}
        found = unscored(past.invoke(query, **scoped))
        assert found == unscored(snapshot.invoke(query, **scoped)), query
        assert {m["doc_id"] for _, m in found} == {doc_id}
    assert searched == []  # the filter evaluated on the heads held, the dense search exact in the columns
    doc_id = asked[0][1]
    writer.add_documents([Document("The remote has a new red button. It resets the counter.", id=doc_id)])
    scoped = {"filter": {"doc_id": doc_id}, "max_tokens": 1000}
    found = past.invoke("red button", **scoped)  # the columns hold the old text: the store answers
    assert "red button" in found[0].page_content
    assert unscored(found) == unscored(snapshot.invoke("red button", **scoped))
    assert "search_ids" in searched or "search" in searched


def test_retrievers_over_the_same_stores_share_what_queries_hold(tmp_path: Path, minilm: Embeddings) -> None:
    # LangChain's configurable_fields builds the retriever again for every call: each started a
    # build of its own (the whole index read again) and answered from the store while it ran.
    from langchain_core.runnables import ConfigurableField

    from langchain_expand.windows.views import Beside

    store = chroma_store("shared-views", persist_directory=tmp_path / "chroma", embeddings=minilm)
    lexical = LexicalIndex(tmp_path / "lexical.sqlite")
    first = SentenceWindowRetriever(vectorstore=store, lexical=lexical)
    first.add_documents(as_documents(load_docs("qmsum")[:2]))
    first.warm()
    second = SentenceWindowRetriever(vectorstore=store, lexical=lexical, k=3)
    assert second._views is first._views
    assert second._cache is first._cache
    assert (
        SentenceWindowRetriever(vectorstore=store, lexical=lexical, performance=Performance(snapshot_limit=10))._views
        is not first._views
    )  # another limit: views of its own

    submitted: list[object] = []
    original = Beside.__call__

    def counted(self: Beside, fn: Any, *args: Any, **kwargs: Any) -> Any:
        submitted.append(fn)
        return original(self, fn, *args, **kwargs)

    Beside.__call__ = counted  # type: ignore[method-assign]
    try:
        configurable = first.configurable_fields(max_tokens=ConfigurableField(id="budget"))
        for query in [q["query"] for q in load_queries("qmsum")[:3]]:
            configured = configurable.invoke(query, config={"configurable": {"budget": 500}})
            assert shown(configured) == shown(first.invoke(query, max_tokens=500))
    finally:
        Beside.__call__ = original  # type: ignore[method-assign]
    assert submitted == []  # the snapshot built once served every configured call: nothing was built again

    # An index opened for one retriever (a request's) keeps nothing once it is gone.
    throwaway = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(tmp_path / "lexical.sqlite"))
    throwaway.warm()
    assert throwaway._views is not first._views
    assert throwaway._views.built is not None
    columns = weakref.ref(throwaway._views.built.columns)
    del throwaway
    gc.collect()
    assert columns() is None
