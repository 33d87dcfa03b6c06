"""BM25 in memory, ranked as the lexical index's FTS5 table ranks, to the last bit.

Built over the lexical index's local copies at each change mark of the store, beside the
queries, with the columns (:mod:`.views`).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

from langchain_expand.store.lexical import LexicalHit, LocalSentence
from langchain_expand.store.words import K1, B, idf, words

__all__ = ["Bm25", "Bm25Scores", "Bm25Search", "Listed", "Words"]


class Bm25Scores(NamedTuple):
    """One query's BM25: every row's score, and the postings that were added up (their slices)."""

    scores: np.ndarray
    postings: list[tuple[int, int]]


class Bm25:
    """BM25 over the snapshot's sentences, ranked as the lexical index's FTS5 table ranks them.

    FTS5's ``bm25()`` (:data:`~langchain_expand.store.words.K1`, :data:`~langchain_expand.store.words.B`,
    :func:`~langchain_expand.store.words.idf`), lengths in :func:`~langchain_expand.store.words.words`; a sentence
    matches when it holds any of the query's words. Ties keep the order sentences were written
    in. Each posting's share of a score is counted once, at the build, and a query lists only
    the rows that can be among its ``k`` best (:meth:`_floor`).
    """

    def __init__(
        self,
        words: Words,
        hit: Callable[[int, float], LexicalHit],
        documents: Callable[[Collection[str]], np.ndarray] | None = None,
        row: Callable[[str, int, str], int | None] | None = None,
    ) -> None:
        """Index the rows ``words`` holds; ``hit(row, score)`` names a row found.

        ``documents(doc_ids)``: the rows of those documents, as a mask (a filter's);
        ``row(doc_id, index, rev)``: the row of a sentence, None where it is not one (for :meth:`scores`).

        The postings are one array of rows and one of gains, sorted by term then row; a term's
        are the slice between its two offsets. A posting's gain is what it adds to its row's
        score, ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))``: the rows
        are fixed here, so each term's idf is too, and a query only adds gains up.
        """
        terms, flat, lengths = words.terms, words.flat(), words.lengths()
        n = len(lengths)
        keys, counts = np.unique(flat * max(n, 1) + np.repeat(np.arange(n), lengths), return_counts=True)
        self._terms = terms
        self._rows = keys % max(n, 1)  # sorted: by term, then row
        counts = counts.astype(np.float64)
        self._offsets = np.searchsorted(keys // max(n, 1), np.arange(len(terms) + 1))
        average = float(lengths.mean()) if n else 1.0
        length_norm = K1 * (1.0 - B + B * lengths / (average or 1.0))
        weights = counts * (K1 + 1.0) / (counts + length_norm[self._rows])
        held = np.diff(self._offsets)  # rows a term is in
        self._gains = np.repeat(_idfs(n, held), held) * weights
        self._n = n
        self._hit = hit
        self._row = row
        self.documents = documents
        """The rows of some documents, as a mask; None where this does not know them."""

    @classmethod
    def of(cls, texts: Sequence[str], hit: Callable[[int, float], LexicalHit]) -> Bm25:
        """BM25 over ``texts`` (row ``j`` is ``texts[j]``)."""
        words = Words()
        for text in texts:
            words.add(text)
        return cls(words, hit)

    def scored(self, query: str) -> Bm25Scores:
        """Every row's score for ``query`` (0 where it holds none of its words), and the postings added up."""
        scores = np.zeros(self._n)
        postings: list[tuple[int, int]] = []
        for term in sorted(set(words(query))):  # in the order FTS5 adds them up: the same sums
            at = self._terms.get(term)
            if at is None:
                continue
            a, b = int(self._offsets[at]), int(self._offsets[at + 1])
            np.add.at(scores, self._rows[a:b], self._gains[a:b])  # a row once a term: as `+=`, in half the time
            postings.append((a, b))
        return Bm25Scores(scores, postings)

    def search(
        self, query: str, k: int, within: np.ndarray | None = None, scored: Bm25Scores | None = None
    ) -> list[LexicalHit]:
        """The ``k`` sentences that best match the query's words by BM25, best first; only ``within`` rows where given.

        A filter scores as the lexical index's SQL does (the idf of the whole index), then keeps
        the rows it passes. ``scored``: the query's :meth:`scored`, where the caller holds it.
        """
        if k < 1:
            return []
        scores, postings = scored or self.scored(query)
        if within is None:
            rows = np.flatnonzero(scores >= self._floor(scores, postings, k))
        else:  # a filter's rows: the floor's rarest terms may lie outside them
            rows = np.flatnonzero((scores > 0) & within)
        found = scores[rows]
        if len(rows) > k:  # only those scored at least the k-th best can be among the k best (ties included)
            kept = found >= -np.partition(-found, k - 1)[k - 1]
            rows, found = rows[kept], found[kept]
        best = rows[np.lexsort((rows, -found))][:k]
        return [self._hit(int(row), float(scores[row])) for row in best]

    def scores(
        self, query: str, sentences: Collection[tuple[str, int, str]], scored: Bm25Scores | None = None
    ) -> dict[tuple[str, int, str], float]:
        """As :meth:`~langchain_expand.store.lexical.BaseLexicalIndex.scores`, from the rows held."""
        if self._row is None:
            msg = "This BM25 was built without its rows' names: give it `row`."
            raise TypeError(msg)
        scores = (scored or self.scored(query)).scores
        rows = {sentence: self._row(*sentence) for sentence in sentences}
        return {sentence: float(scores[row]) for sentence, row in rows.items() if row is not None and scores[row] > 0}

    def _floor(self, scores: np.ndarray, postings: Sequence[tuple[int, int]], k: int) -> float:
        """A score the ``k``-th best reaches, above 0 (a row holding a query word scores more than 0).

        A common word holds most rows, and listing every row matched costs more than scoring
        them. The rows of the rarest terms (up to ``_SEEDS``, the rarest term's at least) are
        few: the ``k``-th best of their whole scores is such a floor; where they are under
        ``k``, the floor is the smallest positive score.
        """
        seeds: list[np.ndarray] = []
        held = 0
        for a, b in sorted(postings, key=lambda p: p[1] - p[0]):
            if seeds and held + b - a > _SEEDS:
                break
            seeds.append(self._rows[a:b])
            held += b - a
        seeded = seeds[0] if len(seeds) == 1 else np.unique(np.concatenate(seeds)) if seeds else np.zeros(0, int)
        if len(seeded) < k:
            return float(np.nextafter(0.0, 1.0))
        return float(-np.partition(-scores[seeded], k - 1)[k - 1])


def _idfs(n: int, held: np.ndarray) -> np.ndarray:
    """FTS5's idf of a term in ``h`` of ``n`` rows, for each ``h`` in ``held``.

    :func:`~langchain_expand.store.words.idf` once for each distinct ``h``: most terms share theirs with others.
    """
    distinct, which = np.unique(held, return_inverse=True)
    return np.array([idf(n, h) for h in distinct.tolist()], dtype=np.float64)[which]


_SEEDS = 4096
"""Rows of the rarest query terms that :meth:`Bm25._floor` scores, at most (and a term's whole)."""


class Bm25Search:
    """One query's BM25 in memory: a filter's rows alone where given; its scores and last search kept (hits refill)."""

    def __init__(self, bm25: Bm25, within: np.ndarray | None = None) -> None:
        self.bm25 = bm25
        self.within = within
        self._scored: tuple[str, Bm25Scores] | None = None
        self._last: tuple[tuple[str, int], list[LexicalHit]] | None = None

    def search(self, query: str, k: int) -> list[LexicalHit]:
        """The ``k`` best by BM25 (of the filter's rows, where given)."""
        if self._last is None or self._last[0] != (query, k):
            self._last = ((query, k), self.bm25.search(query, k, self.within, self._of(query)))
        return self._last[1]

    def scores(self, query: str, sentences: Collection[tuple[str, int, str]]) -> dict[tuple[str, int, str], float]:
        """See :meth:`Bm25.scores`."""
        return self.bm25.scores(query, sentences, self._of(query))

    def _of(self, query: str) -> Bm25Scores:
        if self._scored is None or self._scored[0] != query:
            self._scored = (query, self.bm25.scored(query))
        return self._scored[1]


class Listed:
    """BM25's rows, named as the lexical index names its hits, noted as its local copies are listed.

    :meth:`take` passes the listing on (to :class:`~langchain_expand.windows.columns.Columns`),
    so one pass over the index builds both. Each sentence's document, revision and index are held
    as numbers, not a Python object a sentence, which every full garbage collection would walk.
    """

    def __init__(self) -> None:
        self._numbered: dict[str, int] = {}  # each document id and revision once
        self._docs, self._revs, self._indices = array("l"), array("l"), array("l")
        self._rows_of: dict[tuple[int, int], array[int]] = {}  # each document's rows at a revision, by index (-1: none)
        self._words = Words()

    def take(self, copies: Iterable[tuple[str, str, LocalSentence]]) -> Iterator[tuple[str, str, LocalSentence]]:
        """``copies`` as listed, each sentence's words noted on the way."""
        numbered = self._numbered
        for doc_id, rev, copy in copies:
            doc, version = numbered.setdefault(doc_id, len(numbered)), numbered.setdefault(rev, len(numbered))
            rows = self._rows_of.setdefault((doc, version), array("l"))
            if len(rows) <= copy.i:
                rows.extend([-1] * (copy.i + 1 - len(rows)))
            rows[copy.i] = len(self._docs)
            self._docs.append(doc)
            self._revs.append(version)
            self._indices.append(copy.i)
            self._words.add(copy.text)
            yield doc_id, rev, copy

    def bm25(self) -> Bm25:
        """BM25 over the sentences taken, in their order."""
        names, numbered = list(self._numbered), self._numbered
        docs, revs, indices = self._docs, self._revs, self._indices
        doc_of = np.frombuffer(docs, dtype=f"i{docs.itemsize}") if docs else np.zeros(0, dtype=np.int64)

        def hit(row: int, score: float) -> LexicalHit:
            return LexicalHit(names[docs[row]], indices[row], names[revs[row]], score)

        def row(doc_id: str, index: int, rev: str) -> int | None:
            rows = self._rows_of.get((numbered.get(doc_id, -1), numbered.get(rev, -1)))
            found = rows[index] if rows is not None and 0 <= index < len(rows) else -1
            return None if found < 0 else found

        def documents(doc_ids: Collection[str]) -> np.ndarray:
            wanted = [numbered[d] for d in doc_ids if d in numbered]
            return np.isin(doc_of, wanted, kind="table") if wanted else np.zeros(len(doc_of), dtype=bool)

        return Bm25(self._words, hit, documents, row)


class Words:
    """Each row's words (:func:`~langchain_expand.store.words.words`) as numbers, in one flat array.

    Not an array a row: a million sentences would be a million Python objects at a build's peak.
    """

    def __init__(self) -> None:
        self.terms: dict[str, int] = {}
        """Each word's number."""
        self._flat = array("q")
        self._lengths = array("q")

    def add(self, text: str) -> None:
        """The next row: ``text``'s words."""
        found = words(text)
        terms = self.terms
        self._flat.extend([terms.setdefault(w, len(terms)) for w in found])
        self._lengths.append(len(found))

    def flat(self) -> np.ndarray:
        """Every row's word numbers, row after row."""
        return np.frombuffer(self._flat, dtype=np.int64) if self._flat else np.zeros(0, dtype=np.int64)

    def lengths(self) -> np.ndarray:
        """Each row's number of words."""
        return np.frombuffer(self._lengths, dtype=np.int64) if self._lengths else np.zeros(0, dtype=np.int64)
