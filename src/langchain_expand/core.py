"""The query and indexing core that both retrievers stand on.

**Query plan.** A call's parameters are resolved against the instance's fields and checked
once, by the rules below (one wording per rule, naming the parameter and the fix). The query
is embedded once; :class:`VectorSearch` then asks the store by vector as often as the
over-fetch needs (:func:`overfetch`), and each retriever turns the ranked matches into its
units (windows or parents), merges and fits them to the budget.

**Indexing protocol.** :func:`index` writes a document in an order that makes every
interruption safe: whatever is stored for it now is listed first, then its new units are
written, the old ones that no new unit replaces are removed, and its *head* (the unit a
reader checks to know which version is committed) is written last. A reader never serves a
unit whose version differs from its document's head, and the next :func:`index` of a
document whose head does not match rewrites it whole. Each retriever supplies a
:class:`Layout`: where its units live and how its head reads.

**Async.** Sync and async share one implementation: :class:`AsyncByThread` runs the sync
method in an executor, forwarding every argument. The default stack (Chroma, SQLite) has no
native async I/O, so a thread is what an async call would cost anyway.
"""

from __future__ import annotations

import difflib
import itertools
import logging
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.runnables.config import run_in_executor

from langchain_expand.adapters import StoreAdapter

__all__ = [
    "MAX_QUERY_CHARS",
    "OVERFETCH_LIMIT",
    "AsyncByThread",
    "AsyncQueryByThread",
    "Indexed",
    "Layout",
    "Prepared",
    "VectorSearch",
    "check_fraction",
    "check_non_negative",
    "check_optional_positive",
    "check_positive",
    "check_query",
    "delete",
    "from_search_kwargs",
    "index",
    "overfetch",
    "probe_past",
    "reject_unknown",
]

OVERFETCH_LIMIT = 64
"""A search asks at most this many times the matches a call needs, then stops."""
MAX_QUERY_CHARS = 32_000
"""A longer query is cut to this before it is embedded or searched lexically: about 8,000
tokens, the most any common embedding model reads (MiniLM reads 256 word pieces). A 10 MB
query otherwise took 79 s and 1.9 GB in the tokenizer before the model cut it anyway."""

Scored = list[tuple[Document, float]]
T = TypeVar("T")
R = TypeVar("R", bound=Sized)
logger = logging.getLogger(__name__)


# -- parameter rules ----------------------------------------------------------------------


def reject_unknown(owner: str, given: dict[str, Any], known: Iterable[str]) -> None:
    """A typo (``befor=3``) is an error naming the closest valid argument, not a silent default."""
    valid = sorted(known)
    for name in given:
        if name not in valid:
            close = difflib.get_close_matches(name, valid, n=1)
            hint = f" Did you mean `{close[0]}`?" if close else f" Valid arguments: {', '.join(valid)}."
            msg = f"{owner} got an unknown argument `{name}`.{hint}"
            raise ValueError(msg)


def from_search_kwargs(owner: str, given: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    """LangChain's ``search_kwargs={...}`` turned into this library's own arguments.

    Each key maps to one argument (``mapping``); a key with no meaning here, or given both
    ways, is an error that says so.
    """
    if "search_kwargs" not in given:
        return given
    out = {k: v for k, v in given.items() if k != "search_kwargs"}
    for key, value in (given["search_kwargs"] or {}).items():
        if key not in mapping:
            msg = (
                f"{owner}: search_kwargs key `{key}` has no meaning here; it accepts "
                f"{', '.join(f'`{k}`' for k in mapping)} (mapped to {', '.join(sorted(set(mapping.values())))})."
            )
            raise ValueError(msg)
        name = mapping[key]
        if name in out and out[name] != value:
            msg = f"{owner}: `{name}` is given twice, as `{name}={out[name]!r}` and in search_kwargs; give it once."
            raise ValueError(msg)
        out[name] = value
    return out


def check_query(query: str) -> None:
    """An empty query matches nothing meaningfully: say so instead of returning noise.

    A very long query is accepted; the embedding model reads its beginning (MiniLM: the
    first 256 word pieces).
    """
    if not isinstance(query, str) or not query.strip():
        msg = f"The query is empty ({query!r}); pass the question text."
        raise ValueError(msg)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_positive(name: str, value: object) -> None:
    """``value`` must be an integer >= 1."""
    if not _is_int(value) or value < 1:  # type: ignore[operator]
        msg = f"`{name}` must be a positive integer, got {value!r}."
        raise ValueError(msg)


def check_optional_positive(name: str, value: object) -> None:
    """``value`` must be an integer >= 1, or None for "no limit"."""
    if value is not None and (not _is_int(value) or value < 1):  # type: ignore[operator]
        msg = f"`{name}` must be a positive integer or None (no limit), got {value!r}."
        raise ValueError(msg)


def check_non_negative(name: str, value: object) -> None:
    """``value`` must be an integer >= 0."""
    if not _is_int(value) or value < 0:  # type: ignore[operator]
        msg = f"`{name}` must be an integer >= 0, got {value!r}."
        raise ValueError(msg)


def check_fraction(name: str, value: object) -> None:
    """``value`` must be a number in [0, 1], or None."""
    if value is not None and (not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1):
        msg = f"`{name}` must be a number between 0 and 1, or None, got {value!r}."
        raise ValueError(msg)


# -- searching ----------------------------------------------------------------------------


class VectorSearch:
    """One query against a vector store: embedded once, asked by vector as often as needed.

    Stores that search by vector (Chroma, FAISS, Qdrant and most others) are asked that way;
    a store without one is asked by text, which embeds the query on every call. Relevance
    comes from :class:`~langchain_expand.adapters.StoreAdapter`: in [0, 1], the cosine
    similarity for unit-length embeddings, whatever the store's distance.
    """

    def __init__(self, store: StoreAdapter, query: str, search_kwargs: dict[str, Any] | None = None) -> None:
        """Prepare the search; nothing is embedded until the first call.

        Args:
            store: The vector store, adapted.
            query: The query text.
            search_kwargs: Passed to every search, e.g. ``{"filter": {...}}``.
        """
        self.store = store
        if len(query) > MAX_QUERY_CHARS:
            logger.warning(
                "The query is %d characters; searching with its first %d (embedding models read less).",
                len(query),
                MAX_QUERY_CHARS,
            )
        self.query = query[:MAX_QUERY_CHARS]
        self.where = dict(search_kwargs or {})
        self._vector: list[float] | None = None

    def vector(self) -> list[float] | None:
        """The query's embedding, computed once; None for a store without embeddings."""
        embeddings = self.store.embeddings
        if embeddings is None:
            return None
        if self._vector is None:
            self._vector = embeddings.embed_query(self.query)
        return self._vector

    def __call__(self, k: int) -> Scored:
        """The ``k`` best matches with their relevance (higher is better)."""
        return self.store.search(self.query, self.vector(), k, **self.where)


def overfetch(search: Callable[[int], R], first: int, need: int) -> Iterator[R]:
    """Ever larger result lists, doubling from ``first``; the caller stops when it has enough.

    Stops by itself when the store has no more matches, or at ``OVERFETCH_LIMIT x need``.
    """
    asked = first
    while True:
        scored = search(asked)
        yield scored
        if len(scored) < asked or asked >= OVERFETCH_LIMIT * need:
            return
        asked *= 2


# -- async ----------------------------------------------------------------------------------


class AsyncQueryByThread:
    """An async query that runs the sync implementation in an executor.

    Every argument is forwarded (LangChain's default ``_aget_relevant_documents`` drops
    keyword arguments), and callbacks reach the same run.
    """

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        result: list[Document] = await run_in_executor(
            None,
            self._get_relevant_documents,  # type: ignore[attr-defined]
            query,
            run_manager=run_manager.get_sync(),
            **kwargs,
        )
        return result


class AsyncByThread(AsyncQueryByThread):
    """Async query, indexing, deletion and expansion, each running its sync twin in a thread."""

    async def aadd_documents(
        self, documents: Sequence[Document], ids: Sequence[str] | None = None, **kwargs: Any
    ) -> list[str]:
        """Async :meth:`add_documents`, run in a thread."""
        done: list[str] = await run_in_executor(None, self.add_documents, documents, ids, **kwargs)  # type: ignore[attr-defined]
        return done

    async def adelete(self, ids: Sequence[str]) -> None:
        """Async :meth:`delete`, run in a thread."""
        await run_in_executor(None, self.delete, ids)  # type: ignore[attr-defined]

    async def aexpand_hits(self, hits: Sequence[Document], **kwargs: Any) -> list[Document]:
        """Async :meth:`expand_hits`, run in a thread, with every argument forwarded."""
        out: list[Document] = await run_in_executor(None, self.expand_hits, hits, **kwargs)  # type: ignore[attr-defined]
        return out


# -- indexing -------------------------------------------------------------------------------


@dataclass
class Prepared:
    """One document, validated and split, ready to write; nothing of it is stored yet.

    A layout may keep its records lazily (offsets, not texts and metadata) and build them
    batch by batch as it writes, so a very large document is never held as records whole.
    """

    doc_id: str
    version: Hashable
    """What the head of a committed copy of this document would read as."""
    vector_ids: Collection[str] = field(default_factory=set)
    """Every vector-store id the new version writes (any collection that answers ``in``)."""
    docstore_keys: Collection[str] = field(default_factory=set)
    """Every docstore key the new version writes."""
    payload: Any = None
    """The layout's own records."""


@dataclass
class Stored:
    """What is stored for one document now: vector-store ids and docstore keys."""

    vector_ids: Collection[str] = field(default_factory=list)
    docstore_keys: Collection[str] = field(default_factory=list)


class Layout(Protocol):
    """Where a retriever keeps a document's units, and which of them is the head."""

    def heads(self, doc_ids: list[str]) -> dict[str, Hashable]:
        """The committed version of each stored document (absent: none committed)."""
        ...

    def stored(self, doc_ids: list[str], heads: dict[str, Hashable]) -> dict[str, Stored]:
        """Every id and key stored for each of ``doc_ids``, committed or left by an interrupted run."""
        ...

    def unsettled(self, doc_ids: list[str], heads: dict[str, Hashable]) -> set[str]:
        """Of documents whose head reads as current, those whose other units do not all match it.

        That is an update interrupted after its body was written, or two writers of one id.
        """
        ...

    def write_body(self, todo: list[Prepared]) -> None:
        """Write everything of ``todo`` except each document's head."""
        ...

    def write_heads(self, todo: list[Prepared]) -> None:
        """Write each document's head: this commits it."""
        ...

    def remove(self, stale: Iterable[Stored]) -> None:
        """Delete these ids and keys."""
        ...


K = TypeVar("K")
V = TypeVar("V")


def probe_past(
    ends: dict[K, int], lookup: Callable[[list[tuple[K, int]]], dict[tuple[K, int], V]], step: int
) -> dict[tuple[K, int], V]:
    """What is stored past each owner's end: units an interrupted run left behind.

    ``lookup`` fetches ``(owner, index)`` positions and returns those that exist. Positions
    are asked ``step`` at a time past each end, for all owners in one call, as long as an
    owner's last step found something.
    """
    found: dict[tuple[K, int], V] = {}
    frontier = dict(ends)
    while frontier:
        asked = [(owner, i) for owner, at in frontier.items() for i in range(at, at + step)]
        hits = lookup(asked)
        found.update(hits)
        again = {owner for owner, _ in hits}
        frontier = {owner: at + step for owner, at in frontier.items() if owner in again}
    return found


@dataclass(frozen=True)
class Indexed:
    """What one indexing call did, document by document."""

    ids: list[str]
    """Every document id given, in input order."""
    written: list[str]
    """Those embedded and written: new, changed, or repaired after an interrupted run."""

    @property
    def unchanged(self) -> list[str]:
        """Those already stored as given: nothing embedded, nothing written."""
        done = set(self.written)
        return [i for i in self.ids if i not in done]


def index(layout: Layout, prepared: list[Prepared]) -> Indexed:
    """Store ``prepared`` so that an interruption at any point is repaired by a re-run.

    Documents whose head already reads as their version, and whose other units all match it,
    are skipped (nothing re-embedded). One whose units do not (an update interrupted after
    its body was written, then the committed version added again; or two writers of one id)
    is written again whole.
    """
    heads = layout.heads([p.doc_id for p in prepared])
    current = [p.doc_id for p in prepared if heads.get(p.doc_id) == p.version]
    unsettled = layout.unsettled(current, heads) if current else set()
    todo = [p for p in prepared if heads.get(p.doc_id) != p.version or p.doc_id in unsettled]
    done = Indexed([p.doc_id for p in prepared], [p.doc_id for p in todo])
    if not todo:
        return done
    old = layout.stored([p.doc_id for p in todo], heads)
    layout.write_body(todo)
    layout.remove(_outdated(old.get(p.doc_id), p) for p in todo)
    layout.write_heads(todo)
    return done


def _outdated(old: Stored | None, new: Prepared) -> Stored:
    """What is stored for a document that its new version does not write again."""
    if old is None:
        return Stored()
    return Stored(
        [i for i in old.vector_ids if i not in new.vector_ids],
        [key for key in old.docstore_keys if key not in new.docstore_keys],
    )


def delete(layout: Layout, doc_ids: Sequence[str]) -> None:
    """Remove everything stored for ``doc_ids``; unknown ids are ignored."""
    ids = list(doc_ids)
    layout.remove(layout.stored(ids, layout.heads(ids)).values())


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of at most ``size``, taken one list at a time (a generator stays lazy)."""
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk
