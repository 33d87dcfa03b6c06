"""Edge inputs from the third outside pass (issue #34, finding 10): an answer or a clear error, never a raw one."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_expand import BudgetedParentDocumentRetriever, LexicalIndex, SentenceWindowRetriever, chroma_store

from .conftest import load_docs

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


def test_a_dict_filter_on_the_in_memory_store_says_which_filter_it_takes(minilm: Embeddings) -> None:
    retriever = SentenceWindowRetriever(vectorstore=InMemoryVectorStore(minilm))
    retriever.add_documents([Document("The warranty lasts two years. Returns take thirty days.", id="a")])
    with pytest.raises(ValueError, match="InMemoryVectorStore filters with a function of a Document"):
        retriever.invoke("warranty", filter={"source": "a.md"})
    assert retriever.invoke("warranty", filter=lambda doc: True)  # type: ignore[arg-type]
