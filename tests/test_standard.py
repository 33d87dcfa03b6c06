"""LangChain's own standard retriever tests, with real MiniLM embeddings, on every store the README names."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    MarkdownSectionSplitter,
    SentenceWindowRetriever,
    SQLDocStore,
    default_embeddings,
)

from .conftest import load_docs
from .stores import make_store

pytestmark = pytest.mark.integration  # the embedding model, subprocesses or a server


STORES = ["chroma-cosine", "chroma-l2", "faiss-l2", "qdrant-cosine", "memory"]
"""The embedded default (Chroma, cosine) and every other store the README names."""


@cache
def _indexed(kind: str, retriever: str) -> dict[str, Any]:
    """A store of ``kind`` holding the E-Manual, indexed by ``retriever`` once per session."""
    folder = Path(tempfile.mkdtemp(prefix=f"lcx-standard-{kind}-"))
    text = load_docs("emanual")[0]["text"][:9000]
    parts: dict[str, Any] = {"vectorstore": make_store(kind, folder, default_embeddings())}
    if retriever == "parents":
        parts |= {
            "docstore": SQLDocStore(f"sqlite:///{folder}/docstore.sqlite"),
            "parent_splitter": MarkdownSectionSplitter(max_level=2),
        }
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


for _kind in STORES:
    for _retriever in (SentenceWindowRetriever, BudgetedParentDocumentRetriever):
        _name = f"Test{_retriever.__name__}On{_kind.title().replace('-', '')}"
        globals()[_name] = type(_name, (_standard_tests(_kind, _retriever),), {})
