"""Fields assigned after construction are checked, take effect, and a refused value changes nothing.

Issue #35, finding 2: ``r.search_kwargs = {"k": 1}`` or ``r.search_kwargs["k"] = 3`` on the
parent retriever kept returning 4 parents (``k`` was read once, at construction); assigning a
window retriever another ``vectorstore`` kept writing to the old one; ``w.k = -3`` was accepted
and failed at the next query. Real Chroma and MiniLM.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_expand import BudgetedParentDocumentRetriever, LexicalIndex, SentenceWindowRetriever, chroma_store

pytestmark = pytest.mark.integration  # the embedding model

_names = itertools.count()
TEXT = " ".join(f"Section {n} says the remote costs {20 + n} euros and ships in week {n}." for n in range(12))


def parents(minilm: Embeddings) -> BudgetedParentDocumentRetriever:
    retriever = BudgetedParentDocumentRetriever(
        vectorstore=chroma_store(f"assigned-parents-{next(_names)}", embeddings=minilm),
        docstore=InMemoryStore(),
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=80, chunk_overlap=0),
        parent_splitter=RecursiveCharacterTextSplitter(chunk_size=160, chunk_overlap=0),
        search_kwargs={"k": 4},
    )
    retriever.add_documents([Document(TEXT, id="remote")])
    return retriever


def test_parents_read_k_from_search_kwargs_however_it_is_changed(minilm: Embeddings) -> None:
    retriever = parents(minilm)
    assert len(retriever.invoke("what does the remote cost?")) == 4
    retriever.search_kwargs = {"k": 1}
    assert retriever.k == 1
    assert len(retriever.invoke("what does the remote cost?")) == 1
    retriever.search_kwargs["k"] = 2  # changed in place, as the stock class allows
    assert len(retriever.invoke("what does the remote cost?")) == 2
    retriever.k = 3
    assert retriever.search_kwargs["k"] == 3  # one setting, never two that disagree
    assert len(retriever.invoke("what does the remote cost?")) == 3


def test_a_refused_assignment_raises_and_changes_nothing(minilm: Embeddings, tmp_path: Path) -> None:
    retriever = parents(minilm)
    with pytest.raises(ValueError, match="k"):
        retriever.k = 0
    with pytest.raises(ValueError, match="k"):
        retriever.search_kwargs = {"k": -1}
    assert (retriever.k, retriever.search_kwargs) == (4, {"k": 4})
    assert len(retriever.invoke("what does the remote cost?")) == 4

    windows = SentenceWindowRetriever(vectorstore=chroma_store(f"assigned-{next(_names)}", embeddings=minilm), k=2)
    for name, value in (("k", -3), ("before", -1), ("window", "wide"), ("max_tokens", 0)):
        with pytest.raises(ValueError, match=name):
            setattr(windows, name, value)
    assert (windows.k, windows.before, windows.window, windows.max_tokens) == (2, None, None, None)


def test_windows_take_an_assigned_field_at_the_next_call(minilm: Embeddings, tmp_path: Path) -> None:
    first = chroma_store(f"assigned-{next(_names)}", embeddings=minilm)
    windows = SentenceWindowRetriever(vectorstore=first, lexical=LexicalIndex(tmp_path / "first.sqlite"), k=4)
    windows.add_documents([Document(TEXT, id="remote")])
    assert len(windows.invoke("what does the remote cost?", merge=False)) == 4
    windows.k = 1
    assert len(windows.invoke("what does the remote cost?")) == 1

    # Another store: written to and read from from now on; nothing read from the first is kept.
    windows.vectorstore = chroma_store(f"assigned-{next(_names)}", embeddings=minilm)
    windows.lexical = LexicalIndex(tmp_path / "second.sqlite")
    assert windows.invoke("what does the remote cost?") == []
    windows.add_documents([Document("The warranty lasts two years.", id="memo")])
    (unit,) = windows.invoke("how long is the warranty?")
    assert unit.metadata["doc_id"] == "memo"
    assert first._collection.count() > 0  # type: ignore[attr-defined]
    assert set(first.get()["ids"]) == {i for i in first.get()["ids"] if i.startswith("remote")}


def test_the_fields_are_the_documented_ones_and_nothing_of_pydantics(minilm: Embeddings) -> None:
    """A ``model_fields`` annotation on the assignment mixin had made ``model_fields`` a field of both."""
    for cls in (SentenceWindowRetriever, BudgetedParentDocumentRetriever):
        assert not [name for name in cls.model_fields if name.startswith("model_")], cls
    with pytest.raises(ValueError, match="model_fields"):
        SentenceWindowRetriever(
            vectorstore=chroma_store(f"assigned-{next(_names)}", embeddings=minilm), model_fields={}
        )
