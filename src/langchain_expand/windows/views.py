"""What queries keep of the store between calls, each valid at one change mark of the store.

Up to ``snapshot_limit`` sentences, the snapshot (:mod:`langchain_expand.windows.snapshot`),
rebuilt from the previous one when the store's mark moves. Past it, BM25 in memory
(:class:`~langchain_expand.windows.bm25.LexicalRanking`), growth's figures built with it and the
heads read at the mark (:class:`~langchain_expand.windows.cache.HeadsAtMark`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple, ParamSpec, TypeVar

from langchain_expand.store.adapters import StoreAdapter
from langchain_expand.store.lexical import BaseLexicalIndex
from langchain_expand.store.search import VectorSearch
from langchain_expand.windows import snapshot
from langchain_expand.windows.bm25 import Bm25Search, LexicalRanking
from langchain_expand.windows.cache import HeadsAtMark
from langchain_expand.windows.columns import Columns
from langchain_expand.windows.snapshot import Snapshot

__all__ = ["Beside", "Current", "StoreViews"]

P = ParamSpec("P")
T = TypeVar("T")


class Current(NamedTuple):
    """What a query finds held at the store's current mark (narrowed to a filter's documents, where it has one)."""

    columns: Columns | None
    """Sentences in arrays: the snapshot's (with their texts), else growth's figures, the last built (without)."""
    heads: HeadsAtMark | None
    """The heads read at the mark: the snapshot's are every one."""
    bm25: Bm25Search | None = None
    """BM25 in memory, where it is current."""
    whole: bool = False
    """``columns`` hold every document committed at the mark, at its head's revision: the snapshot."""
    documents: frozenset[str] | None = None
    """A filter's documents: the only ones searched."""


class Beside:
    """Runs work beside a query's thread: the lexical search, the store's change mark, a BM25 build.

    A thread pool made at the first task, and again in a forked child (a server's worker),
    where a pool inherited from the parent would never run a task.
    """

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0

    def __call__(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        """``fn(*args, **kwargs)`` on the pool; its future."""
        pool = self._pool
        if pool is None or self._pid != os.getpid():  # two first tasks may race: one pool is dropped, unused
            pool = ThreadPoolExecutor(thread_name_prefix="langchain-expand")
            self._pool, self._pid = pool, os.getpid()
        return pool.submit(fn, *args, **kwargs)


class StoreViews:
    """The snapshot, BM25 in memory and the heads read, each kept for the store's change mark it was read at."""

    def __init__(self, ranking: LexicalRanking | None = None) -> None:
        """Empty views; ``ranking`` builds BM25 past the limit (beside the queries by default)."""
        self._snapshot: tuple[str, Snapshot | None] | None = None
        self._lock = threading.Lock()
        self.beside = Beside()
        """Runs the store's mark read and the lexical index's search beside the query, and BM25's builds."""
        self._ranking = ranking or LexicalRanking(self.beside)
        self._heads: HeadsAtMark | None = None

    @property
    def ranking(self) -> LexicalRanking:
        """BM25 in memory past the snapshot limit."""
        return self._ranking

    @property
    def snapshot(self) -> tuple[str, Snapshot | None] | None:
        """The last snapshot and the mark it was built at; None before the first query, no snapshot past the limit."""
        return self._snapshot

    def current(
        self,
        vectors: StoreAdapter,
        lexical: BaseLexicalIndex | None,
        dense: VectorSearch,
        limit: int | None,
        cache_size: int,
    ) -> Current | None:
        """The views at the store's current mark (the snapshot built when the mark has moved).

        The mark is read beside the query's embedding. Past ``limit`` sentences (or with ``limit``
        0): no snapshot, BM25 in memory where it is current for the mark (else the lexical index
        ranks), growth's figures (the last built) and the heads read at the mark. With ``limit``
        None (nothing held in memory), or without ``lexical``, the heads read at the mark alone, up
        to ``cache_size``. None where the store keeps no mark, or where nothing would be kept.
        """
        in_memory = limit is not None and lexical is not None
        if not vectors.keeps_marks or not (in_memory or cache_size):
            return None
        reading = self.beside(vectors.marked)
        vector = dense.vector()
        mark = reading.result()
        if mark is None or vector is None:
            return None
        if limit is None or lexical is None:  # nothing held in memory but the heads
            return Current(None, self._heads_at(mark, cache_size))
        held = self._snapshot_at(vectors, lexical, mark, limit) if limit else None
        if held is None:
            return self._past_limit(vectors, lexical, mark, cache_size)
        return Current(held.columns, held.heads, Bm25Search(held.bm25), whole=True)

    def _snapshot_at(self, vectors: StoreAdapter, lexical: BaseLexicalIndex, mark: str, limit: int) -> Snapshot | None:
        """The snapshot at ``mark``, built on the last where the mark has moved; None past ``limit``."""
        with self._lock:
            if self._snapshot is None or self._snapshot[0] != mark:
                previous = None if self._snapshot is None else self._snapshot[1]
                self._snapshot = (mark, snapshot.build(vectors, lexical, mark, limit, previous))
            return self._snapshot[1]

    def _past_limit(self, vectors: StoreAdapter, lexical: BaseLexicalIndex, mark: str, cache_size: int) -> Current:
        """Past the snapshot's limit: BM25 in memory where current at ``mark``, growth's figures, the heads at it."""
        ranking = self._ranking.current(mark, lexical)
        heads = self._heads_at(mark, cache_size)
        figures = self._ranking.figures(lexical)
        if ranking is not None and heads.claim_fill():  # built at this mark: every head read ahead, once
            self._ranking.submit(lambda: heads.fill(vectors, vectors.marked))
        return Current(figures, heads, None if ranking is None else Bm25Search(ranking))

    def forget_heads(self) -> None:
        """Drop the heads read at the last mark; the next query reads them from the store again."""
        with self._lock:
            self._heads = None

    def _heads_at(self, mark: str, size: int) -> HeadsAtMark:
        """The heads read at ``mark``, at most ``size``: an empty holder once the mark has moved."""
        with self._lock:
            if self._heads is None or self._heads.mark != mark:
                self._heads = HeadsAtMark(mark, size)
            return self._heads
