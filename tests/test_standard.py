"""LangChain's own standard retriever tests, with real MiniLM embeddings, on every store the README names."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.stores import InMemoryStore
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    MarkdownSectionSplitter,
    SentenceWindowRetriever,
    SQLDocStore,
    chroma_store,
    default_embeddings,
)

from .conftest import as_documents, load_docs
from .stores import make_store

pytestmark = pytest.mark.integration  # the embedding model, subprocesses or a server


@cache
def _indexed_store() -> Any:
    store = chroma_store(
        "standard", persist_directory=tempfile.mkdtemp(prefix="lcx-standard-"), embeddings=default_embeddings()
    )
    SentenceWindowRetriever(vectorstore=store).add_documents(as_documents(load_docs("qmsum")[:1]))
    return store


class TestSentenceWindowRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[SentenceWindowRetriever]:
        return SentenceWindowRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"vectorstore": _indexed_store(), "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "what colour should the remote control be"


@cache
def _parent_retriever_parts() -> dict[str, Any]:
    path = tempfile.mkdtemp(prefix="lcx-standard-parents-")
    parts = {
        "vectorstore": chroma_store("standard-parents", persist_directory=path, embeddings=default_embeddings()),
        "docstore": SQLDocStore(f"sqlite:///{path}/docstore.sqlite"),
        "parent_splitter": MarkdownSectionSplitter(max_level=2),
    }
    rows = load_docs("emanual")
    BudgetedParentDocumentRetriever(**parts).add_documents([Document(r["text"], id=r["doc_id"]) for r in rows])
    return parts


class TestBudgetedParentDocumentRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BudgetedParentDocumentRetriever]:
        return BudgetedParentDocumentRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {**_parent_retriever_parts(), "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "how do I pair the remote control with the TV"


# -- the same tests on every other store the README names ------------------------------------

OTHER_STORES = ["chroma-l2", "faiss-l2", "qdrant-cosine", "memory"]


@cache
def _indexed(kind: str, retriever: str) -> dict[str, Any]:
    """A store of ``kind`` holding the E-Manual, indexed by ``retriever`` once per session."""
    folder = Path(tempfile.mkdtemp(prefix=f"lcx-standard-{kind}-"))
    text = load_docs("emanual")[0]["text"][:9000]
    parts: dict[str, Any] = {"vectorstore": make_store(kind, folder, default_embeddings())}
    if retriever == "parents":
        parts |= {"docstore": InMemoryStore(), "parent_splitter": MarkdownSectionSplitter(max_level=2)}
        BudgetedParentDocumentRetriever(**parts).add_documents([Document(text, id="manual")])
    else:
        SentenceWindowRetriever(**parts).add_documents([Document(text, id="manual")])
    return parts


def _standard_tests(kind: str, retriever: type[Any]) -> type[RetrieversIntegrationTests]:
    role = "parents" if retriever is BudgetedParentDocumentRetriever else "windows"

    class OnStore(RetrieversIntegrationTests):
        @property
        def retriever_constructor(self) -> type[Any]:
            return retriever

        @property
        def retriever_constructor_params(self) -> dict[str, Any]:
            return {**_indexed(kind, role), "k": 4}

        @property
        def retriever_query_example(self) -> str:
            return "how do I connect the remote control to the TV"

    return OnStore


for _kind in OTHER_STORES:
    for _retriever in (SentenceWindowRetriever, BudgetedParentDocumentRetriever):
        _name = f"Test{_retriever.__name__}On{_kind.title().replace('-', '')}"
        globals()[_name] = type(_name, (_standard_tests(_kind, _retriever),), {})
