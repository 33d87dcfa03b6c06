"""SQLDocStore on a real PostgreSQL server: the shared docstore that several indexing
workers write to. LangChain's standard BaseStore tests, concurrent writers, and parents
that a second retriever (a second worker) reads back."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_tests.integration_tests import BaseStoreAsyncTests, BaseStoreSyncTests

from langchain_expand import BudgetedParentDocumentRetriever, MarkdownSectionSplitter, SQLDocStore, chroma_store

from .conftest import load_docs

_tables = itertools.count()


def fresh_store(url: str) -> SQLDocStore:
    return SQLDocStore(url, table=f"docs_{next(_tables)}")


class TestPostgresDocStoreSync(BaseStoreSyncTests[Document]):
    @pytest.fixture
    def three_values(self) -> tuple[Document, Document, Document]:
        return Document("one", metadata={"a": [1, 2]}), Document("two", id="x"), Document("three")

    @pytest.fixture
    def kv_store(self, postgres_url: str) -> SQLDocStore:
        return fresh_store(postgres_url)


class TestPostgresDocStoreAsync(BaseStoreAsyncTests[Document]):
    @pytest.fixture
    def three_values(self) -> tuple[Document, Document, Document]:
        return Document("one", metadata={"a": {"b": None}}), Document("two"), Document("three")

    @pytest.fixture
    async def kv_store(self, postgres_url: str) -> SQLDocStore:
        return fresh_store(postgres_url)


def test_concurrent_writers_of_the_same_keys_all_succeed(postgres_url: str) -> None:
    table = f"docs_{next(_tables)}"
    keys = [f"manual.p{j}" for j in range(50)]
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            store = SQLDocStore(postgres_url, table=table)
            for _ in range(5):
                store.mset([(k, Document(f"worker {n}", id=k)) for k in keys])
        except Exception as exc:  # collected, and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    stored = SQLDocStore(postgres_url, table=table).mget(keys)
    assert all(doc is not None and doc.page_content.startswith("worker ") for doc in stored)


def test_a_second_worker_reads_the_parents_the_first_wrote(
    postgres_url: str, tmp_path: Path, minilm: Embeddings
) -> None:
    table = f"docs_{next(_tables)}"
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
