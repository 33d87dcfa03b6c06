"""One query's reads (``windows/reads.py``) and the cache between queries (``windows/cache.py``): never stale."""

from __future__ import annotations

import gc
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
)
from langchain_expand.store.lexical import LocalSentence
from langchain_expand.text.cues import NO_CUES
from langchain_expand.text.tokens import _splits
from langchain_expand.windows.cache import SentenceCache
from langchain_expand.windows.views import StoreViews

from .conftest import Make, load_queries
from .memory import CountedCopies, Deferred, LoggedCounter, ReadLog, shown, sqlite_copy, unscored


@pytest.mark.parametrize(("call", "neighbours"), [({"max_tokens": 1000}, 50), ({"k": 4}, 10)])
def test_a_repeated_query_reads_no_sentence_again(reader: Make, call: dict[str, int], neighbours: int) -> None:
    """Without a lexical index the records read are kept as copies: guided, and fixed around the search's records.

    The heads read at the store's change mark are kept for the queries at that mark.
    """
    retriever = reader()
    log = ReadLog(retriever._vectors)
    query = "who will design the remote control"
    first = retriever.invoke(query, **call)
    cold = log.taken()
    again = retriever.invoke(query, **call)
    warm = log.taken()
    assert shown(again) == shown(first)
    assert len([i for i in cold if not i.endswith("::0")]) > neighbours  # hits' neighbours
    assert warm == []


@pytest.mark.parametrize(
    "settings",
    # a snapshot; past its limit (BM25 and the columns built in the query); no snapshot; none of it (heads kept)
    [
        {},
        {"performance": Performance(snapshot_limit=1)},
        {"performance": Performance(snapshot_limit=0)},
        {"performance": Performance(in_memory=False)},
    ],
)
@pytest.mark.parametrize("writer_lexical", ["shared", "none", "reader has none"])
def test_a_document_rewritten_or_deleted_by_another_retriever_is_never_served_from_memory(
    tmp_path: Path, minilm: Embeddings, writer_lexical: str, settings: dict[str, Any]
) -> None:
    """With ``none``, the reader's lexical index keeps its local copies of the old version; with
    ``reader has none``, its cache keeps the records it read, served at the revision of the records
    its search returns (fixed windows) or of the heads (guided)."""

    def opened(lexical: bool) -> SentenceWindowRetriever:
        store = chroma_store("shared", persist_directory=tmp_path / "chroma", embeddings=minilm)
        index = LexicalIndex(tmp_path / "lexical.sqlite") if lexical else None
        retriever = SentenceWindowRetriever(vectorstore=store, lexical=index, **settings)
        retriever._views = StoreViews(lambda fn: fn())  # past the limit, built in the query
        return retriever

    words = ["lamp", "chair", "desk", "shelf", "rug", "clock", "vase", "mirror", "sofa", "stool"]
    old = " ".join(f"The {w} in room {i} is painted red." for i, w in enumerate(words))
    new = old.replace("painted red", "painted blue")
    reader, writer = opened(writer_lexical != "reader has none"), opened(True)
    writer.add_documents([Document(old, id="rooms"), Document("Unrelated text about rivers. Fish swim.", id="other")])
    query = "what colour is the desk in room 2"
    assert any("red" in d.page_content for d in reader.invoke(query, max_tokens=200))
    assert any("red" in d.page_content for d in reader.invoke(query, k=2))

    if writer_lexical == "none":
        writer = opened(False)
    writer.add_documents([Document(new, id="rooms")])
    for call in ({"max_tokens": 200}, {"k": 2}):
        found = reader.invoke(query, **call)
        rooms = [d for d in found if d.metadata["doc_id"] == "rooms"]
        assert rooms
        for doc in rooms:
            assert doc.page_content == new[doc.metadata["start_index"] : doc.metadata["end_index"]]
            assert "red" not in doc.page_content

    writer.delete(["rooms"])
    assert all(d.metadata["doc_id"] == "other" for d in reader.invoke(query, max_tokens=200))
    assert all(d.metadata["doc_id"] == "other" for d in reader.invoke(query, k=2))


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
            fixed = ({"k": 3, "before": 1, "after": 2}, {"max_tokens": 800, "window": "fixed"})
            for call in ({"max_tokens": 300}, {"max_tokens": 2000}, *fixed):
                found, stored = copied.invoke(query, **call), from_store.invoke(query, **call)
                assert unscored(found) == unscored(stored)  # a vector Chroma hands back differs in its last bits
                assert [d.metadata["score"] for d in found] == pytest.approx([d.metadata["score"] for d in stored])
                assert all(d.metadata["tokens"] == count(d.page_content) for d in found)
                read = log.taken()
                assert read
                assert all(i.endswith("::0") for i in read)  # heads only: each document's revision, fresh


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


@pytest.mark.parametrize("cache_size", [20_000, 0])
def test_past_the_snapshot_limit_local_copies_are_read_once_while_cached(
    reader: Make, indexed: tuple[Any, Path], cache_size: int
) -> None:
    class Counted(CountedCopies):
        read = 0

    retriever = reader(performance=Performance(snapshot_limit=10, cache_size=cache_size)).model_copy(
        update={"lexical": Counted(indexed[1])}
    )
    retriever._views = StoreViews(Deferred())
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
    retriever._views = StoreViews(lambda fn: fn())
    old = "The warranty lasts two years. Keep the receipt. Call the service line."
    new = "The warranty lasts five years. Keep the box. Write to the service desk."
    retriever.add_documents([Document(old, id="memo"), Document("Unrelated words about cats. Dogs too.", id="pets")])
    assert retriever.invoke("How long does the warranty last?", max_tokens=200)[0].page_content == old
    retriever.add_documents([Document(new, id="memo")])
    assert retriever.invoke("How long does the warranty last?", max_tokens=200)[0].page_content == new


@pytest.mark.parametrize("performance", [Performance(snapshot_limit=0, cache_size=0), Performance(in_memory=False)])
def test_a_query_reads_no_record_twice(reader: Make, performance: Performance) -> None:
    # The heads read with the local copies were read again from the store by the same query
    # (26 of 97 ids on ten TAT-QA queries with fixed windows).
    retriever = reader(lexical=True, performance=performance)
    retriever._views = StoreViews(lambda fn: fn())
    log = ReadLog(retriever._vectors)
    for query in [q["query"] for q in load_queries("qmsum")[:6]]:
        for call in ({"k": 4}, {"max_tokens": 1000}, {"max_tokens": 1000, "window": "fixed"}):
            log.taken()
            assert retriever.invoke(query, **call)
            read = log.taken()
            assert len(read) == len(set(read)), (query, call)


def test_a_copy_kept_again_without_its_vector_or_count_keeps_those_it_had() -> None:
    """A record the search returned (no vector) kept over the same sentence read with its vector and count."""
    cache = SentenceCache()
    full = LocalSentence(3, "A sentence.", 40, 51, " ", 3, "cl100k_base", np.ones(4, dtype=np.float32), 5)
    cache.keep_copies("d", "r1", [(full, NO_CUES)], 10)
    cache.keep_copies("d", "r1", [(full._replace(vector=None, tokens=None, counter=None, joined=None), NO_CUES)], 10)
    ((held, _),) = cache.copies("d", "r1", [3])
    assert held.vector is not None
    assert list(held.vector) == [1.0] * 4
    assert (held.tokens, held.counter, held.joined) == (3, "cl100k_base", 5)
    assert cache.copies("d", "r2", [3]) == []  # another revision: not held
    cache.keep_copies("d", "r1", [(LocalSentence(i, "x", 0, 1, ""), NO_CUES) for i in range(20)], 10)
    assert len(cache) == 10
