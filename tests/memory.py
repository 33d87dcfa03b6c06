"""What the memory tests share: the test meetings indexed, a retriever over them, read logs and spies."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document

from langchain_expand import (
    LexicalIndex,
    Performance,
    SentenceWindowRetriever,
    TokenCounter,
    chroma_store,
)
from langchain_expand.store import filters, similarity
from langchain_expand.store.adapters import StoreAdapter
from langchain_expand.store.adapters.ties import TIES, tie_key
from langchain_expand.store.lexical import BaseLexicalIndex
from langchain_expand.windows.bm25 import Bm25, Listed
from langchain_expand.windows.cache import SentenceCache
from langchain_expand.windows.reads import Reads
from langchain_expand.windows.views import Build, Current, StoreViews

from .conftest import Make


def sqlite_copy(source: Path, target: Path) -> Path:
    """A consistent copy of a SQLite file, its write-ahead log included (SQLite's backup)."""
    with sqlite3.connect(source) as read, sqlite3.connect(target) as write:
        read.backup(write)
    return target


class ReadLog:
    """Every id the retriever reads from its store, by either read."""

    def __init__(self, adapter: StoreAdapter) -> None:
        self.ids: list[str] = []
        for name in ("get_by_ids", "with_vectors"):
            original = getattr(adapter, name)
            object.__setattr__(adapter, name, self._logged(original))

    def _logged(self, original: Callable[[Sequence[str]], Any]) -> Callable[[Sequence[str]], Any]:
        def read(ids: Sequence[str]) -> Any:
            self.ids.extend(ids)
            return original(ids)

        return read

    def taken(self) -> list[str]:
        ids, self.ids = self.ids, []
        return ids


def shown(docs: list[Document]) -> list[tuple[str, dict]]:
    return [(d.page_content, d.metadata) for d in docs]


class LoggedCounter(TokenCounter):
    """``cl100k_base``, noting every text it counts."""

    def __init__(self) -> None:
        super().__init__("cl100k_base")
        self.texts: list[str] = []

    def __call__(self, text: str) -> int:
        self.texts.append(text)
        return super().__call__(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        self.texts.extend(texts)
        return super().count_many(texts)


def exact_search(retriever: SentenceWindowRetriever) -> SentenceWindowRetriever:
    """``retriever`` (on Chroma) with its store searched exactly: every vector it holds measured against the query.

    As the store measures (float32, its space: :func:`similarity.distances`), every record scored:
    what an index's misses decide is decided here by the distances alone. Ties (to ``TIES``
    decimals) go by document id, then position: every path's rule (``tie_key``). A ``filter``
    keeps the records it passes, as Chroma decides (:func:`filters.matches`); any other argument
    is refused, so no search is exact in name only.
    """
    got = retriever.vectorstore._collection.get(include=["embeddings", "metadatas"])  # type: ignore[attr-defined]
    ids, matrix, metas = got["ids"], np.asarray(got["embeddings"], dtype=np.float32), got["metadatas"]
    adapter = retriever._vectors

    def search_ids(vector: Sequence[float], k: int, **kwargs: Any) -> list[tuple[str, float]]:
        where = kwargs.pop("filter", None)
        if kwargs:
            msg = f"exact_search takes only `filter`, got {sorted(kwargs)}"
            raise TypeError(msg)
        q = np.asarray(vector, dtype=np.float32)
        found = similarity.distances(*similarity.measured(matrix, q), q, adapter.space or "cosine").tolist()
        kept = [(i, d) for i, d, m in zip(ids, found, metas, strict=True) if where is None or filters.matches(where, m)]
        kept.sort(key=lambda pair: (round(pair[1], TIES), tie_key(pair[0])))
        return [(i, adapter.relevance(d)) for i, d in kept[:k]]

    object.__setattr__(adapter, "search_ids", search_ids)
    return retriever


def snapshot_of(retriever: SentenceWindowRetriever) -> Build:
    """What ``retriever`` holds in memory at its store's mark, built now: whole, the snapshot."""
    retriever.warm()
    held = retriever._views.built
    assert held is not None
    assert held.whole
    assert held.columns is not None
    return held


def nearest_of(snapshot: Build, retriever: SentenceWindowRetriever, query: list[float], k: int) -> Any:
    """The ``k`` sentences of ``snapshot`` nearest ``query``, as a query on it finds them."""
    current = Current(snapshot.columns, snapshot.heads, whole=True)
    return Reads(retriever._vectors, SentenceCache(), 0, retriever.token_counter, None, current).nearest(query, k)


def unscored(docs: list[Document]) -> list[tuple[str, dict]]:
    """The units as :func:`shown`, without their scores: where vectors come from two sources, whose last bits differ."""
    return [(d.page_content, {k: v for k, v in d.metadata.items() if k != "score"}) for d in docs]


class Deferred:
    """A ``submit`` that keeps what it is given until told to run it: a build beside the queries, held."""

    def __init__(self) -> None:
        self.waiting: list[Callable[[], None]] = []

    def __call__(self, fn: Callable[[], None]) -> None:
        self.waiting.append(fn)

    def run(self) -> None:
        waiting, self.waiting = self.waiting, []
        for fn in waiting:
            fn()


def past_the_limit(reader: Make, submit: Deferred, **kwargs: Any) -> SentenceWindowRetriever:
    """A retriever over the test meetings whose snapshot limit they are past, its builds held by ``submit``."""
    retriever = reader(lexical=True, performance=Performance(snapshot_limit=10), **kwargs)
    retriever._views = StoreViews(submit)
    return retriever


def spied(lexical: LexicalIndex) -> list[str]:
    """The queries ``lexical`` ranks itself from now on."""
    searched: list[str] = []
    original = lexical.search

    def search(query: str, k: int, within: Any = None) -> list[Any]:
        searched.append(query)
        return original(query, k, within)

    lexical.search = search  # type: ignore[method-assign]
    return searched


class CountedCopies(LexicalIndex):
    """The lexical index, counting the local copies each query reads from SQLite."""

    read: int = 0

    def sentences_of(self, wanted: Mapping[tuple[str, str], Sequence[int]]) -> dict[tuple[str, str], list[Any]]:
        type(self).read += sum(len(indices) for indices in wanted.values())
        return super().sentences_of(wanted)


class PositionsRead(LexicalIndex):
    """The lexical index, keeping every position whose local copy a query reads from SQLite."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.read: list[tuple[str, int]] = []
        self.name = ""

    def sentences_of(self, wanted: Mapping[tuple[str, str], Sequence[int]]) -> dict[tuple[str, str], list[Any]]:
        self.read += [(doc_id, i) for (doc_id, _), indices in wanted.items() for i in indices]
        return super().sentences_of(wanted)


def vector(rng: np.random.Generator) -> np.ndarray:
    """A random vector of 8 dimensions, as float32."""
    return rng.normal(size=8).astype(np.float32)


MODES: dict[str, dict[str, Any]] = {
    "in memory": {},
    "past the limit": {"performance": Performance(snapshot_limit=0)},
    "nothing in memory": {"performance": Performance(in_memory=False)},
    "no cache": {"performance": Performance(cache_size=0)},
    "nothing kept": {"performance": Performance(in_memory=False, cache_size=0)},
}
"""Every memory setting a retriever has: each changes what a query reads, never its answer."""


def spans(units: list[tuple[str, dict]]) -> list[tuple[str, list[int], list[int]]]:
    return [(m["doc_id"], m["span"], m["hits"]) for _, m in units]


def ranked_bm25(lexical: BaseLexicalIndex) -> Bm25:
    """BM25 in memory over every local copy ``lexical`` holds, as a build at a change mark makes it."""
    listed = Listed()
    for _ in listed.take(lexical.copies()):
        pass
    return listed.bm25()


def in_every_mode(root: Path, embeddings: Any, documents: list[Document]) -> dict[str, SentenceWindowRetriever]:
    """``documents`` indexed under ``root`` (Chroma searched exactly); a warmed retriever over them in each mode."""
    store = chroma_store("modes", persist_directory=root / "chroma", embeddings=embeddings, ef_search=4096)
    path = root / "lexical.sqlite"
    SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path)).add_documents(documents)
    retrievers = {
        m: SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path), **kw) for m, kw in MODES.items()
    }
    for retriever in retrievers.values():
        retriever.warm()
    return retrievers


def answered_alike(
    retrievers: Mapping[str, SentenceWindowRetriever], query: str, **call: Any
) -> list[tuple[str, dict]]:
    """The answer every mode gives to ``query`` (asserted one and the same, scores to the last bit)."""
    answers = {m: shown(r.invoke(query, **call)) for m, r in retrievers.items()}
    for mode, answer in answers.items():
        assert answer == answers["in memory"], (mode, query, call, spans(answer), spans(answers["in memory"]))
    return answers["in memory"]
