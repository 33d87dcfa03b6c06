"""LangChain's standard BaseStore tests for SQLDocStore (SQLite and PostgreSQL), plus restart persistence."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import BaseStoreAsyncTests, BaseStoreSyncTests

from langchain_expand import SQLDocStore

from .conftest import in_threads

_tables = itertools.count()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def fresh_store(request: pytest.FixtureRequest, tmp_path: Path) -> SQLDocStore:
    """An empty store on a SQLite file, or in a new table of a real PostgreSQL server."""
    if request.param == "sqlite":
        return SQLDocStore(f"sqlite:///{tmp_path}/store.sqlite")
    return SQLDocStore(request.getfixturevalue("postgres_url"), table=f"standard_{next(_tables)}")


class TestSQLDocStoreSync(BaseStoreSyncTests[Document]):
    @pytest.fixture
    def three_values(self) -> tuple[Document, Document, Document]:
        return Document("one", metadata={"a": [1, 2]}), Document("two", id="x"), Document("three")

    @pytest.fixture
    def kv_store(self, fresh_store: SQLDocStore) -> SQLDocStore:
        return fresh_store


class TestSQLDocStoreAsync(BaseStoreAsyncTests[Document]):
    @pytest.fixture
    def three_values(self) -> tuple[Document, Document, Document]:
        return Document("one", metadata={"a": {"b": None}}), Document("two"), Document("three")

    @pytest.fixture
    async def kv_store(self, fresh_store: SQLDocStore) -> SQLDocStore:
        return fresh_store


def test_documents_survive_a_new_store_on_the_same_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/deep/store.sqlite"
    SQLDocStore(url).mset([("p", Document("kept", metadata={"headings": ["A", "B"]}, id="p"))])
    assert SQLDocStore(url).mget(["p", "q"]) == [Document("kept", metadata={"headings": ["A", "B"]}, id="p"), None]


def test_prefix_keys_treat_wildcards_literally(tmp_path: Path) -> None:
    store = SQLDocStore(f"sqlite:///{tmp_path}/s.sqlite")
    store.mset([(k, Document(k)) for k in ("a_1", "ab1", "a%b", "a_2")])
    assert sorted(store.yield_keys(prefix="a_")) == ["a_1", "a_2"]
    assert list(store.yield_keys(prefix="a%")) == ["a%b"]


def test_prefix_keys_are_case_sensitive_so_one_documents_parents_never_list_anothers(tmp_path: Path) -> None:
    store = SQLDocStore(f"sqlite:///{tmp_path}/s.sqlite")
    store.mset([(k, Document(k)) for k in ("Report.p0", "report.p0", "REPORT.p1")])
    assert list(store.yield_keys(prefix="Report.")) == ["Report.p0"]
    store.mdelete(list(store.yield_keys(prefix="Report.")))
    assert sorted(store.yield_keys()) == ["REPORT.p1", "report.p0"]  # SQLite's LIKE would have matched these


def test_unserialisable_metadata_is_a_clear_error(tmp_path: Path) -> None:
    store = SQLDocStore(f"sqlite:///{tmp_path}/s.sqlite")
    with pytest.raises(ValueError, match="Document 'bad': its metadata is not JSON-serialisable"):
        store.mset([("bad", Document("x", metadata={"f": object()}))])


def test_sqlite_writers_in_parallel_wait_for_each_other(tmp_path: Path) -> None:
    """Issue 15, finding 9: parallel large writes failed with 'database is locked' after 5 s."""
    url = f"sqlite:///{tmp_path}/shared.sqlite"

    def worker(n: int) -> None:
        SQLDocStore(url).mset([(f"w{n}.{i}", Document("x" * 200)) for i in range(40_000)])

    assert in_threads(worker, 4) == []
    assert sum(1 for _ in SQLDocStore(url).yield_keys()) == 160_000


def test_a_bare_path_or_a_missing_driver_is_an_error_that_says_what_to_write_or_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # issue #52, findings 6 and 11: "Could not parse SQLAlchemy URL", and a bare ModuleNotFoundError
    with pytest.raises(ValueError, match=r"For a SQLite file write 'sqlite:///parents.sqlite'"):
        SQLDocStore("parents.sqlite")
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as where it is not installed
    with pytest.raises(ImportError, match=r"pip install 'langchain-expand\[postgres\]'"):
        SQLDocStore("postgresql+psycopg://user@localhost/db")
