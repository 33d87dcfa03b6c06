"""LangChain's own standard retriever tests, on real Chroma with real MiniLM embeddings."""

from __future__ import annotations

import tempfile
from functools import cache
from typing import Any

import pytest
from langchain_core.documents import Document
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
