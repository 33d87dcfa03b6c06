"""What guided growth weighs of every copied sentence, in arrays: past the snapshot's limit.

Growth decides by each neighbour's token count, cues (a table row, a heading) and similarity to
the query. With a snapshot it knows them all as it looks; past ``snapshot_limit`` it had to
guess, name the neighbours it wanted, have them read (from the sentence cache, else the local
copies in SQLite) and run again: 3.3 rounds and 615 steps a query on FriendsQA, against one
round and 259 steps with the snapshot, and a few microseconds of Python a sentence read.

:class:`Figures` holds those figures of every sentence the lexical index copied (token count,
counter, cues, vector) in arrays and no text: about 1.5 KB a sentence at 384 dimensions, no
Python object a sentence (a full garbage collection does not walk them). It is built beside the
queries with the ranking in memory (:class:`~langchain_expand.windows.bm25.LexicalRanking`).
A query's similarities are computed a block of rows at a time, only for the blocks growth looks
into, row by row as :func:`~langchain_expand.windows.similarity.cosines` computes them: a sentence
has the same similarity whether growth learned it here or from a read.

A sentence's figures are served only at the revision of its document's head read by the query
(the sentence cache's rule): a revision hashes a document's text, splitter and metadata, so a
figure of that revision is the one the copies hold. Figures built before a write are simply not
used for the documents it rewrote: those are read as before, until the next build.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from langchain_expand.store.adapters import Vector
from langchain_expand.store.lexical import FigureRow
from langchain_expand.text.cues import EVERY_CUES, cues, cues_code
from langchain_expand.windows.regions import Position, Sentence
from langchain_expand.windows.similarity import cosines, norms_of, query_norm, similarities

__all__ = ["BLOCK", "Figures", "QueryFigures", "lookup"]

BLOCK = 32
"""Rows whose similarities a query computes together, the first time growth looks into them."""
_NORMED = 65_536
"""Rows whose norms are computed together at a build (a float64 copy of that many at a time)."""
_VECTORLESS = 4
"""Beside a row's cues code (0-3): the row has no vector of its own (a head's copy)."""


class Figures:
    """Token count, counter, cues and vector of every copied sentence, by document and revision."""

    def __init__(self, rows: Iterable[FigureRow]) -> None:
        """Hold ``rows`` (a lexical index's :meth:`~langchain_expand.store.lexical.BaseLexicalIndex.figures`).

        A document copied at more than one revision keeps the last listed; a sentence without
        a token count is held as unknown, and read as before. One without a vector (a head:
        its copy is written before the store's record, whose vector the query reads with the
        head) is held with its other figures, and takes the vector the query gives it.
        """
        names: dict[str, int] = {}  # each counter's name once
        tokens = array("l")
        counters = array("H")
        codes = bytearray()  # each row's cues (cues_code), and _VECTORLESS
        vectors = bytearray()  # each row's vector as float32 bytes; zeros for one without
        width = 0
        leading = 0  # rows without a vector before the first with one (its width unknown yet)
        placed: dict[str, tuple[str, dict[int, int]]] = {}
        for doc_id, i, rev, text, gap, counted, counter, vector in rows:
            blob = _blob(vector)
            if counted is None or counter is None:
                continue
            if blob is not None and width == 0:
                width = len(blob)
                vectors += bytes(width * leading)
            if blob is not None and len(blob) != width:
                continue  # another dimension (a store written with two models): not comparable
            held = placed.get(doc_id)
            if held is None or held[0] != rev:
                held = placed[doc_id] = (rev, {})
            held[1][int(i)] = len(tokens)
            tokens.append(int(counted))
            counters.append(names.setdefault(counter, len(names)))
            codes.append(cues_code(cues(text, gap)) | (_VECTORLESS if blob is None else 0))
            if blob is None and width == 0:
                leading += 1
            else:
                vectors += blob if blob is not None else bytes(width)
        self._tokens = tokens
        self._counters = counters
        self._codes = bytes(codes)
        self._counter_names = list(names)
        self._matrix = np.frombuffer(vectors, dtype=np.float32).reshape(len(tokens), width // 4)
        # each row's norm, as every path computes it (:mod:`.similarity`): once, not per query
        self._norms = np.ones(len(tokens), dtype=np.float32)
        for a in range(0, len(tokens), _NORMED):
            block = self._matrix[a : a + _NORMED]
            self._norms[a : a + _NORMED] = norms_of(np.einsum("ij,ij->i", block, block))
        self._docs: dict[str, tuple[str, array[int]]] = {}
        for doc_id, (rev, at) in placed.items():
            rows_of = array("l", [-1]) * (max(at) + 1)
            for i, row in at.items():
                rows_of[i] = row
            self._docs[doc_id] = (rev, rows_of)

    def __len__(self) -> int:
        return len(self._tokens)

    def documents(self) -> list[str]:
        """The documents held, each at one revision."""
        return list(self._docs)

    def row(self, position: Position, rev: str, counter: str | None) -> int | None:
        """The row of the sentence at ``position``, revision ``rev``, counted by ``counter``; None if not held."""
        doc_id, i = position
        held = self._docs.get(doc_id)
        if held is None or held[0] != rev or not 0 <= i < len(held[1]):
            return None
        row = held[1][i]
        if row < 0 or counter is None or self._counter_names[self._counters[row]] != counter:
            return None
        return row

    def tokens(self, position: Position, rev: str, counter: str | None) -> int | None:
        """The token count of the sentence at ``position``, revision ``rev``, by ``counter``; None if not held."""
        row = self.row(position, rev, counter)
        return None if row is None else self._tokens[row]

    def for_query(self, vector: Sequence[float]) -> QueryFigures:
        """What one query reads here: each sentence's figures, its similarity to ``vector`` computed on demand."""
        return QueryFigures(self, vector)


class QueryFigures:
    """One query's view of :class:`Figures`: a sentence's figures, with its similarity to the query."""

    def __init__(self, figures: Figures, vector: Sequence[float]) -> None:
        self._figures = figures
        self._query = np.asarray(vector, dtype=np.float32)
        self._query_norm = query_norm(self._query)
        self._blocks: dict[int, list[float]] = {}
        self._usable = figures._matrix.shape[1] == len(self._query)  # else another model's vectors: none served

    def sentence(
        self, position: Position, rev: str, counter: str | None, vector: Vector | None = None
    ) -> Sentence | None:
        """Growth's figures of the sentence at ``position``, revision ``rev``, counted by ``counter``; None if not held.

        ``vector`` is the sentence's, for one held without (a head); None: not known.
        """
        figures = self._figures
        row = figures.row(position, rev, counter) if self._usable else None
        if row is None:
            return None
        code = figures._codes[row]
        if code & _VECTORLESS:
            if vector is None:
                return None
            similarity = self._similarity(vector)
        else:
            block = row // BLOCK
            similarities = self._blocks.get(block)
            if similarities is None:
                similarities = self._blocks[block] = self._similarities(block * BLOCK)
            similarity = similarities[row % BLOCK]
        cue = EVERY_CUES[code & ~_VECTORLESS]
        return Sentence(figures._tokens[row], similarity, cue.tied, cue.heading)

    def _similarity(self, vector: Vector) -> float:
        """The cosine similarity of one vector to the query (:func:`cosines`)."""
        return cosines([vector], self._query)[0]

    def _similarities(self, first: int) -> list[float]:
        """The cosine similarity to the query of rows ``first`` to ``first + BLOCK``, row by row as :func:`cosines`."""
        figures = self._figures
        rows = slice(first, first + BLOCK)
        found: list[float] = similarities(
            figures._matrix[rows], figures._norms[rows], self._query, self._query_norm
        ).tolist()
        return found


def _blob(vector: bytes | Sequence[float] | np.ndarray | None) -> bytes | None:
    """A vector as float32 bytes (None stays None)."""
    if vector is None or isinstance(vector, bytes):
        return vector
    return np.asarray(vector, dtype=np.float32).tobytes()


def lookup(
    figures: QueryFigures,
    committed: Callable[[str], tuple[str, Vector | None] | None],
    counter: str | None,
) -> Callable[[Position], Sentence | None]:
    """Growth's figures of a sentence, at the revision of its document's head ``committed`` gives (None: not held).

    ``committed`` gives the revision and the vector of the document's head read by the query.
    """
    heads: dict[str, tuple[str, Vector | None]] = {}  # a head read stays read for the query: looked up once

    def sentence(position: Position) -> Sentence | None:
        head = heads.get(position[0])
        if head is None:
            head = committed(position[0])
            if head is None:
                return None
            heads[position[0]] = head
        return figures.sentence(position, head[0], counter, head[1] if position[1] == 0 else None)

    return sentence
