"""SQLDocStore on a real PostgreSQL server, the shared docstore that several indexing
workers write to: concurrent writers, and parents that a second worker reads back.
LangChain's standard BaseStore tests run on it in test_docstore.py."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand import BudgetedParentDocumentRetriever, MarkdownSectionSplitter, SQLDocStore, chroma_store

from .conftest import in_threads, load_docs

pytestmark = pytest.mark.integration  # the embedding model, subprocesses or a server

_tables = itertools.count()


def test_concurrent_writers_of_the_same_keys_all_succeed(postgres_url: str) -> None:
    table = f"workers_{next(_tables)}"
    keys = [f"manual.p{j}" for j in range(50)]

    def worker(n: int) -> None:
        store = SQLDocStore(postgres_url, table=table)
        for _ in range(5):
            store.mset([(k, Document(f"worker {n}", id=k)) for k in keys])

    assert in_threads(worker, 4) == []
    stored = SQLDocStore(postgres_url, table=table).mget(keys)
    assert all(doc is not None and doc.page_content.startswith("worker ") for doc in stored)


def test_workers_claiming_one_store_at_once_all_read_the_one_claim_kept(postgres_url: str) -> None:
    table = f"claims_{next(_tables)}"
    assert SQLDocStore(postgres_url, table=table).claim(None) is None
    found: list[str | None] = []

    def worker(n: int) -> None:
        found.append(SQLDocStore(postgres_url, table=table).claim(f"collection-{n}"))

    assert in_threads(worker, 6) == []
    assert len(set(found)) == 1  # the first claim stands; the others read it
    assert SQLDocStore(postgres_url, table=table).claim("another") == found[0]


def test_a_second_worker_reads_the_parents_the_first_wrote(
    postgres_url: str, tmp_path: Path, minilm: Embeddings
) -> None:
    table = f"workers_{next(_tables)}"
    docs = [Document(d["text"], id=d["doc_id"]) for d in load_docs("emanual")]

    def worker() -> BudgetedParentDocumentRetriever:
        return BudgetedParentDocumentRetriever(
            vectorstore=chroma_store("children", persist_directory=tmp_path, embeddings=minilm),
            docstore=SQLDocStore(postgres_url, table=table),
            parent_splitter=MarkdownSectionSplitter(max_level=2),
            k=3,
        )

    worker().add_documents(docs)
    found = worker().invoke("how do I connect the remote control to the TV")
    assert len(found) == 3
    sources = {d.id: d.page_content for d in docs}
    for parent in found:
        m = parent.metadata
        assert sources[m["doc_id"]][m["start_index"] : m["end_index"]] == parent.page_content
        assert m["children"]


def test_writers_of_the_same_keys_in_opposite_orders_never_deadlock(postgres_url: str) -> None:
    """Issue 15, finding 9: 27 of 80 such writes raised DeadlockDetected when rows went in given order."""
    table = f"workers_{next(_tables)}"
    keys = [f"doc.p{j}" for j in range(200)]

    def worker(n: int) -> None:
        store = SQLDocStore(postgres_url, table=table)
        order = keys if n % 2 else keys[::-1]
        for _ in range(20):
            store.mset([(k, Document(k)) for k in order])
            store.mdelete(order[: len(order) // 2])

    assert in_threads(worker, 4) == []


def test_keys_the_column_cannot_hold_are_refused_and_big_deletes_work(postgres_url: str) -> None:
    store = SQLDocStore(postgres_url, table=f"limits_{next(_tables)}")
    for bad in ("k" * 513, "nul\x00key", ""):
        with pytest.raises(ValueError, match="keys are non-empty text of at most 512 characters without NUL"):
            store.mset([("fine", Document("kept out too")), (bad, Document("x"))])
    assert list(store.yield_keys()) == []  # nothing of the refused call was written
    many = [f"k{i}" for i in range(70_000)]  # more than PostgreSQL's 65,535 parameters per statement
    store.mset([(k, Document("v")) for k in many])
    assert sum(doc is not None for doc in store.mget(many)) == len(many)
    store.mdelete(many)
    assert list(store.yield_keys()) == []
