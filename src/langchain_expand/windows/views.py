"""What queries hold in memory between calls, built at each change mark of the store.

Once a writer has finished, the store's change mark moves (:meth:`StoreAdapter.marked`). The first
query at a new mark starts one build beside the queries (:func:`build`): the lexical index's
local copies as columns (vectors, token counts, cues; their texts up to ``snapshot_limit``),
BM25 over them, and every document's head. Until it is done, queries search the store and the
lexical index, and read what the last build holds only at each document's revision: no query
waits for a build, and none is answered from text older than its mark. Built whole (every head's
document held at its revision, with texts), the columns are the **snapshot**: searched exactly,
and read without a store call.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple, ParamSpec, TypeVar

from langchain_expand.store.adapters import StoreAdapter
from langchain_expand.store.lexical import BaseLexicalIndex
from langchain_expand.units import STORED_COUNT, STORED_DOC, STORED_INDEX, STORED_REV
from langchain_expand.windows.bm25 import Bm25, Bm25Search, Listed
from langchain_expand.windows.cache import HeadsAtMark, SentenceCache
from langchain_expand.windows.columns import Columns

__all__ = ["Beside", "Build", "Current", "StoreViews", "build", "shared"]

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


class Current(NamedTuple):
    """What a query finds held at the store's current mark (narrowed to a filter's documents, where it has one)."""

    columns: Columns | None
    """The local copies in arrays, the last built (at this mark, or each document served at its head's revision)."""
    heads: HeadsAtMark | None
    """The heads read at the mark: every one, where built at it."""
    bm25: Bm25Search | None = None
    """BM25 in memory, where it is current."""
    whole: bool = False
    """``columns`` hold every document committed at the mark, at its head's revision: the snapshot."""
    documents: frozenset[str] | None = None
    """A filter's documents: the only ones searched."""


class Beside:
    """Runs work beside a query's thread: the lexical index's search, a build.

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


class Build(NamedTuple):
    """What one build holds in memory, read at one change mark of the store."""

    mark: str
    limit: int
    lexical: weakref.ref[BaseLexicalIndex]
    """The index it was built from (held weakly: the views shared over it die with it, :func:`shared`)."""
    columns: Columns | None
    """Every local copy: texts too where they number at most ``limit``."""
    bm25: Bm25 | None
    heads: HeadsAtMark | None
    """Every head at the mark, where all fit (with texts, or within the heads' room); else None."""
    whole: bool
    """The columns hold every committed document at its head's revision, with texts: the snapshot."""

    def at(self, mark: str, limit: int | None) -> bool:
        """Built at ``mark`` for ``limit``: what a query at that mark holds."""
        return (self.mark, self.limit) == (mark, limit)


def build(store: StoreAdapter, lexical: BaseLexicalIndex, mark: str, limit: int, room: int) -> Build:
    """What queries hold at ``mark``: ``lexical``'s copies as columns, BM25 over them, the heads.

    The columns hold each committed document at its listed head's revision (a head's copy,
    written before its record, takes the vector the store lists for it); BM25 ranks every copy,
    as the lexical index does. The caller reads ``mark`` before this, so a writer finishing
    meanwhile makes what is read newer than the mark: the heads are kept only if the mark has
    not moved, and a document's copies serve a query only at the revision of the head it reads.
    Heads are kept up to ``room``, or all where texts are held. An error is logged: the store
    and the lexical index answer, as before a build.
    """
    try:
        texts = lexical.count() <= limit
        listed = store.where({STORED_INDEX: 0}) or []  # every head: a writer's without the lexical index too
        heads = {str(d.metadata[STORED_DOC]): (d, v) for d, v in listed if v is not None and STORED_DOC in d.metadata}
        vectors = {(d, str(doc.metadata.get(STORED_REV))): v for d, (doc, v) in heads.items()}
        taken = Listed()
        columns = Columns(taken.take(lexical.copies()), texts=texts, heads=vectors)
        kept = len(heads) == len(listed) and (texts or len(heads) <= room) and store.marked() == mark
        every = HeadsAtMark.every(mark, heads.values()) if kept else None
        whole = (
            every is not None
            and texts
            and store.space is not None
            and all(
                columns.whole(d, str(doc.metadata.get(STORED_REV)), int(doc.metadata[STORED_COUNT]))
                for d, (doc, _) in heads.items()
            )
        )
        return Build(mark, limit, weakref.ref(lexical), columns, taken.bm25(), every, whole)
    except Exception:
        logger.warning("Nothing could be built in memory from %r; it and the store answer", lexical, exc_info=True)
        return Build(mark, limit, weakref.ref(lexical), None, None, None, whole=False)


class StoreViews:
    """What queries hold in memory (:class:`Build`), and the heads read at the store's change mark."""

    def __init__(self, submit: Callable[[Callable[[], None]], object] | None = None) -> None:
        """Nothing built yet; builds run through ``submit`` (beside the queries by default)."""
        self._lock = threading.Lock()
        self.beside = Beside()
        """Runs the lexical index's search beside the query's dense search, and the builds."""
        self._submit = submit or self.beside
        self._built: Build | None = None
        self._building: int | None = None  # the process a build runs in (a fork's parent's ends there)
        self._heads: HeadsAtMark | None = None

    @property
    def built(self) -> Build | None:
        """The last build; None before the first."""
        return self._built

    def current(
        self,
        vectors: StoreAdapter,
        lexical: BaseLexicalIndex | None,
        limit: int | None,
        room: int,
    ) -> Current | None:
        """What a query holds at the store's current mark, read before its searches.

        Built at the mark: the columns (whole, the snapshot), BM25 and the heads. Else (a build
        starts): the last build's columns, each document served at its head's revision, and the
        heads read at the mark, up to ``room``. With ``limit`` None (nothing held in memory), or
        without ``lexical``, those heads alone. None where the store keeps no mark or has no
        embeddings, or where nothing would be kept.
        """
        in_memory = limit is not None and lexical is not None
        if not vectors.keeps_marks or vectors.embeddings is None or not (in_memory or room):
            return None
        mark = vectors.marked()  # in this thread: on a thread beside the embedding it waited for a core
        if mark is None:
            return None
        built = self._at(vectors, lexical, mark, limit, room) if limit is not None and lexical is not None else None
        if built is None or not built.at(mark, limit):
            return Current(None if built is None else built.columns, self._heads_at(mark, room))
        heads = built.heads if built.heads is not None else self._heads_at(mark, room)
        return Current(built.columns, heads, None if built.bm25 is None else Bm25Search(built.bm25), built.whole)

    def _at(self, vectors: StoreAdapter, lexical: BaseLexicalIndex, mark: str, limit: int, room: int) -> Build | None:
        """The last build of ``lexical`` (at ``mark``, if done); a build starts where it is not at ``mark``."""
        with self._lock:
            built = self._last(lexical)
            if built is not None and built.at(mark, limit):
                return built
            start = self._building != os.getpid()
            if start:
                self._building = os.getpid()
        if start:  # outside the lock, which the build takes when it is done; this query goes on without it
            self._submit(lambda: self._build(vectors, lexical, mark, limit, room))
        return built

    def _last(self, lexical: BaseLexicalIndex) -> Build | None:
        """The last build of ``lexical``, at whatever mark."""
        built = self._built
        return built if built is not None and built.lexical() is lexical else None

    def _build(self, vectors: StoreAdapter, lexical: BaseLexicalIndex, mark: str, limit: int, room: int) -> None:
        built = build(vectors, lexical, mark, limit, room)
        with self._lock:
            self._built = built
            self._building = None

    def warm(self, vectors: StoreAdapter, lexical: BaseLexicalIndex, limit: int, room: int) -> None:
        """Build at the store's current mark now, in this thread, unless it is built already."""
        mark = vectors.marked() if vectors.keeps_marks else None
        built = self._last(lexical)
        if mark is not None and (built is None or not built.at(mark, limit)):
            self._build(vectors, lexical, mark, limit, room)

    def forget_heads(self) -> None:
        """Drop the heads read at the last mark; the next query reads them from the store again."""
        with self._lock:
            self._heads = None

    def _heads_at(self, mark: str, room: int) -> HeadsAtMark:
        """The heads read at ``mark``, at most ``room``: an empty holder once the mark has moved."""
        with self._lock:
            if self._heads is None or self._heads.mark != mark:
                self._heads = HeadsAtMark(mark, room)
            return self._heads


class _Held:
    """What queries over one vector store keep in this process: a sentence cache, views by lexical index and limit."""

    def __init__(self) -> None:
        self.cache = SentenceCache()
        self.alone: dict[int | None, StoreViews] = {}
        """Without a lexical index: the heads read at a mark."""
        self.indexed: weakref.WeakKeyDictionary[BaseLexicalIndex, dict[int | None, StoreViews]]
        self.indexed = weakref.WeakKeyDictionary()


_HELD: weakref.WeakKeyDictionary[object, _Held] = weakref.WeakKeyDictionary()
_HELD_LOCK = threading.Lock()


def shared(
    vectorstore: object, lexical: BaseLexicalIndex | None, limit: int | None
) -> tuple[SentenceCache, StoreViews]:
    """The sentence cache and the views every retriever over ``vectorstore`` and ``lexical`` shares in this process.

    What queries keep belongs to the stores, not to one retriever: LangChain's
    ``configurable_fields`` builds the retriever again for every call, and each would otherwise
    start a build of its own and answer from the store while it ran; two retrievers over one
    index would hold it twice. Views are one a snapshot ``limit``, so retrievers of other limits
    do not rebuild each other's. Both objects are held weakly: what is kept dies with either.
    Objects that cannot be weakly referenced get their own.
    """
    with _HELD_LOCK:
        try:
            held = _HELD.setdefault(vectorstore, _Held())
            views = held.alone if lexical is None else held.indexed.setdefault(lexical, {})
        except TypeError:
            return SentenceCache(), StoreViews()
        return held.cache, views.setdefault(limit, StoreViews())
