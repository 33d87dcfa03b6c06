"""One query against a vector store: embedded once, asked by vector as often as the over-fetch needs.

Each retriever turns the ranked matches into its units (windows or parents), then merges and
fits them to the budget; :func:`overfetch` asks for ever more matches until it has enough.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence, Sized
from typing import Any, TypeVar

import numpy as np
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from langchain_expand.store.adapters import Scored, StoreAdapter
from langchain_expand.store.adapters.base import Matches, matched

__all__ = [
    "DENSE_WEIGHT",
    "MAX_QUERY_CHARS",
    "OVERFETCH_LIMIT",
    "Diversified",
    "Scored",
    "VectorSearch",
    "fuse_scores",
    "overfetch",
]

OVERFETCH_LIMIT = 64
"""A search asks at most this many times the matches a call needs, then stops."""
MAX_QUERY_CHARS = 32_000
"""A longer query is cut to this before it is embedded or searched lexically: about 8,000
tokens, the most any common embedding model reads (MiniLM reads 256 word pieces). A 10 MB
query otherwise took 79 s and 1.9 GB in the tokenizer before the model cut it anyway."""

R = TypeVar("R", bound=Sized)
logger = logging.getLogger(__name__)


class VectorSearch:
    """One query against a vector store: embedded once, asked by vector as often as needed.

    Stores that search by vector (Chroma, FAISS, Qdrant and most others) are asked that way;
    a store without one is asked by text, which embeds the query on every call. Relevance
    comes from :class:`~langchain_expand.store.adapters.StoreAdapter`: in [0, 1], the cosine
    similarity for unit-length embeddings, whatever the store's distance.
    """

    def __init__(
        self, store: StoreAdapter, query: str, search_kwargs: dict[str, Any] | None = None, *, ahead: int = 0
    ) -> None:
        """Prepare the search; nothing is embedded until the first call.

        Args:
            store: The vector store, adapted.
            query: The query text.
            search_kwargs: Passed to every search, e.g. ``{"filter": {...}}``; a filter is
                written on the served units' metadata (``doc_id`` too), and translated to the
                records' by the store's adapter.
            ahead: The most matches the first call asks for, whatever it needs; a later call
                that needs no more is served the first of them. Only as far as the store's
                first ``k`` are its search for ``k`` (:attr:`StoreAdapter.nested_up_to`): the
                same matches, one search.
        """
        self.store = store
        self.ahead = min(ahead, store.nested_up_to)
        self.reached = 0
        """The most matches a call needed: how far the next query's search may read ahead."""
        self._held: tuple[int, Scored] | None = None  # what a search read ahead: the matches asked, and found
        if len(query) > MAX_QUERY_CHARS:
            logger.warning(
                "The query is %d characters; searching with its first %d (embedding models read less).",
                len(query),
                MAX_QUERY_CHARS,
            )
        self.query = query[:MAX_QUERY_CHARS]
        self.where = dict(search_kwargs or {})
        if self.where.get("filter") is not None:
            self.where["filter"] = store.unit_filter(self.where["filter"])
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
        """The ``k`` best matches with their relevance (higher is better): the first read ahead, else searched."""
        self.reached = max(self.reached, k)
        if self._held is not None and k <= self._held[0]:
            return _first(self._held[1], k)
        asked = max(k, self.ahead)
        found = self.store.search(self.query, self.vector(), asked, **self.where)
        if asked == k:
            return found
        if len(found) < matched(found):  # records gone from the store: the first k are not its search for k
            return self.store.search(self.query, self.vector(), k, **self.where)
        self._held = (asked, found)
        return _first(found, k)

    def read_ahead(self) -> Scored:
        """The matches read ahead, which calls for no more are served the first of (none before a call asked)."""
        return [] if self._held is None else self._held[1]

    def ids(self, k: int) -> list[tuple[str, float]] | None:
        """The ids of the ``k`` nearest records with their relevance, no record read; None where the store cannot."""
        vector = self.vector()
        return None if vector is None else self.store.search_ids(vector, k, **self.where)


def _first(found: Scored, k: int) -> Scored:
    """The first ``k`` of a search's matches, as the search for ``k`` reports them."""
    return Matches(found[:k], matched=min(k, matched(found)))


class Diversified:
    """A search's ``n`` best reordered by MMR, so each next one is relevant and unlike those before it.

    LangChain's ``maximal_marginal_relevance`` on the stored vectors of the best
    ``max(n, fetch_k)``; each match keeps its relevance score.
    """

    def __init__(self, dense: VectorSearch, fetch_k: int, lambda_mult: float) -> None:
        self.dense, self.fetch_k, self.lambda_mult = dense, fetch_k, lambda_mult

    def __call__(self, n: int) -> Scored:
        """The ``n`` matches MMR picks, in its order."""
        pool = self.dense(max(n, self.fetch_k))
        store = self.dense.store
        vectors = dict((d.id, v) for d, v in store.with_vectors([d.id for d, _ in pool if d.id is not None]))
        pool = [(d, s) for d, s in pool if d.id in vectors]
        vector = self.dense.vector()
        if not pool or vector is None:
            return pool[:n]
        order = maximal_marginal_relevance(
            np.asarray(vector),
            [[float(x) for x in vectors[d.id]] for d, _ in pool],
            lambda_mult=self.lambda_mult,
            k=min(n, len(pool)),
        )
        return [pool[i] for i in order]


def overfetch(search: Callable[[int], R], first: int, need: int) -> Iterator[R]:
    """Ever larger result lists, doubling from ``first``; the caller stops when it has enough.

    Stops by itself when the store has no more matches (counting those a result dropped:
    :class:`~langchain_expand.store.adapters.base.Matches`), or at ``OVERFETCH_LIMIT x need``.
    """
    asked = first
    while True:
        scored = search(asked)
        yield scored
        if matched(scored) < asked or asked >= OVERFETCH_LIMIT * need:
            return
        asked *= 2


DENSE_WEIGHT = 0.6
"""The dense score's weight in :func:`fuse_scores`, BM25's the rest (``benchmarks/README.md``)."""


def fuse_scores(dense: Sequence[float], lexical: Sequence[float], weight: float = DENSE_WEIGHT) -> list[int]:
    """Candidates' order by ``weight * dense + (1 - weight) * lexical``, each min-max normalised over them.

    Every candidate (either ranking's) is scored by both: where it lies in each score's range
    decides, so a unit far ahead in one ranking and fair in the other leads, where reciprocal rank
    fusion sees only ranks. Ties keep the candidates' order. Both retrievers fuse so.
    """

    def normalised(scores: Sequence[float]) -> list[float]:
        low, high = min(scores, default=0.0), max(scores, default=0.0)
        return [(s - low) / (high - low) if high > low else 0.0 for s in scores]

    blended = [weight * d + (1.0 - weight) * w for d, w in zip(normalised(dense), normalised(lexical), strict=True)]
    return sorted(range(len(blended)), key=lambda j: -blended[j])
