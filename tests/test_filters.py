"""The in-memory filter (``store/filters.py``) against Chroma's own, record for record."""

from __future__ import annotations

import itertools
import random
import uuid
from pathlib import Path
from typing import Any

import chromadb
import pytest
from langchain_core.documents import Document

from langchain_expand import BudgetedParentDocumentRetriever, SentenceWindowRetriever, SQLDocStore, chroma_store
from langchain_expand.store import filters

from .conftest import CountingEmbeddings

RECORDS: list[dict[str, Any]] = [
    {"a": 1},
    {"a": 1.0},
    {"a": True},
    {"a": "1"},
    {"b": 2},
    {"a": 2, "b": 3},
    {"a": 0.5, "b": "x"},
    {"a": False},
    {"a": 0},
    {"a": "z", "lcx_doc": "d1"},
    {"lcx_doc": "d2", "b": 3},
    {},
    # lists, as a store of arrays holds them (records.encode_metadata): one scalar kind each
    {"a": ["x", "1"]},
    {"a": [1, 2], "b": ["x"]},
    {"a": [1.0, 0.5]},
    {"a": [True]},
    {"a": [0.1, 2.5]},
]
CONDITIONS: list[Any] = [
    1,
    1.0,
    True,
    "1",
    0,
    {"$eq": 2},
    {"$ne": 1},
    {"$ne": "x"},
    {"$ne": False},
    {"$gt": 0.5},
    {"$gte": 0},
    {"$lt": 2},
    {"$lte": 1},
    {"$in": [1, 2]},
    {"$in": ["1", "z"]},
    {"$in": [True]},
    {"$nin": [1]},
    {"$nin": ["x", "y"]},
    # a float against an int the record holds: Chroma cuts it toward zero first (1.5 equals 1)
    1.5,
    -0.5,
    {"$ne": 1.5},
    {"$lt": 1.5},
    {"$gte": 0.5},
    {"$lte": -0.5},
    {"$in": [0.5, 2.0]},
    {"$in": [1.0, 2.0]},
    {"$nin": [1.5]},
    {"$gt": 1e20},
    # a list holds a value of the same kind: an int is not a float there, a bool not an int
    {"$contains": "x"},
    {"$contains": "1"},
    {"$contains": 1},
    {"$contains": 1.0},
    {"$contains": 0.5},
    {"$contains": 0.1},
    {"$contains": True},
    {"$contains": 0},
    {"$not_contains": 1},
    {"$not_contains": "x"},
    {"$not_contains": False},
]
FILTERS: list[dict[str, Any]] = [
    *({key: c} for key in ("a", "b", "lcx_doc") for c in CONDITIONS),
    {"$and": [{"a": {"$gte": 1}}, {"b": 3}]},
    {"$or": [{"a": 2}, {"b": 2}, {"lcx_doc": "d1"}]},
    {"$and": [{"$or": [{"a": 1}, {"b": 3}]}, {"a": {"$ne": 2}}]},
]
REFUSED: list[Any] = [
    {"a": 1, "b": 3},  # two keys in one dict
    {"$and": [{"a": 2}]},  # one part
    {"a": {"$in": []}},
    {"a": {"$in": [1, "1"]}},  # mixed kinds
    {"a": {"$in": [1, 2.0]}},  # an int and a float: two kinds to Chroma
    {"a": {"$nin": [0.5, 1]}},
    {"a": {"$gt": "0"}},
    {"a": {"$eq": 1, "$ne": 2}},
    {"a": [1]},
    {"a": float("nan")},  # a number that is not finite
    {"a": {"$lt": float("inf")}},
    {"a": {"$in": [1.0, float("-inf")]}},
    {"a": {"$contains": ["x"]}},  # a list: it takes one value
    {"a": {"$contains": float("nan")}},
]
UNEVALUATED: list[Any] = [{"a": {"$contains": 2**70}}, {"$not": {"a": 1}}]
"""What this module leaves to the store although the store may take it (it answers, or refuses, itself)."""


@pytest.fixture(scope="module")
def collection() -> Any:
    made = chromadb.EphemeralClient().create_collection(f"filters-{uuid.uuid4().hex[:8]}")
    made.add(
        ids=[str(i) for i in range(len(RECORDS))],
        metadatas=[r or None for r in RECORDS],  # type: ignore[misc]
        embeddings=[[1.0, float(i)] for i in range(len(RECORDS))],
    )
    return made


@pytest.mark.parametrize("where", FILTERS, ids=str)
def test_a_filter_picks_the_records_chroma_picks(collection: Any, where: dict[str, Any]) -> None:
    expected = sorted(int(i) for i in collection.get(where=where)["ids"])
    assert [i for i, r in enumerate(RECORDS) if filters.matches(where, r)] == expected


@pytest.mark.parametrize("where", REFUSED, ids=str)
def test_a_filter_chroma_refuses_is_left_to_it(collection: Any, where: Any) -> None:
    with pytest.raises(filters.Unsupported):
        filters.matches(where, {"a": 1})
    with pytest.raises(Exception):  # noqa: B017, PT011  (Chroma's own error: ValueError or its own)
        collection.get(where=where)


@pytest.mark.parametrize("where", UNEVALUATED, ids=str)
def test_an_operator_not_evaluated_here_is_left_to_the_store(where: Any) -> None:
    with pytest.raises(filters.Unsupported):
        filters.matches(where, {"a": 1})


def test_only_keys_every_record_of_a_document_shares_are_evaluated_in_memory() -> None:
    filters.whole_documents({"$or": [{"lcx_doc": "d"}, {"source": {"$in": ["a", "b"]}}]})
    for per_record in ({"lcx_i": 0}, {"$and": [{"source": "a"}, {"lcx_start": {"$gt": 10}}]}):
        with pytest.raises(filters.Unsupported, match="lcx_"):
            filters.whole_documents(per_record)
    with pytest.raises(filters.Unsupported):
        filters.whole_documents({"a": 1, "b": 2})


def test_a_list_is_held_as_a_list_only_where_chroma_takes_it_and_comes_back_as_given() -> None:
    from langchain_expand.store.records import decode_metadata, encode_metadata

    given = {
        "groups": ["eng", "all"],
        "ids": [1, 2],
        "weights": [0.5],
        "flags": [True, False],
        "mixed": [1, "a"],  # Chroma refuses a mix of kinds: JSON text, as every list was
        "empty": [],
        "nested": [[1]],
        "broken": ["a\ud800"],  # a lone surrogate has no UTF-8 form
        "big": [2**70],
        "none": None,
    }
    held = encode_metadata(given, "doc", lists=True)
    assert [k for k, v in held.items() if isinstance(v, list)] == ["groups", "ids", "weights", "flags"]
    assert decode_metadata(held) == given
    assert decode_metadata(encode_metadata(given, "doc")) == given  # a store of no arrays: all JSON text
    assert not any(isinstance(v, list) for v in encode_metadata(given, "doc").values())
    collection = chromadb.EphemeralClient().create_collection(f"lists-{uuid.uuid4().hex[:8]}")
    collection.add(ids=["doc"], metadatas=[held], embeddings=[[1.0, 0.0]])  # Chroma takes every one of them
    assert collection.get(where={"groups": {"$contains": "eng"}})["ids"] == ["doc"]


def test_filters_cover_every_operator_on_every_kind() -> None:
    # the table above is the contract: each operator meets a str, an int, a float, a bool and a missing key
    operators = {next(iter(c)) if isinstance(c, dict) else "$eq" for c in CONDITIONS}
    assert operators == {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$contains", "$not_contains"}
    kinds = {type(r.get("a")).__name__ for r in RECORDS}
    assert kinds >= {"int", "float", "bool", "str", "NoneType", "list"}
    assert len(list(itertools.product(FILTERS, RECORDS))) > 600


def test_the_store_says_once_when_a_filter_leaves_hybrid_search(minilm: Any, caplog: pytest.LogCaptureFixture) -> None:
    # One decision for both retrievers (StoreAdapter.whole_documents): in memory, or the store alone.
    from langchain_core.vectorstores import InMemoryVectorStore

    from langchain_expand.store.adapters import adapt

    vectors = adapt(InMemoryVectorStore(minilm), "test")
    assert vectors.whole_documents({"$or": [{"doc_id": "d"}, {"source": {"$in": ["a", "b"]}}]})
    unseen = {"lcx_i": {"$gte": uuid.uuid4().int}}  # a line this process has not logged yet
    with caplog.at_level("INFO", logger="langchain_expand.store.filters"):
        for where in (unseen, unseen, ["a store's own object"]):
            assert not vectors.whole_documents(where)
    said = [r.getMessage() for r in caplog.records]
    assert sum(str(unseen["lcx_i"]["$gte"]) in line and "dense only" in line for line in said) == 1
    assert any("own object" in line and "dense only" in line for line in said)


def test_random_filters_pick_the_records_chroma_picks_or_are_left_to_it() -> None:
    # Two mismatches with Chroma were found by probing (a float against an int, an $in of ints
    # and floats); a seeded walk over the grammar finds the next: every filter this module
    # evaluates picks what Chroma picks, and one Chroma refuses is never evaluated here.
    rng = random.Random(5)
    values = [
        0,
        1,
        2,
        -1,
        0.0,
        0.5,
        1.0,
        1.5,
        -0.5,
        -1.5,
        True,
        False,
        "",
        "a",
        "1",
        "\u00e9",
        2**60,
        2**53 + 1,
        7.999999,
    ]

    def held() -> Any:  # a scalar, or a list of one kind (one in five)
        first = rng.choice(values)
        if rng.random() < 0.8:
            return first
        return [first, *rng.sample([v for v in values if type(v) is type(first)], rng.randint(0, 2))]

    records = [{k: held() for k in "abc" if rng.random() < 0.8} for _ in range(40)]
    collection = chromadb.EphemeralClient().create_collection(f"random-{uuid.uuid4().hex[:8]}")
    collection.add(
        ids=[str(i) for i in range(len(records))],
        metadatas=[r or None for r in records],  # type: ignore[misc]
        embeddings=[[1.0, float(i)] for i in range(len(records))],
    )

    def condition() -> Any:
        op = rng.choice(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$contains", "$not_contains", None])
        if op is None:
            return rng.choice(values)
        return {
            op: [rng.choice(values) for _ in range(rng.randint(1, 3))] if op in ("$in", "$nin") else rng.choice(values)
        }

    def where(depth: int = 0) -> dict[str, Any]:
        if depth < 2 and rng.random() < 0.25:
            return {rng.choice(["$and", "$or"]): [where(depth + 1) for _ in range(rng.randint(2, 3))]}
        return {rng.choice("abc"): condition()}

    evaluated = 0
    for _ in range(600):
        asked = where()
        try:
            mine = [i for i, r in enumerate(records) if filters.matches(asked, r)]
        except filters.Unsupported:
            continue  # the store decides (and may refuse)
        evaluated += 1
        assert mine == sorted(int(i) for i in collection.get(where=asked)["ids"]), asked
    assert evaluated > 300


@pytest.mark.parametrize("design", ["windows", "parents"])
def test_an_access_list_is_filtered_with_contains_and_an_older_index_is_rewritten_on_re_adding(
    design: str, tmp_path: Path, counting: CountingEmbeddings
) -> None:
    # Lists were stored as JSON text, where Chroma's $contains finds nothing: an access-list filter
    # ({"groups": {"$contains": "eng"}}) silently answered nothing. Chroma holds them as lists now.
    store = chroma_store("acl", persist_directory=tmp_path / "chroma", embeddings=counting)
    retriever: Any = (
        SentenceWindowRetriever(vectorstore=store, k=2)
        if design == "windows"
        else BudgetedParentDocumentRetriever(
            vectorstore=store, docstore=SQLDocStore(f"sqlite:///{tmp_path}/docstore.sqlite"), k=2
        )
    )
    text = "The launch plan moves to March. The budget was approved by the board."
    plans = [Document(text, id=g, metadata={"groups": [g, "all"]}) for g in ("eng", "ops")]
    retriever._vectors.holds_lists = False  # as an index written before
    retriever.add_documents(plans)
    assert not retriever.invoke("when is the launch", filter={"groups": {"$contains": "eng"}})
    retriever._vectors.holds_lists = True
    embedded = counting.documents_embedded
    written = retriever.index_documents(plans)  # a new version: its records written again, not embedded
    assert (written.unchanged, counting.documents_embedded) == ([], embedded)
    assert retriever.index_documents(plans).unchanged == ["eng", "ops"]  # settled: the next run writes nothing
    for where, found in (
        ({"$contains": "eng"}, {"eng"}),
        ({"$not_contains": "eng"}, {"ops"}),
        ({"$contains": "x"}, set()),
    ):
        units = retriever.invoke("when is the launch", filter={"groups": where})
        assert {u.metadata["doc_id"] for u in units} == found
        assert all(u.metadata["groups"] == [u.metadata["doc_id"], "all"] for u in units)  # a list, served as one
    retriever.add_documents([Document(text, id="eng", metadata={"groups": ["eng", "ops"]})])  # its list alone changed
    assert counting.documents_embedded == embedded
    shared = retriever.invoke("launch", filter={"groups": {"$contains": "ops"}})
    assert {u.metadata["doc_id"] for u in shared} == {"eng", "ops"}
