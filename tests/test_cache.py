"""The sentence cache and the lexical index's local copies: fewer store reads, never a stale record."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand import LexicalIndex, SentenceWindowRetriever, TokenCounter, chroma_store
from langchain_expand.adapters import StoreAdapter, adapt

from .conftest import as_documents, load_docs, load_queries

Make = Callable[..., SentenceWindowRetriever]


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


def test_a_repeated_guided_query_reads_only_the_heads_again(make_retriever: Make) -> None:
    retriever = make_retriever()
    retriever.add_documents(as_documents(load_docs("qmsum")[:2]))
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


@pytest.mark.parametrize("writer_lexical", ["shared", "none"])
def test_a_document_rewritten_or_deleted_by_another_retriever_is_never_served_from_memory(
    tmp_path: Path, minilm: Embeddings, writer_lexical: str
) -> None:
    """With ``none``, the reader's lexical index keeps its local copies of the old version."""

    def opened(lexical: bool) -> SentenceWindowRetriever:
        store = chroma_store("shared", persist_directory=tmp_path / "chroma", embeddings=minilm)
        index = LexicalIndex(tmp_path / "lexical.sqlite") if lexical else None
        return SentenceWindowRetriever(vectorstore=store, lexical=index)

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


def test_the_cache_changes_no_answer_and_keeps_at_most_cache_size_records(make_retriever: Make) -> None:
    cached = make_retriever(cache_size=300)
    cached.add_documents(as_documents(load_docs("qmsum")))
    uncached = cached.model_copy(update={"cache_size": 0})
    queries = [q["query"] for q in load_queries("qmsum")[:4]]
    for budget in (300, 2000):
        for query in queries + queries:  # each asked twice: the second time from memory
            assert shown(cached.invoke(query, max_tokens=budget)) == shown(uncached.invoke(query, max_tokens=budget))
            assert 0 < len(cached._cache) <= 300


def test_without_a_cache_every_query_reads_its_records_again(make_retriever: Make) -> None:
    retriever = make_retriever(cache_size=0)
    retriever.add_documents(as_documents(load_docs("qmsum")[:2]))
    log = ReadLog(retriever._vectors)
    retriever.invoke("the budget of the remote", max_tokens=800)
    first = log.taken()
    retriever.invoke("the budget of the remote", max_tokens=800)
    assert sorted(log.taken()) == sorted(first)
    assert len(retriever._cache) == 0


def test_guided_answers_are_the_same_whether_the_search_returns_ids_or_records(make_retriever: Make) -> None:
    by_ids = make_retriever(cache_size=0)
    by_ids.add_documents(as_documents(load_docs("qmsum")))
    by_records = by_ids.model_copy()
    by_records._vectors = adapt(by_ids.vectorstore, "test")
    object.__setattr__(by_records._vectors, "search_ids", lambda *args, **kwargs: None)  # as on any other store
    for query in [q["query"] for q in load_queries("qmsum")[:4]]:
        for budget in (300, 2000):
            assert shown(by_ids.invoke(query, max_tokens=budget)) == shown(by_records.invoke(query, max_tokens=budget))


@pytest.mark.parametrize("counter", ["cl100k_base", "o200k_base"])
def test_the_local_copies_change_no_answer_and_spare_the_store_its_reads(
    make_retriever: Make, tmp_path: Path, counter: str
) -> None:
    """Indexed with cl100k; ``o200k_base`` reads the same copies but cannot use their counts."""
    path = tmp_path / "lexical.sqlite"
    indexing = make_retriever(cache_size=0, lexical=LexicalIndex(path))
    indexing.add_documents(as_documents(load_docs("qmsum")))
    shutil.copy(path, tmp_path / "bare.sqlite")
    bare = LexicalIndex(tmp_path / "bare.sqlite")
    with bare._db:
        bare._db.execute(f"DELETE FROM {bare.table}_records")  # the ranking alone: every record from the store
    count = TokenCounter(counter)
    copied = indexing.model_copy(update={"token_counter": count})
    from_store = indexing.model_copy(update={"token_counter": count, "lexical": bare})
    from_store._vectors = adapt(indexing.vectorstore, "test")  # its reads are not logged
    log = ReadLog(copied._vectors)
    for query in [q["query"] for q in load_queries("qmsum")[:4]]:
        for call in ({"max_tokens": 300}, {"max_tokens": 2000}, {"k": 3, "before": 1, "after": 2}):
            found = copied.invoke(query, **call)
            assert shown(found) == shown(from_store.invoke(query, **call))
            assert all(d.metadata["tokens"] == count(d.page_content) for d in found)
            read = log.taken()
            assert read
            assert all(
                i.endswith("::0") for i in read
            )  # heads only: each document's revision, fresh: each document's revision, fresh
