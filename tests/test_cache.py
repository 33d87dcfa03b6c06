"""The sentence cache: fewer store reads on later queries, never a stale record."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand import LexicalIndex, SentenceWindowRetriever, chroma_store
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


def test_a_document_rewritten_or_deleted_by_another_retriever_is_never_served_from_memory(
    tmp_path: Path, minilm: Embeddings
) -> None:
    def opened() -> SentenceWindowRetriever:
        store = chroma_store("shared", persist_directory=tmp_path / "chroma", embeddings=minilm)
        return SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(tmp_path / "lexical.sqlite"))

    words = ["lamp", "chair", "desk", "shelf", "rug", "clock", "vase", "mirror", "sofa", "stool"]
    old = " ".join(f"The {w} in room {i} is painted red." for i, w in enumerate(words))
    new = old.replace("painted red", "painted blue")
    reader, writer = opened(), opened()
    writer.add_documents([Document(old, id="rooms"), Document("Unrelated text about rivers. Fish swim.", id="other")])
    query = "what colour is the desk in room 2"
    assert any("red" in d.page_content for d in reader.invoke(query, max_tokens=200))

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
