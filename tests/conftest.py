"""Shared fixtures: real MiniLM embeddings, real Chroma, real tiktoken counts."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand import SentenceWindowRetriever, chroma_store, default_embeddings

DATA = Path(__file__).parent / "data"
_names = itertools.count()


def load_docs(corpus: str) -> list[dict]:
    with (DATA / corpus / "docs.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def load_queries(corpus: str) -> list[dict]:
    with (DATA / corpus / "queries.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def as_documents(rows: list[dict]) -> list[Document]:
    return [Document(r["text"], id=r["doc_id"], metadata={"title": r["doc_id"]}) for r in rows]


def run_python(script: str, *args: str) -> str:
    """Run ``script`` in a fresh Python process (a real restart) and return what it printed."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class CountingEmbeddings(Embeddings):
    """The real MiniLM model, with a count of every call made to it."""

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.documents_embedded = 0
        self.queries_embedded = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents_embedded += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.queries_embedded += 1
        return self.inner.embed_query(text)


@pytest.fixture(scope="session")
def minilm() -> Embeddings:
    return default_embeddings()


@pytest.fixture
def counting(minilm: Embeddings) -> CountingEmbeddings:
    return CountingEmbeddings(minilm)


@pytest.fixture
def make_retriever(tmp_path: Path, counting: CountingEmbeddings) -> Callable[..., SentenceWindowRetriever]:
    """A retriever over a fresh persisted Chroma collection; embeddings are counted."""

    def make(**kwargs: object) -> SentenceWindowRetriever:
        store = chroma_store(f"test-{next(_names)}", persist_directory=tmp_path / "chroma", embeddings=counting)
        return SentenceWindowRetriever(vectorstore=store, **kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture(scope="session")
def qmsum_index(tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings) -> SentenceWindowRetriever:
    """The test meetings indexed once, for read-only tests."""
    path = tmp_path_factory.mktemp("qmsum")
    store = chroma_store("qmsum", persist_directory=path, embeddings=minilm)
    retriever = SentenceWindowRetriever(vectorstore=store, k=8)
    retriever.add_documents(as_documents(load_docs("qmsum")))
    return retriever
