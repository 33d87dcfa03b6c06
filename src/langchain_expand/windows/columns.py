"""Copied sentences in arrays: what a query weighs of a sentence without reading it.

A guided query weighs a few hundred sentences: each one's token count, cues (a table row, a
heading), similarity to the query and, for the windows sent, its text. :class:`Columns` holds
them for every sentence the lexical index copied, by document at one revision: a float32
matrix of vectors and their norms, token counts with their counter, cues as small codes and,
with ``texts`` (up to ``snapshot_limit``), the copies; otherwise no Python object a sentence.
Built at each change mark of the store (:mod:`.views`), each document is served only at the
revision of its head.

A query's similarities are computed for every row where it searches the whole matrix, else
``BLOCK`` rows at a time as growth looks into them; both row by row, as
:func:`~langchain_expand.store.similarity.cosines` computes a read's: one similarity a sentence.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from langchain_expand.store.adapters import Vector
from langchain_expand.store.adapters.ties import TIES
from langchain_expand.store.lexical import LocalSentence
from langchain_expand.store.similarity import distances, norms_of, query_norm, similarities
from langchain_expand.text.cues import EVERY_CUES, Cues, cues, cues_code
from langchain_expand.windows.regions import Lookup, Position, Sentence

__all__ = ["BLOCK", "Columns", "Row", "Scores", "nearest"]

Row = tuple[str, str, LocalSentence]
"""A copied sentence as columns are built from it: its document, the document's revision, the copy."""

BLOCK = 32
"""Rows whose similarities a query computes together, the first time growth looks into them."""
_NORMED = 65_536
"""Rows whose norms are computed together at a build (a float64 copy of that many at a time)."""
_UNCOUNTED = 0xFFFF
"""The counter number of a row without a token count."""


class Columns:
    """Vector, norm, token count, counter and cues of copied sentences (with ``texts``, their copies), by document."""

    _matrix: np.ndarray

    def __init__(
        self, rows: Iterable[Row], *, texts: bool = False, heads: Mapping[tuple[str, str], Vector] | None = None
    ) -> None:
        """Hold ``rows``, in order; with ``heads``, only those of a committed document at its head's revision.

        ``heads``: each committed document's head's vector, by document and revision; a head's
        copy, written without a vector, takes it. A document listed at more than one revision
        keeps the last listed. A row left without a vector, or whose vector has another dimension
        than the first (a store written with two models), is left out, and so read where asked.
        """
        self._names: list[str] = []  # each document's id once, by number
        self._numbers: dict[str, int] = {}
        self._docs: dict[str, tuple[str, array[int]]] = {}  # id -> (revision, row of each sentence or -1)
        self._doc_of = array("l")  # each row's document, by number
        self._index_of = array("l")  # each row's place in its document
        self._counter_numbers: dict[str, int] = {}
        self._tokens, self._counters, self._codes = array("l"), array("H"), array("B")
        self._texts: list[LocalSentence] | None = [] if texts else None
        vectors = bytearray()
        width = 0
        for doc_id, rev, copy in rows:
            if heads is not None and (doc_id, rev) not in heads:
                continue  # not committed at this revision
            blob = _blob(copy.vector if copy.vector is not None or heads is None else heads[doc_id, rev])
            if blob is None or len(blob) != (width := width or len(blob)):
                continue
            self._place(doc_id, rev, copy.i, len(self._tokens))
            counted = copy.tokens is not None and copy.counter is not None
            self._tokens.append(int(copy.tokens) if counted else -1)  # type: ignore[arg-type]
            number = self._counter_numbers.setdefault(copy.counter, len(self._counter_numbers)) if counted else None  # type: ignore[arg-type]
            self._counters.append(_UNCOUNTED if number is None else number)
            self._codes.append(cues_code(cues(copy.text, copy.gap)))
            if self._texts is not None:
                self._texts.append(copy._replace(vector=None))
            vectors += blob
        self._counter_names = list(self._counter_numbers)
        self._matrix = np.frombuffer(vectors, dtype=np.float32).reshape(len(self._tokens), width // 4)  # no copy
        self.squares = np.zeros(len(self._tokens), dtype=np.float32)
        """Each row's sum of squares (a squared L2 distance's term)."""
        for a in range(0, len(self._tokens), _NORMED):
            block = self._matrix[a : a + _NORMED]
            self.squares[a : a + _NORMED] = np.einsum("ij,ij->i", block, block)
        self._norms = norms_of(self.squares)

    def _place(self, doc_id: str, rev: str, i: int, row: int) -> None:
        """Hold ``row`` as sentence ``i`` of ``doc_id`` at ``rev`` (a document at another revision starts again)."""
        held = self._docs.get(doc_id)
        if held is None or held[0] != rev:
            held = self._docs[doc_id] = (rev, array("l"))
            if doc_id not in self._numbers:
                self._numbers[doc_id] = len(self._names)
                self._names.append(doc_id)
        rows_of = held[1]
        if len(rows_of) == i:  # in order, as every lexical index lists them
            rows_of.append(row)
        else:
            rows_of.extend([-1] * (i + 1 - len(rows_of)))
            rows_of[i] = row
        self._doc_of.append(self._numbers[doc_id])
        self._index_of.append(i)

    def __len__(self) -> int:
        return len(self._tokens)

    def documents(self) -> list[str]:
        """The documents held, each at one revision."""
        return list(self._docs)

    def document(self, doc_id: str) -> tuple[str, int] | None:
        """The document's revision and its number of sentences (the last held, plus one); None if not held."""
        held = self._docs.get(doc_id)
        return None if held is None else (held[0], len(held[1]))

    def whole(self, doc_id: str, rev: str, n: int) -> bool:
        """Every one of the document's ``n`` sentences is held, at revision ``rev``."""
        held = self._docs.get(doc_id)
        return held is not None and held[0] == rev and len(held[1]) == n and min(held[1]) >= 0

    def row(self, position: Position, rev: str) -> int | None:
        """The row of the sentence at ``position`` at revision ``rev``; None if not held at it."""
        held = self._docs.get(position[0])
        if held is None or held[0] != rev or not 0 <= position[1] < len(held[1]):
            return None
        row = held[1][position[1]]
        return None if row < 0 else row

    def position(self, row: int) -> Position:
        """The sentence in ``row``: its document and index."""
        return self._names[self._doc_of[row]], self._index_of[row]

    def rows(self, doc_id: str) -> array[int]:
        """The rows of a document's sentences, in order (-1 for one not held)."""
        return self._docs[doc_id][1]

    def tokens(self, row: int, counter: str | None) -> int | None:
        """The row's token count, where ``counter`` (a counter's key) made it; else None."""
        number = self._counters[row]
        if counter is None or number == _UNCOUNTED or self._counter_names[number] != counter:
            return None
        return self._tokens[row]

    def copies(self, doc_id: str, rev: str, indices: Sequence[int]) -> list[tuple[LocalSentence, Cues]]:
        """The copies of sentences ``indices`` held at revision ``rev``, with their cues (none without texts)."""
        texts = self._texts
        if texts is None:
            return []
        rows = [row for i in indices if (row := self.row((doc_id, i), rev)) is not None]
        return [(texts[row], EVERY_CUES[self._codes[row]]) for row in rows]

    def run(self, doc_id: str, rev: str, first: int, last: int) -> list[LocalSentence] | None:
        """Copies of sentences ``first`` to ``last - 1`` at revision ``rev``; None where one (or any text) is not held.

        A slice where their rows run on (as a snapshot, which lists each document's sentences in order, holds them).
        """
        held, texts = self._docs.get(doc_id), self._texts
        if held is None or held[0] != rev or texts is None or not 0 <= first < last <= len(held[1]):
            return None
        rows = held[1]
        if rows[first] >= 0 and rows[last - 1] - rows[first] == last - 1 - first:
            return texts[rows[first] : rows[last - 1] + 1]
        return None if min(rows[first:last]) < 0 else [texts[row] for row in rows[first:last]]

    def lookup(
        self,
        scores: Scores,
        counter: str | None,
        revision: Callable[[str], str | None],
        count: Callable[[Position, LocalSentence], int],
    ) -> Lookup:
        """What growth weighs of a sentence held here, for one query: its count, similarity and cues; None if not held.

        A sentence is held at its document's ``revision`` (None: not committed), looked up once a
        document; one counted by another
        ``counter`` is counted with ``count`` from its copy, where texts are kept (else not held).
        Growth asks for a few hundred a query: everything a lookup reads is bound here once.
        """
        docs, tokens, counters, codes, texts = self._docs, self._tokens, self._counters, self._codes, self._texts
        number = -1 if counter is None else self._counter_numbers.get(counter, -1)
        similarity, revs = scores.similarity, dict[str, str]()

        def sentence(position: Position) -> Sentence | None:
            doc_id, i = position
            rev = revs.get(doc_id)
            if rev is None and (rev := revision(doc_id)) is not None:
                revs[doc_id] = rev
            held = docs.get(doc_id)
            if held is None or held[0] != rev or not 0 <= i < len(held[1]) or (row := held[1][i]) < 0:
                return None
            n = tokens[row] if counters[row] == number else None if texts is None else count(position, texts[row])
            found = similarity(row)
            if found is None or n is None:
                return None
            cue = EVERY_CUES[codes[row]]
            return Sentence(n, found, cue.tied, cue.heading)

        return sentence

    @property
    def width(self) -> int:
        """The vectors' length."""
        return int(self._matrix.shape[1])

    def vectors(self, rows: Sequence[int]) -> np.ndarray:
        """The vectors of ``rows``, a float32 matrix."""
        return self._matrix[np.asarray(rows, dtype=np.int64)]

    def among(self, rows: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The dot products, cosine similarities and sums of squares of ``rows`` against ``query``, row by row."""
        dots = np.einsum("ij,j->i", self._matrix[rows], query)
        return dots, dots / (self._norms[rows] * query_norm(query)), self.squares[rows]

    def scores(self, vector: Sequence[float]) -> Scores:
        """One query's similarities to ``vector``: each row's computed when first asked (:class:`Scores`)."""
        return Scores(self, vector)


class Scores:
    """One query's cosine similarity of each row of :class:`Columns`, computed a block at a time, or all at once."""

    def __init__(self, columns: Columns, vector: Sequence[float]) -> None:
        self.columns = columns
        self.query = np.asarray(vector, dtype=np.float32)
        self._norm = query_norm(self.query)
        self._blocks: dict[int, list[float]] = {}
        self._dots: np.ndarray | None = None
        self._all: np.ndarray | None = None
        self.usable = columns._matrix.shape[1] == len(self.query)
        """False for vectors of another model: no similarity is served."""

    def similarity(self, row: int) -> float | None:
        """The row's cosine similarity to the query (None for vectors of another model)."""
        if not self.usable:
            return None
        if self._all is not None:
            return float(self._all[row])
        block = row // BLOCK
        found = self._blocks.get(block)
        if found is None:
            rows = slice(block * BLOCK, block * BLOCK + BLOCK)
            columns = self.columns
            found = self._blocks[block] = similarities(
                columns._matrix[rows], columns._norms[rows], self.query, self._norm
            ).tolist()
        return found[row % BLOCK]

    def every(self) -> tuple[np.ndarray, np.ndarray]:
        """Every row's dot product with the query and cosine similarity to it: one pass over the matrix.

        einsum, not BLAS: on 2 cores OpenBLAS's threads wait on the embedding model's, at 1-10x
        the cost; and a row's similarity is then the one a block or a read gives it.
        """
        if self._dots is None or self._all is None:
            columns = self.columns
            self._dots = np.einsum("ij,j->i", columns._matrix, self.query)
            self._all = self._dots / (columns._norms * self._norm)
        return self._dots, self._all


def nearest(
    columns: Columns,
    rows: np.ndarray | None,
    scored: tuple[np.ndarray, np.ndarray, np.ndarray],
    query: np.ndarray,
    k: int,
    space: str,
    relevance: Callable[[float], float],
) -> list[tuple[Position, float]]:
    """The ``k`` of ``rows`` (None: every row) nearest the query, exactly, with the store's relevance, best first.

    ``scored``: the rows' dot products, cosine similarities and sums of squares, in their order.
    Distances are the store's ``space`` (:func:`~langchain_expand.store.similarity.distances`).
    Ties (equal to ``TIES`` decimals: a repeated sentence's copies differ in the last bits of a
    float32 sum) go by document id, then position, as the store's results do
    (:func:`~langchain_expand.store.adapters.ties.nearest`): the same hits as from the store.
    """
    found = distances(*scored, query, space)
    rounded = np.round(found, TIES)
    k = min(k, len(rounded))
    if k < 1:
        return []
    cut = rounded[np.argpartition(rounded, k - 1)[k - 1]]
    pool = np.flatnonzero(rounded <= cut).tolist()

    def position(j: int) -> Position:
        return columns.position(j if rows is None else int(rows[j]))

    top = sorted(pool, key=lambda j: (rounded[j], position(j)))[:k]
    return [(position(j), relevance(d)) for j, d in zip(top, found[top].tolist(), strict=True)]


def _blob(vector: bytes | Sequence[float] | np.ndarray | None) -> bytes | None:
    """A vector as float32 bytes (None stays None)."""
    if vector is None or isinstance(vector, bytes):
        return vector
    return np.asarray(vector, dtype=np.float32).tobytes()
