"""Children ranked by the store's search and BM25 together, for parents.

A question that names what a section is about ("the three ownership rules", a part number, an
error code) is matched word for word by BM25 where the dense ranking may put paraphrases
first. :class:`HybridChildren` fuses the two rankings of the children by both scores
(:func:`~langchain_expand.store.search.fuse_scores`, as the window retriever fuses its
sentences'), and parents then come in the fused order of their best child. A child only BM25
found keeps the relevance of its stored vector to the query, so a relevance floor treats it as
it treats a dense hit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document

from langchain_expand.store.adapters import StoreAdapter
from langchain_expand.store.adapters.base import Matches, matched, relevance
from langchain_expand.store.lexical import BaseLexicalIndex, LexicalHit, Within
from langchain_expand.store.records import unit_id
from langchain_expand.store.search import Diversified, VectorSearch, fuse_scores
from langchain_expand.store.similarity import cosines
from langchain_expand.units import STORED_INDEX, STORED_REV

__all__ = ["LEXICAL_AHEAD", "HybridChildren", "children_ranking", "within_filter"]

LEXICAL_AHEAD = 64
"""BM25's best children matched at once for a query: a budget asks for ever more (4, 8, 16, ...)
children, and one FTS5 match scores every child holding a query word whatever the number kept."""


@dataclass
class HybridChildren:
    """The children's dense ranking fused with BM25's: a search ``k -> [(child, relevance)]``, best first.

    Each call asks both rankings for ``k`` and returns the fused list of up to ``2k`` children.
    Lexical rows are keyed by parent and child position, as children's ids are. A query's calls
    (``k`` doubling until the budget is held) match the query once for BM25's best
    ``LEXICAL_AHEAD`` (its best ``k`` are the first ``k`` of them: ties go in the order written),
    and read each child BM25 alone found, and score each dense candidate by BM25, once: in the
    first call as far as the dense search read ahead (:meth:`_read_ahead`).
    """

    dense: VectorSearch
    lexical: BaseLexicalIndex | Within
    vectors: StoreAdapter
    id_key: str
    """The metadata key that names a child's parent."""
    _read: dict[str, tuple[Document, float] | None] = field(default_factory=dict, init=False, repr=False)
    """Each child BM25 alone found, read with its relevance (None: no longer stored)."""
    _bm25: dict[tuple[str, int, str], float] = field(default_factory=dict, init=False, repr=False)
    """Each dense candidate's BM25 score, by parent, position and revision."""
    _best: list[LexicalHit] = field(default_factory=list, init=False, repr=False)
    """BM25's best children, as many as :attr:`_asked` where that many match."""
    _asked: int = field(default=0, init=False, repr=False)
    """How many of BM25's best were asked for; fewer came back where fewer children match (then all of them)."""

    def __call__(self, k: int) -> list[tuple[Document, float]]:
        """Both rankings' best ``k``, fused: up to ``2k`` children, best first."""
        scored = self.dense(k)
        if not self._asked:  # the query's first call
            self._read_ahead(scored)
        found = self._lexical(k)
        by_key = {self._key(d): (d, s) for d, s in scored}
        extra = [unit_id(h.doc_id, h.index) for h in found if (h.doc_id, h.index) not in by_key]
        by_key.update((self._key(child), (child, score)) for child, score in self._scored(extra))
        candidates = list(by_key)  # the dense ranking's, then BM25's own
        bm25 = {(h.doc_id, h.index): h.score for h in found}
        unscored = [(*key, str(by_key[key][0].metadata.get(STORED_REV))) for key in candidates if key not in bm25]
        if fresh := [row for row in unscored if row not in self._bm25]:
            self._bm25.update(dict.fromkeys(fresh, 0.0) | self.lexical.scores(self.dense.query, fresh))
        bm25.update(((d, i), self._bm25[d, i, rev]) for d, i, rev in unscored)
        order = fuse_scores([by_key[key][1] for key in candidates], [bm25.get(key, 0.0) for key in candidates])
        fused = [by_key[candidates[j]] for j in order]
        return Matches(fused, matched=max(len(fused), matched(scored)))  # the store's count: over-fetch goes on

    def _read_ahead(self, scored: list[tuple[Document, float]]) -> None:
        """What later calls will read, read now where the dense search read ahead (:meth:`VectorSearch.read_ahead`).

        Each child of BM25's as many best that this call's dense ranking lacks, and each of the
        dense children read ahead scored by BM25: in one read each, not one a call. A read's
        values do not depend on what is read with it.
        """
        ahead = self.dense.read_ahead()
        if len(ahead) <= len(scored):
            return
        dense = {self._key(d) for d, _ in scored}
        best = self._lexical(len(ahead))
        self._scored([unit_id(h.doc_id, h.index) for h in best if (h.doc_id, h.index) not in dense])
        rows = [(*self._key(d), str(d.metadata.get(STORED_REV))) for d, _ in ahead]
        self._bm25.update(dict.fromkeys(rows, 0.0) | self.lexical.scores(self.dense.query, rows))

    def _lexical(self, k: int) -> list[LexicalHit]:
        """BM25's best ``k`` children, from the best ``max(k, LEXICAL_AHEAD)`` matched once for the query's calls."""
        if k > self._asked and len(self._best) == self._asked:  # more asked than matched, and more may match
            self._asked = max(k, LEXICAL_AHEAD)
            self._best = self.lexical.search(self.dense.query, self._asked)
        return self._best[:k]

    def _key(self, child: Document) -> tuple[str, int]:
        """A child's parent and position: how the lexical index names its row."""
        return str(child.metadata[self.id_key]), int(child.metadata[STORED_INDEX])

    def _scored(self, ids: list[str]) -> list[tuple[Document, float]]:
        """The children ``ids`` still stored, in that order, each with its relevance to the query (a cosine)."""
        fresh = [i for i in ids if i not in self._read]
        read = self.vectors.with_vectors(fresh) if fresh else []
        query = self.dense.vector()
        if read and query is not None:
            similar = cosines([v for _, v in read], query)  # each row alone: its bits do not depend on the others read
            self._read.update((str(doc.id), (doc, relevance(c))) for (doc, _), c in zip(read, similar, strict=True))
        self._read.update((i, None) for i in fresh if i not in self._read)
        return [found for i in ids if (found := self._read[i]) is not None]


def within_filter(vectors: StoreAdapter, lexical: BaseLexicalIndex, where: Any, id_key: str) -> Within | None:
    """BM25 narrowed to the parents a filtered query can return; None where the store alone must apply ``where``.

    A filter on what every child of a parent carries alike (the document's metadata, ``doc_id``)
    picks whole parents: those whose first child passes it, listed by the store (one read,
    :meth:`StoreAdapter.documents_where`). A filter on a child's own keys (``lcx_...``), a store's
    own filter object, or a store that cannot list records by metadata leaves BM25 out.
    """
    if not vectors.whole_documents(where):
        return None
    parents = vectors.documents_where(where, id_key)
    return None if parents is None else Within(lexical, parents)


def children_ranking(
    dense: VectorSearch,
    lexical: BaseLexicalIndex | None,
    vectors: StoreAdapter,
    where: Any,
    id_key: str,
    mmr: tuple[int, float] | None = None,
) -> Callable[[int], list[tuple[Document, float]]]:
    """The children's ranking: by similarity, fused with BM25's where there is a ``lexical`` index, or by MMR.

    ``dense``: the children's dense search; ``where``: its filter, on the units' metadata. With
    ``mmr`` (its ``fetch_k`` and ``lambda_mult``), LangChain's ``maximal_marginal_relevance`` on
    the stored vectors reorders the best ``max(n, fetch_k)`` children so each next one is
    relevant and unlike those before it; each keeps its relevance score, and parents come in the
    order of their first child.
    """
    if mmr is not None:
        return Diversified(dense, *mmr)
    if lexical is None:
        return dense
    if where is None:
        return HybridChildren(dense, lexical, vectors, id_key)
    within = within_filter(vectors, lexical, where, id_key)
    return dense if within is None else HybridChildren(dense, within, vectors, id_key)
