"""LangChain's standard BaseStore tests for SQLDocStore, plus restart persistence."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import BaseStoreAsyncTests, BaseStoreSyncTests

from langchain_expand import SQLDocStore


class TestSQLDocStoreSync(BaseStoreSyncTests[Document]):
    @pytest.fixture
    def three_values(self) -> tuple[Document, Document, Document]:
        return Document("one", metadata={"a": [1, 2]}), Document("two", id="x"), Document("three")

    @pytest.fixture
    def kv_store(self, tmp_path: Path) -> SQLDocStore:
        return SQLDocStore(f"sqlite:///{tmp_path}/store.sqlite")


class TestSQLDocStoreAsync(BaseStoreAsyncTests[Document]):
    @pytest.fixture
    def three_values(self) -> tuple[Document, Document, Document]:
        return Document("one", metadata={"a": {"b": None}}), Document("two"), Document("three")

    @pytest.fixture
    async def kv_store(self, tmp_path: Path) -> SQLDocStore:
        return SQLDocStore(f"sqlite:///{tmp_path}/store.sqlite")


def test_documents_survive_a_new_store_on_the_same_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/deep/store.sqlite"
    SQLDocStore(url).mset([("p", Document("kept", metadata={"headings": ["A", "B"]}, id="p"))])
    assert SQLDocStore(url).mget(["p", "q"]) == [Document("kept", metadata={"headings": ["A", "B"]}, id="p"), None]


def test_prefix_keys_treat_wildcards_literally(tmp_path: Path) -> None:
    store = SQLDocStore(f"sqlite:///{tmp_path}/s.sqlite")
    store.mset([(k, Document(k)) for k in ("a_1", "ab1", "a%b", "a_2")])
    assert sorted(store.yield_keys(prefix="a_")) == ["a_1", "a_2"]
    assert list(store.yield_keys(prefix="a%")) == ["a%b"]


def test_unserialisable_metadata_is_a_clear_error(tmp_path: Path) -> None:
    store = SQLDocStore(f"sqlite:///{tmp_path}/s.sqlite")
    with pytest.raises(ValueError, match="Document 'bad': its metadata is not JSON-serialisable"):
        store.mset([("bad", Document("x", metadata={"f": object()}))])
