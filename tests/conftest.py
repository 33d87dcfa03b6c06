"""Shared fixtures: real MiniLM embeddings, real Chroma, real tiktoken counts."""

from __future__ import annotations

import contextlib
import gc
import io
import itertools
import json
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand import LexicalIndex, SentenceWindowRetriever, chroma_store, default_embeddings
from langchain_expand.windows.cache import SentenceCache
from langchain_expand.windows.views import StoreViews

from . import pgserver

DATA = Path(__file__).parent / "data"

HEAVY_FIXTURES = {"minilm", "counting", "make_retriever", "qmsum_index", "make_parents", "postgres_url", "demo_run"}
"""Fixtures that load the embedding model or start a server: their tests are ``integration``."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the model or a server ``integration``, so the fast tier skips it."""
    for item in items:
        if HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


_names = itertools.count()


def load_docs(corpus: str) -> list[dict]:
    with (DATA / corpus / "docs.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def load_queries(corpus: str) -> list[dict]:
    with (DATA / corpus / "queries.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def gold_recall(query: dict[str, Any], docs: list[Document]) -> float:
    """The share of ``query``'s gold characters that ``docs`` hold in its own document (each at most once)."""
    got = sorted(
        (d.metadata["start_index"], d.metadata["end_index"]) for d in docs if d.metadata["doc_id"] == query["doc_id"]
    )
    spans: list[list[int]] = []  # the units' union: a char two units hold counts once
    for a, b in got:
        if spans and a <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], b)
        else:
            spans.append([a, b])
    covered = sum(max(0, min(e, b) - max(s, a)) for s, e in query["gold_spans"] for a, b in spans)
    return covered / sum(e - s for s, e in query["gold_spans"])


def as_documents(rows: list[dict], key: str = "title") -> list[Document]:
    return [Document(r["text"], id=r["doc_id"], metadata={key: r["doc_id"]}) for r in rows]


def in_threads(work: Callable[[int], object], n: int) -> list[BaseException]:
    """Run ``work(0) ... work(n - 1)`` at once, one thread each; the exceptions they raised."""
    import threading

    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except Exception as exc:  # collected for the caller to assert on
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def run_python(script: str, *args: str, cwd: Path | None = None) -> str:
    """Run ``script`` in a fresh Python process (a real restart), in ``cwd`` if given, and return what it printed."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=cwd)
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


class EmbeddedOnce(Embeddings):
    """The real model, each distinct text embedded once a session: a pure function of its text.

    The suite asks the same few queries thousands of times (the crash harness alone, 320) and
    indexes the same test slices in dozens of tests. Every vector is the model's own for that
    text (kept as float32, as the model computes it); a text never seen is embedded as usual,
    the new ones of a batch in one call.
    """

    def __init__(self, model: Embeddings) -> None:
        self.model = model
        self.queries: dict[str, np.ndarray] = {}
        self.documents: dict[str, np.ndarray] = {}

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        new = [t for t in dict.fromkeys(texts) if t not in self.documents]
        if new:
            vectors = self.model.embed_documents(new)
            self.documents.update(zip(new, np.asarray(vectors, dtype=np.float32), strict=True))
        return [self.documents[t].tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        if text not in self.queries:
            self.queries[text] = np.asarray(self.model.embed_query(text), dtype=np.float32)
        return self.queries[text].tolist()


@pytest.fixture(scope="session")
def minilm() -> Embeddings:
    return EmbeddedOnce(default_embeddings())


@pytest.fixture(scope="session")
def uncached_minilm(minilm: Embeddings) -> Embeddings:
    """The model itself, embedding every text it is given: for tests whose point needs a write to
    take the time it really takes (queries running while documents are indexed)."""
    assert isinstance(minilm, EmbeddedOnce)
    return minilm.model


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
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``langchain-expand demo`` run once in this process: its ``--home`` and what it printed."""
    from langchain_expand.tools.cli import main

    home = tmp_path_factory.mktemp("demo")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--home", str(home), "demo"]) == 0
    return home, out.getvalue()


@pytest.fixture(scope="session")
def qmsum_index(tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings) -> SentenceWindowRetriever:
    """The test meetings indexed once, for read-only tests."""
    path = tmp_path_factory.mktemp("qmsum")
    store = chroma_store("qmsum", persist_directory=path, embeddings=minilm)
    retriever = SentenceWindowRetriever(vectorstore=store, k=8)
    retriever.add_documents(as_documents(load_docs("qmsum")))
    return retriever


Make = Callable[..., SentenceWindowRetriever]
"""Makes a retriever over an index the memory tests share (:func:`reader`)."""


def index_of(folder: Path, corpus: str, minilm: Embeddings) -> tuple[Any, Path]:
    """``corpus``'s test documents in one Chroma collection and lexical index under ``folder``."""
    store = chroma_store(corpus, persist_directory=folder / "chroma", embeddings=minilm)
    lexical = folder / "lexical.sqlite"
    SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(lexical)).add_documents(
        as_documents(load_docs(corpus))
    )
    return store, lexical


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings) -> tuple[Any, Path]:
    """The test meetings in Chroma and a lexical index, for the memory tests' read-only checks."""
    return index_of(tmp_path_factory.mktemp("cache"), "qmsum", minilm)


@pytest.fixture
def reader(indexed: tuple[Any, Path]) -> Make:
    """A new retriever over the indexed meetings: its own store adapter and cache; ``lexical=True`` opens the index.

    Retrievers over one store share what queries keep in memory (``windows.views.shared``); each
    made here starts with its own, empty, as a fresh process's would.
    """
    store, path = indexed

    def make(*, lexical: bool = False, **kwargs: Any) -> SentenceWindowRetriever:
        made = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path) if lexical else None, **kwargs)
        made._cache, made._views = SentenceCache(), StoreViews()
        return made

    return make


@pytest.fixture(scope="module")
def passages(tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings) -> tuple[Any, Path]:
    """The 40 TAT-QA passages: many documents, of which a query meets a few."""
    return index_of(tmp_path_factory.mktemp("passages"), "tatqa", minilm)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL server on loopback, for the shared docstore and lexical index.

    .ci/run installs Debian's postgresql where it is missing; elsewhere these tests skip
    with that reason.
    """
    if pgserver.postgres_bin() is None:
        pytest.skip("PostgreSQL is not installed (no initdb found); .ci/run installs Debian's postgresql")
    with pgserver.throwaway_postgres() as url:
        yield url


def tracked_slots(root: object) -> int:
    """The references the garbage collector follows from ``root``'s own data, on each full collection.

    Walks what ``root`` holds (instances, containers, closures), not functions' modules.
    """
    seen: set[int] = set()
    todo = [root]
    slots = 0
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType)):
            continue
        seen.add(id(obj))
        held = list(obj.__closure__ or ()) if isinstance(obj, types.FunctionType) else gc.get_referents(obj)
        if gc.is_tracked(obj):
            slots += len(held)
        todo += held
    return slots
