"""A query's hits: the matched sentences windows are built around and guided growth starts from.

One ranking, whatever the query holds in memory (:class:`Ranking`): dense positions with the
store's relevance (exact from the snapshot, else the store's), BM25's positions (in memory,
else the lexical index's), fused by both scores, each hit made once from what the query
holds of its sentence (:meth:`Reads.held`), else from the sentence read (:meth:`Reads.sentences`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from langchain_core.documents import Document

from langchain_expand.store.adapters.base import Matches, matched
from langchain_expand.store.lexical import BaseLexicalIndex, LexicalHit, Within
from langchain_expand.store.records import unit_position
from langchain_expand.store.search import VectorSearch, fuse_scores
from langchain_expand.text.cues import NO_CUES, Cues
from langchain_expand.units import (
    CARRIED,
    DOC_ID,
    HIT,
    N_SENTENCES,
    SCORE,
    SPAN,
    START,
    check_match,
)
from langchain_expand.windows.bm25 import Bm25Search
from langchain_expand.windows.reads import Read, Reads, not_ours, position_of
from langchain_expand.windows.regions import Lookup, Position

__all__ = ["Hit", "Lexical", "Ranking", "from_match"]

Lexical = BaseLexicalIndex | Within | Bm25Search
"""What ranks a query's sentences by BM25: in memory, or the lexical index (a filter's documents alone)."""


@dataclass(slots=True)
class Hit:
    """A matched sentence: where it stands, the version it was matched in, and its relevance.

    Not frozen, though nothing changes a hit once made: a query makes about a hundred, and a
    frozen dataclass takes five times as long to make (0.15 ms of a 5.4 ms query).
    """

    doc_id: str
    index: int
    n: int
    rev: str | None  # None: take whatever version the document's head has
    score: float
    extra: dict[str, Any]
    cues: Cues = NO_CUES
    """What its sentence says of the text beside it (a table row, a heading)."""
    matched: tuple[int, str] | None = None
    """Where a match-only result gave it, its text and where that starts in the source: no window is
    built around another sentence that a rewrite has put at its index."""


def from_match(doc: Document) -> Hit:
    """A hit rebuilt from a match-only result (or any unit with the same metadata)."""
    check_match(doc, (DOC_ID, HIT, N_SENTENCES, SCORE))
    m = doc.metadata
    extra = {key: m[key] for key in CARRIED if key in m}
    span, start = m.get(SPAN), m.get(START)
    alone = span is not None and list(span) == [int(m[HIT]), int(m[HIT]) + 1]  # the unit is its sentence
    matched = (start, doc.page_content) if alone and isinstance(start, int) else None
    return Hit(m[DOC_ID], int(m[HIT]), int(m[N_SENTENCES]), None, float(m[SCORE]), extra, matched=matched)


@dataclass(eq=False)
class Ranking:
    """The dense ranking fused with BM25's, best first, as hits; each hit's sentence's token count.

    Asked for ``k``, both rankings give their ``k`` best and the fused list holds up to ``2k``.
    With BM25 fused, each candidate is scored from its vector (:meth:`Reads.relevances`): as
    the store measures relevance where it names its distance (Chroma), so a hit scores the
    same in every memory mode; elsewhere by its cosine, for the fusion alone, the dense hits
    keeping the store's scores. A hit BM25 alone found whose vector is not kept scores the
    lowest dense score. With ``ids_first`` (guided growth: it reads the hits' heads anyway), a
    store that can search for ids alone (Chroma) is asked for ids, and the hits' documents'
    heads are read in one call; otherwise the store returns the records, which teach ``reads``
    their revisions (fixed windows then read every neighbour in one call).
    """

    dense: VectorSearch
    reads: Reads
    lexical: Lexical | None
    beside: Callable[..., Future[Any]]
    """Runs the lexical index's search beside the dense one (a thread pool's submit)."""
    _: KW_ONLY
    ids_first: bool
    _tokens: dict[Position, int] = field(default_factory=dict, init=False, repr=False)

    def __call__(self, k: int) -> list[Hit]:
        """Both rankings' best ``k``, fused: up to ``2k`` hits, best first."""
        vector = self.dense.vector()  # before BM25 starts beside: the embedding keeps every core busy on its own
        lexical = self._lexical(k)
        dense, found = self._dense(k, vector, lexical)
        held = None if vector is None else self.reads.held(vector)
        bm25 = [(hit.doc_id, hit.index) for hit in found]
        positions = list(dict.fromkeys([*(p for p, _ in dense), *bm25]))  # the candidates, dense first
        scored: dict[Position, float] = {}
        if self.lexical is not None and vector is not None:
            scored = self.reads.relevances(positions, vector)
        own = scored if self.reads.store.space is not None else {}  # where it measures as the store does
        made = self._made([(p, own.get(p, score)) for p, score in dense], held)
        floor = min((made[p].score for p, _ in dense if p in made), default=0.0)
        made.update(self._made([(p, scored.get(p, floor)) for p in bm25 if p not in made], held))
        candidates = [made[p] for p in positions if p in made]
        fused = candidates if self.lexical is None else self._fused(candidates, found, scored)
        return Matches(fused, matched=max(len(fused), matched(dense)))

    def _fused(self, candidates: list[Hit], found: list[LexicalHit], scored: dict[Position, float]) -> list[Hit]:
        """``candidates`` by both their scores (:func:`fuse_scores`): ``scored``'s (else their own), and BM25's."""
        assert self.lexical is not None
        lexical = {(h.doc_id, h.index, h.rev): h.score for h in found}
        keys = [(h.doc_id, h.index, h.rev or "") for h in candidates]  # a hit of the ranking is read at a revision
        unscored = [key for key in keys if key not in lexical]
        if unscored:
            lexical.update(self.lexical.scores(self.dense.query, unscored))
        dense = [scored.get((h.doc_id, h.index), h.score) for h in candidates]
        return [candidates[j] for j in fuse_scores(dense, [lexical.get(key, 0.0) for key in keys])]

    def tokens(self, hits: Sequence[Hit]) -> list[int]:
        """The token count of each hit's sentence (of the last call): from what the query holds, else read."""
        positions = [(h.doc_id, h.index) for h in hits]
        sizes = self.reads.sizes([p for p in positions if p not in self._tokens])
        return [self._tokens[p] if p in self._tokens else sizes[p] for p in positions]

    def _lexical(self, k: int) -> Callable[[], list[LexicalHit]]:
        """BM25's ``k`` best, when asked: in memory then, else the lexical index's, searched beside now."""
        query = self.dense.query
        if self.lexical is None:
            return list
        if isinstance(self.lexical, Bm25Search):
            bm25 = self.lexical
            return lambda: bm25.search(query, k)
        return self.beside(self.lexical.search, query, k).result  # beside the dense search: both release the GIL

    def _dense(
        self, k: int, vector: Sequence[float] | None, lexical: Callable[[], list[LexicalHit]]
    ) -> tuple[Matches, list[LexicalHit]]:
        """The dense ranking's best ``k`` (positions and scores), and BM25's.

        In memory (a snapshot) the search is exact; from the store, ids where it gives them,
        and the heads of the documents either ranking found are read in one call; else the
        store's records, which the reads keep.
        """
        nearest = None if vector is None else self.reads.nearest(vector, k)
        if nearest is not None:  # every document held, with its size and revision: no head to read
            return Matches(nearest), lexical()
        ids = self.dense.ids(k) if self.ids_first else None
        if ids is None:  # the records, read: their hits are made from them
            records = self.dense(k)
            dense = Matches([(position_of(doc), score) for doc, score in records], matched=matched(records))
            self.reads.saw(doc for doc, _ in records)
            return dense, lexical()
        for record_id, _ in ids:
            if unit_position(record_id) is None:
                raise not_ours(record_id)
        dense = Matches([(p, score) for i, score in ids if (p := unit_position(i)) is not None], matched=len(ids))
        found = lexical()
        self.reads.heads([*(doc_id for (doc_id, _), _ in dense), *(hit.doc_id for hit in found)])
        return dense, found

    def _made(self, scored: list[tuple[Position, float]], held: Lookup | None) -> dict[Position, Hit]:
        """The hits at ``scored``'s positions and scores: from what the query holds, else read (gone: left out)."""
        made = self._held_hits(scored, held)
        unheld = [(p, score) for p, score in scored if p not in made]
        found = self.reads.sentences([p for p, _ in unheld])
        made.update((p, _hit(p, found[p], score)) for p, score in unheld if p in found)
        return made

    def _held_hits(self, wanted: Sequence[tuple[Position, float]], held: Lookup | None) -> dict[Position, Hit]:
        """The hits at ``wanted``'s positions and scores that the query holds, with its heads read."""
        made: dict[Position, Hit] = {}
        if held is None:
            return made
        documents: dict[str, tuple[int, str] | None] = {}
        for position, score in wanted:
            sentence = held(position)
            doc_id = position[0]
            if doc_id not in documents:
                documents[doc_id] = self.reads.document(doc_id)
            document = documents[doc_id]
            if sentence is None or document is None:
                continue
            self._tokens[position] = sentence.tokens
            cue = Cues(sentence.tied, sentence.heading)
            made[position] = Hit(doc_id, position[1], document[0], document[1], score, {}, cue)
        return made


def _hit(position: Position, read: Read, score: float) -> Hit:
    """The hit at ``position``, made from its sentence as the query read it."""
    return Hit(position[0], position[1], read.n, read.rev, score, {}, read.cues)
