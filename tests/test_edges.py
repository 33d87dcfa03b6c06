"""Edge inputs from the third outside pass (issue #34, finding 10): an answer or a clear error, never a raw one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore

from langchain_expand import BudgetedParentDocumentRetriever, LexicalIndex, SentenceWindowRetriever, chroma_store

from .conftest import load_docs, run_python
from .stores import make_store

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("design", ["windows", "hybrid windows", "parents"])
def test_a_huge_budget_returns_everything_that_matches(design: str, tmp_path: Path, minilm: Embeddings) -> None:
    """``max_tokens=10**12`` asked Chroma for 2e10 results: OverflowError from its bindings."""
    store = chroma_store("edges", persist_directory=tmp_path, embeddings=minilm)
    if design == "parents":
        retriever = BudgetedParentDocumentRetriever(vectorstore=store, docstore=InMemoryStore())
    else:
        lexical = LexicalIndex(tmp_path / "lexical.sqlite") if design == "hybrid windows" else None
        retriever = SentenceWindowRetriever(vectorstore=store, lexical=lexical)
    docs = [Document(d["text"], id=d["doc_id"]) for d in load_docs("friendsqa")[:1]]
    retriever.add_documents(docs)
    found = retriever.invoke("who is getting married", max_tokens=10**12)
    assert found
    assert sum(len(d.page_content) for d in found) <= sum(len(d.page_content) for d in docs) * 1.01


@pytest.mark.parametrize("kind", ["memory", "faiss-l2"])
@pytest.mark.parametrize("design", ["windows", "hybrid windows", "parents"])
def test_a_dict_filter_in_chromas_syntax_picks_what_chroma_picks_on_the_stores_that_filter_by_function(
    kind: str, design: str, tmp_path: Path, minilm: Embeddings
) -> None:
    # Chroma's syntax was refused on InMemoryVectorStore ("filters with a function of a Document"), and
    # on FAISS $ne, $contains and $not_contains were ("unsupported operator"): a filter written against
    # Chroma failed on the store a test or a prototype swaps in
    def over(store: Any, name: str) -> Any:
        if design == "parents":
            return BudgetedParentDocumentRetriever(vectorstore=store, docstore=InMemoryStore())
        lexical = LexicalIndex(tmp_path / f"{name}.sqlite") if design == "hybrid windows" else None
        return SentenceWindowRetriever(vectorstore=store, lexical=lexical)

    chroma = over(chroma_store("filtered", persist_directory=tmp_path, embeddings=minilm), "chroma")
    other = over(make_store(kind, tmp_path, minilm), kind)
    text = "The warranty lasts two years. Returns take thirty days. Keep the receipt."
    docs = [
        Document(f"{text} Team {name} owns it.", id=name, metadata={"groups": groups, "year": year})
        for name, groups, year in (("a", ["eng", "all"], 2021), ("b", ["ops", "all"], 2023), ("c", ["ops"], 2024))
    ]
    for retriever in (chroma, other):
        retriever.add_documents(docs)
    wheres = [
        {"doc_id": "a"},
        {"groups": {"$contains": "ops"}},
        {"groups": {"$not_contains": "eng"}},
        {"year": {"$ne": 2021}},
        {"year": {"$gte": 2022}},
        {"$or": [{"doc_id": "a"}, {"year": {"$gt": 2023}}]},
        {"$and": [{"groups": {"$contains": "all"}}, {"doc_id": {"$nin": ["b"]}}]},
    ]
    for where in wheres:
        picked = [
            {d.metadata["doc_id"] for d in r.invoke("how long is the warranty", filter=where, k=3)}
            for r in (chroma, other)
        ]
        assert picked[0], where
        assert picked[0] == picked[1], where
    assert [d.metadata["groups"] for d in other.invoke("warranty", filter={"doc_id": "c"})] == [["ops"]]
    if kind == "faiss-l2":  # FAISS's own syntax still works
        assert {d.metadata["doc_id"] for d in other.invoke("warranty", filter={"year": {"$neq": 2021}})} == {"b", "c"}
        return
    with pytest.raises(ValueError, match=r"filter \{'year': \{'\$between': 1\}\}.*Chroma's syntax"):
        other.invoke("warranty", filter={"year": {"$between": 1}})
    with pytest.raises(ValueError, match="a function of a Document or a dict in Chroma's syntax, not a str"):
        other.invoke("warranty", filter="year > 2020")
    assert other.invoke("warranty", filter=lambda doc: doc.metadata["doc_id"] == "b")[0].metadata["doc_id"] == "b"


@pytest.mark.parametrize("design", ["windows", "parents"])
def test_a_dict_filter_on_qdrant_says_which_filter_it_takes(design: str, tmp_path: Path, minilm: Embeddings) -> None:
    # Found probing every store in every memory mode: Chroma's syntax on Qdrant failed deep in
    # its client, with "'dict' object has no attribute 'must'".
    from qdrant_client import models

    store = make_store("qdrant-cosine", tmp_path, minilm)
    if design == "parents":
        retriever: Any = BudgetedParentDocumentRetriever(vectorstore=store, docstore=InMemoryStore())
    else:
        retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(tmp_path / "lexical.sqlite"))
    text = "The warranty lasts two years. Returns take thirty days."
    retriever.add_documents([Document(text, id=g, metadata={"groups": [g, "all"]}) for g in ("a", "b")])
    with pytest.raises(ValueError, match=r"Qdrant filters with a qdrant_client.models.Filter, not a dict"):
        retriever.invoke("warranty", filter={"doc_id": "a"})
    kept = models.FieldCondition(key="metadata.doc_id", match=models.MatchValue(value="a"))
    assert {d.metadata["doc_id"] for d in retriever.invoke("warranty", filter=models.Filter(must=[kept]))} == {"a"}
    # an access list is held as a list, so a match on one of its values finds it (it was JSON text)
    member = models.FieldCondition(key="metadata.groups", match=models.MatchValue(value="b"))
    found = retriever.invoke("warranty", filter=models.Filter(must=[member]))
    assert {d.metadata["doc_id"] for d in found} == {"b"}
    assert found[0].metadata["groups"] == ["b", "all"]


def test_a_reader_keeps_fetching_past_records_another_process_deleted(
    tmp_path: Path, minilm: Embeddings, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue #34, finding 8: embedded Chroma's index in a process that was running when another
    deleted a document still matches its sentences; they were dropped and over-fetching stopped,
    so k=4 gave 2 windows while 8 other sentences were stored."""
    texts = {
        "gone": "The warranty lasts two years. The warranty covers the screen.",
        "a": "Returns are accepted within thirty days. Bring the receipt. Stores open at nine. Parking is free.",
        "b": "Support answers by phone. Email takes two days. Chat is open weekdays. The office is in Zurich.",
    }
    store = chroma_store("docs", persist_directory=tmp_path, embeddings=minilm)
    reader = SentenceWindowRetriever(vectorstore=store, merge=False)  # a unit a hit: short results show
    reader.add_documents([Document(text, id=doc_id) for doc_id, text in texts.items()])
    assert [d.metadata["doc_id"] for d in reader.invoke("warranty", k=4, before=0, after=0)][:2] == ["gone", "gone"]
    run_python(
        "import sys\n"
        "from langchain_expand import SentenceWindowRetriever, chroma_store\n"
        "store = chroma_store('docs', persist_directory=sys.argv[1])\n"
        "SentenceWindowRetriever(vectorstore=store).delete(['gone'])\n",
        str(tmp_path),
    )
    found = reader.invoke("warranty", k=4, before=0, after=0)
    assert len(found) == 4
    assert "gone" not in {d.metadata["doc_id"] for d in found}
    with caplog.at_level("WARNING"):
        assert len(reader.invoke("warranty", k=10, before=0, after=0)) == 8  # every sentence stored
    assert "8 of k=10 windows: the store's index matched 2 records that are no longer stored" in caplog.text


@pytest.mark.parametrize("where", [{"m": {"$foo": 1}}, {"m": {"$eq": [1]}}, {"$nand": [{"m": 1}]}])
def test_a_filter_chroma_refuses_is_an_error_that_shows_it_and_the_syntax(
    where: dict, tmp_path: Path, minilm: Embeddings
) -> None:
    # issue #51, finding 6: an unknown operator got only Chroma's "Invalid where clause"
    store = chroma_store("refused", persist_directory=tmp_path / "chroma", embeddings=minilm)
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(tmp_path / "lexical.sqlite"))
    retriever.add_documents([Document("One sentence. Two sentences.", id="a", metadata={"m": 1})])
    for call in ({}, {"max_tokens": 100}):
        with pytest.raises(ValueError, match=r"Chroma refused the filter .*\$in.*\$and"):
            retriever.invoke("one", filter=where, **call)
    assert retriever.invoke("one", filter={"m": 1})
