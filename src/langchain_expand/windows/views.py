"""What queries keep of the store between calls, each valid at one change mark of the store.

Up to ``snapshot_limit`` sentences, the snapshot: every sentence and vector in memory, searched
exactly and rebuilt (from the previous one) when the store's mark moves
(:mod:`langchain_expand.windows.snapshot`). Past it, a SQLite lexical index's BM25 ranked in memory
(:class:`~langchain_expand.windows.bm25.LexicalRanking`), what growth weighs of each sentence
(:class:`~langchain_expand.windows.columns.Columns`, built with it) and the document heads read at
the mark (:class:`~langchain_expand.windows.cache.HeadsAtMark`), read ahead once the ranking is
built. A retriever given another store or lexical index starts a new :class:`StoreViews`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, NamedTuple, ParamSpec, TypeVar

from langchain_expand.store.adapters import StoreAdapter
from langchain_expand.store.lexical import BaseLexicalIndex, LexicalHit
from langchain_expand.store.search import VectorSearch
from langchain_expand.windows import snapshot
from langchain_expand.windows.bm25 import Bm25, LexicalRanking, SearchedAhead
from langchain_expand.windows.cache import HeadsAtMark
from langchain_expand.windows.columns import Columns
from langchain_expand.windows.snapshot import Snapshot

__all__ = ["Beside", "Current", "StoreViews"]

P = ParamSpec("P")
T = TypeVar("T")


class Current(NamedTuple):
    """What a query finds kept at the store's current mark."""

    snapshot: Snapshot | None
    """None past the limit."""
    bm25: SearchedAhead | None
    """BM25 searched ahead, where it is current."""
    heads: HeadsAtMark | None
    """The heads read at the mark, past the limit."""
    figures: Columns | None = None
    """Growth's figures past the limit, the last built (each served at its document's revision alone)."""


def _after(first: Future[Any], fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` once ``first`` is done (whatever its outcome).

    BM25 waits for the mark's read: numpy hands the interpreter's lock back and forth between
    its steps, and the read, which needs it in bits, waited for most of BM25's 4 ms at a million
    sentences. Tasks start in the order given, so ``first``, submitted before, is running.
    """
    wait([first])
    return fn(*args, **kwargs)


class Beside:
    """Runs work beside a query's thread: the lexical search, the store's change mark, a BM25 build.

    A thread pool of its own, made at the first task, and made again in a forked child (a
    server's worker), which has none of its parent's threads: a pool inherited from the
    parent would never run a task. Each retriever's views hold one.
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
        """Runs the store's mark read, BM25 searched ahead and the lexical search beside the query."""
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
        lexical: BaseLexicalIndex,
        dense: VectorSearch,
        k: int,
        limit: int | None,
        cache_size: int,
        *,
        ids_ahead: bool = False,
        searches_ahead: bool = True,
    ) -> Current | None:
        """The views at the store's current mark (the snapshot built when the mark has moved), and BM25's ``k`` best.

        While the query is embedded, the mark is read and the last snapshot's BM25 (past the limit,
        the last ranking) ranks the query's ``k`` best (free on two cores: the embedding holds the
        interpreter's lock little); the ranking is used where it is still current. Past ``limit``
        sentences (or with ``limit`` 0): None for the snapshot, BM25 in memory where it is current
        for the mark (else None: the lexical index ranks), growth's figures (the last built) and the
        heads read at the mark. With ``limit`` None (nothing held in memory) the heads read at the
        mark alone, kept as the sentence cache is (``cache_size``): a query over many documents
        read every head again (2.4 ms on TAT-QA's 60). None where the store keeps no mark, or
        where nothing would be kept.

        With ``ids_ahead`` (a query that will ask the store for its ``k`` nearest ids), that
        search starts beside too (:meth:`VectorSearch.ids_beside`) where no snapshot will answer
        and BM25 still ranks once the query is embedded: at a million sentences and a near-free
        embedding, 4 ms each, beside each other rather than one after the other. Where BM25 was
        done meanwhile (a real model, a smaller store) the hand-over cost 0.3-0.7 ms and saved
        nothing: the query searches itself. Both start once the mark is read: BM25 and the
        store's search each take the interpreter's lock in bits, and the read, started with
        them, waited for most of BM25 (:func:`_after`). Neither starts without ``searches_ahead``
        (a filtered query: :mod:`langchain_expand.windows.scope` narrows BM25 to its documents).
        """
        in_memory = limit is not None
        if not vectors.keeps_marks or not (in_memory or cache_size):
            return None
        last = self._snapshot[1] if self._snapshot is not None and limit else None
        earlier = self._ranking.latest(lexical) if last is None and in_memory else None  # past the limit
        reading = self.beside(vectors.marked)
        bm25 = last.bm25 if last is not None else earlier
        ahead = None
        if bm25 is not None and searches_ahead:
            ahead = self.beside(_after, reading, bm25.search, dense.query, k)
        vector = dense.vector()
        past = not limit or (self._snapshot is not None and self._snapshot[1] is None)
        if ids_ahead and past and ahead is not None and not ahead.done():
            dense.ids_beside(k, lambda fn, *args, **kwargs: self.beside(_after, reading, fn, *args, **kwargs))
        mark = reading.result()
        if mark is None or vector is None:
            return None
        if limit is None:
            return Current(None, None, self._heads_at(mark, cache_size))
        current = self._snapshot_at(vectors, lexical, mark, limit) if limit else None
        if current is None:
            return self._past_limit(vectors, lexical, dense, k, mark, cache_size, (earlier, ahead))
        return Current(current, SearchedAhead(current.bm25, dense.query, k, ahead if current is last else None), None)

    def _snapshot_at(self, vectors: StoreAdapter, lexical: BaseLexicalIndex, mark: str, limit: int) -> Snapshot | None:
        """The snapshot at ``mark``, built on the last where the mark has moved; None past ``limit``."""
        with self._lock:
            if self._snapshot is None or self._snapshot[0] != mark:
                previous = None if self._snapshot is None else self._snapshot[1]
                self._snapshot = (mark, snapshot.build(vectors, lexical, mark, limit, previous))
            return self._snapshot[1]

    def _past_limit(
        self,
        vectors: StoreAdapter,
        lexical: BaseLexicalIndex,
        dense: VectorSearch,
        k: int,
        mark: str,
        cache_size: int,
        ahead: tuple[Bm25 | None, Future[list[LexicalHit]] | None],
    ) -> Current:
        """Past the snapshot's limit: BM25 in memory where current at ``mark``, growth's figures, the heads at ``mark``.

        ``ahead`` is the ranking the query searched beside its embedding, and that search: used
        where that ranking is the current one.
        """
        ranking = self._ranking.current(mark, lexical)
        heads = self._heads_at(mark, cache_size)
        figures = self._ranking.figures(lexical)
        if ranking is not None and figures is not None and heads.claim_fill():  # built at this mark
            # every head read ahead, once; the documents from the figures in memory (the index's own
            # list would hold its lock, which the queries' reads wait on, for 80-100 ms at 1M)
            held = figures
            self._ranking.submit(lambda: heads.fill(vectors, held.documents(), vectors.marked))
        if ranking is None:
            return Current(None, None, heads, figures)
        searched = SearchedAhead(ranking, dense.query, k, ahead[1] if ranking is ahead[0] else None)
        return Current(None, searched, heads, figures)

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
