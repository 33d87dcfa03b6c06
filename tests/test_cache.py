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
from langchain_expand.adapters import StoreAdapter

from .conftest import as_documents, load_docs, load_queries

Make = Callable[..., SentenceWindowRetriever]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings) -> tuple[Any, Path]:
    """The test meetings in one Chroma collection and lexical index, for the read-only tests here."""
    folder = tmp_path_factory.mktemp("cache")
    store = chroma_store("meetings", persist_directory=folder / "chroma", embeddings=minilm)
    lexical = folder / "lexical.sqlite"
    SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(lexical)).add_documents(
        as_documents(load_docs("qmsum"))
    )
    return store, lexical


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


def test_the_cache_changes_no_answer_and_keeps_at_most_cache_size_records(reader: Make) -> None:
    cached = reader(cache_size=300)
    uncached = reader(cache_size=0)
    queries = [q["query"] for q in load_queries("qmsum")[:4]]
    for budget in (300, 2000):
        for query in queries + queries:  # each asked twice: the second time from memory
            assert shown(cached.invoke(query, max_tokens=budget)) == shown(uncached.invoke(query, max_tokens=budget))
            assert 0 < len(cached._cache) <= 300


def test_without_a_cache_every_query_reads_its_records_again(reader: Make) -> None:
    retriever = reader(cache_size=0)
    log = ReadLog(retriever._vectors)
    retriever.invoke("the budget of the remote", max_tokens=800)
    first = log.taken()
    retriever.invoke("the budget of the remote", max_tokens=800)
    assert sorted(log.taken()) == sorted(first)
    assert len(retriever._cache) == 0


def test_guided_answers_are_the_same_whether_the_search_returns_ids_or_records(reader: Make) -> None:
    by_ids = reader(cache_size=0)
    by_records = reader(cache_size=0)
    object.__setattr__(by_records._vectors, "search_ids", lambda *args, **kwargs: None)  # as on any other store
    for query in [q["query"] for q in load_queries("qmsum")[:4]]:
        for budget in (300, 2000):
            assert shown(by_ids.invoke(query, max_tokens=budget)) == shown(by_records.invoke(query, max_tokens=budget))


def test_the_local_copies_change_no_answer_and_spare_the_store_its_reads(
    reader: Make, indexed: tuple[Any, Path], tmp_path: Path
) -> None:
    """Indexed with cl100k; ``o200k_base`` reads the same copies but cannot use their counts."""
    bare = LexicalIndex(shutil.copy(indexed[1], tmp_path / "bare.sqlite"))
    with bare._db:
        bare._db.execute(f"DELETE FROM {bare.table}_records")  # the ranking alone: every record from the store
    queries = [q["query"] for q in load_queries("qmsum")[:4]]
    for encoding in ("cl100k_base", "o200k_base"):
        count = TokenCounter(encoding)
        copied = reader(lexical=True, cache_size=0, token_counter=count)
        from_store = reader(cache_size=0, token_counter=count).model_copy(update={"lexical": bare})
        log = ReadLog(copied._vectors)
        for query in queries:
            for call in ({"max_tokens": 300}, {"max_tokens": 2000}, {"k": 3, "before": 1, "after": 2}):
                found = copied.invoke(query, **call)
                assert shown(found) == shown(from_store.invoke(query, **call))
                assert all(d.metadata["tokens"] == count(d.page_content) for d in found)
                read = log.taken()
                assert read
                assert all(i.endswith("::0") for i in read)  # heads only: each document's revision, fresh
