"""One growth's regions: which region owns each sentence, each region's ends, what it wants; and what growth reads.

:func:`~langchain_expand.windows.growth.grow` decides which sentence to take next; a
:class:`Regions` holds what it has taken and weighs the sentences beside a region (a table's
rows together, a heading's stop).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

__all__ = ["Entry", "Lookup", "Position", "Region", "Regions", "Seed", "Sentence", "Sentences"]

Position = tuple[str, int]
"""A sentence: its document's id and its index in the document."""


class Sentences(Protocol):
    """What growth reads each sentence's count, similarity and cues from: a ``dict`` will do."""

    def get(self, position: Position, /) -> Sentence | None:
        """The sentence at ``position`` (document, index), or None if not known."""


@dataclass(frozen=True)
class Seed:
    """A hit: where growth starts."""

    doc_id: str
    index: int
    n: int
    """Sentences in the document."""
    relevance: float
    """The prior of the hit's own sentence; seeds are taken in the order given."""


class Sentence(NamedTuple):
    """What growth needs to know of one sentence (a tuple: a query learns hundreds)."""

    tokens: int
    similarity: float
    """Cosine similarity of its vector to the query's."""
    tied: bool = False
    """It and the next sentence are rows of one table (:func:`~langchain_expand.text.cues.tied`):
    growth takes a table's rows together where they fit."""
    heading: bool = False
    """It is a Markdown heading (:func:`~langchain_expand.text.cues.heading`): growth does not
    go up past it, since what lies above it is another section."""


Lookup = Callable[[Position], Sentence | None]
"""What growth knows of a sentence, by position (a :class:`Sentences`'s ``get``); None where it knows nothing."""


@dataclass
class Region:
    """Sentences ``[first, last)`` of one document, grown from ``seed``."""

    seed: Seed
    first: int
    last: int


Entry = tuple[float, int, int, int, int, float]
"""A heap entry: (-priority, tiebreak, seed number, index, distance, similarity of the sentence it
grew from). The tiebreaks are unique, so the order entries leave the heap does not depend on its
layout."""


class Regions:
    """One growth's regions: which region owns each sentence, each region's ends, what is wanted."""

    def __init__(
        self,
        seeds: Sequence[Seed],
        known_get: Lookup,
        k: int | None,
        max_radius: int,
        decay: float,
        weight: float,
        taken: Mapping[int, tuple[int, int]],
        stops: frozenset[int],
    ) -> None:
        self.seeds, self.known_get, self.k, self.weight, self.taken = seeds, known_get, k, weight, taken
        self.stops_up, self.stops_down = -1 in stops, 1 in stops
        self.order = itertools.count()
        # Per seed, what a neighbour's priority needs of it; the closeness prior's powers, once.
        # (The same products in the same order as written out: priorities are bit-identical.)
        self.prior = [(1 - weight) * seed.relevance for seed in seeds]
        self.powers = [decay**d for d in range(max_radius + 2)]
        self.docs = [seed.doc_id for seed in seeds]
        self.lows = [max(0, seed.index - max_radius) for seed in seeds]  # a region's reach: its document and radius
        self.highs = [min(seed.n - 1, seed.index + max_radius) for seed in seeds]
        self.owner: dict[Position, int] = {}
        self.firsts: dict[int, int] = {}  # each region's sentences, [first, last), by seed number
        self.lasts: dict[int, int] = {}
        self.wanted: dict[Position, int] = {}
        for number, (first, last) in taken.items():
            self.firsts[number], self.lasts[number] = first, last
            self.owner.update(((self.docs[number], i), number) for i in range(first, last))

    def heap(self) -> list[Entry]:
        """The first entries: every seed not taken, then the sentences beside the regions taken."""
        heap = [
            (-seed.relevance, next(self.order), number, seed.index, 0, seed.relevance)
            for number, seed in enumerate(self.seeds)
            if number not in self.taken
        ]
        for number, (first, last) in self.taken.items():  # a taken region grows on from its ends
            heap += self.beside(number, first, last, self.seeds[number].relevance)
        heapq.heapify(heap)
        return heap

    def beside(self, number: int, first: int, last: int, fallback: float) -> list[Entry]:
        """Heap entries for the free sentences just outside region ``[first, last)`` of seed ``number``.

        Each is weighed from the region's sentence at that end (its similarity, else ``fallback``);
        one not known yet is named in ``wanted``.
        """
        doc_id, seed_index, known_get = self.docs[number], self.seeds[number].index, self.known_get
        low, high, owner, prior = self.lows[number], self.highs[number], self.owner, self.prior[number]
        entries = []
        for nearby, edge in ((first - 1, first), (last, last - 1)):
            place = (doc_id, nearby)
            if not low <= nearby <= high or place in owner:
                continue
            reached = known_get((doc_id, edge))
            if nearby < edge and self.stops_up and reached is not None and reached.heading:
                continue  # the region reached its section's heading: above it is another section
            ahead = known_get(place)
            if nearby > edge and self.stops_down and ahead is not None and ahead.heading:
                continue  # the next section's heading: below it is another section
            similarity = reached.similarity if reached is not None else fallback
            if ahead is None:
                self.wanted[place] = -1 if nearby < seed_index else 1
            guess = ahead.similarity if ahead is not None else similarity
            distance = nearby - seed_index if nearby > seed_index else seed_index - nearby
            priority = self.weight * guess + prior * self.powers[distance]
            entries.append((-priority, next(self.order), number, nearby, distance, similarity))
        return entries

    def extent(
        self, number: int, index: int, distance: int, known: Sentence | None, room: int, unknown_tokens: int
    ) -> tuple[int, int, int]:
        """The sentences ``[first, last)`` that taking ``index`` adds to region ``number``, and their cost.

        Each sentence costs its tokens plus one (the separator or gap before the next); one not
        known yet costs ``unknown_tokens`` plus one. A table's rows come together where they fit
        the ``room`` left; otherwise a row comes alone.
        """
        if known is None:
            return index, index + 1, unknown_tokens + 1
        way = 0 if distance == 0 else -1 if index < self.firsts[number] else 1
        if way == 1 and not (known.tied or known.heading):  # growing down from a sentence of no table: it alone
            return index, index + 1, known.tokens + 1
        low, high = self.lows[number], self.highs[number]
        first, last, cost = _table(self.known_get, self.owner, self.docs[number], index, known, way, low, high)
        if cost > room and not (way == 1 and known.heading):  # a table that does not fit grows a row at a time
            return index, index + 1, known.tokens + 1  # (a heading below comes with its sentence, or not at all)
        return first, last, cost

    def closed(self, distance: int) -> bool:
        """A seed (``distance`` 0) can start no region: ``k`` regions are taken."""
        return distance == 0 and self.k is not None and len(self.firsts) >= self.k

    def take(self, number: int, index: int, distance: int, first: int, last: int, known: Sentence | None) -> None:
        """Give ``[first, last)`` to region ``number`` (a seed starts it)."""
        if distance == 0:
            self.firsts[number], self.lasts[number] = first, last
        elif index < self.firsts[number]:  # a region grows at one of its ends: a sentence, or a table's rows
            self.firsts[number] = first
        else:
            self.lasts[number] = last
        doc_id = self.docs[number]
        if known is None:
            self.wanted[(doc_id, index)] = -1 if index < self.seeds[number].index else 1
        if last == first + 1:  # most steps take one sentence
            self.owner[(doc_id, first)] = number
        else:
            self.owner.update(((doc_id, i), number) for i in range(first, last))


def _table(
    known_get: Lookup,
    owner: Mapping[Position, int],
    doc_id: str,
    index: int,
    here: Sentence,
    way: int,
    low: int,
    high: int,
) -> tuple[int, int, int]:
    """The table rows around sentence ``index`` (``here``) that growth heading ``way`` takes: ``(first, last, cost)``.

    ``way`` is -1 (toward the document's start), 1 (toward its end) or 0 (a seed: both). A
    row is taken with the rows tied to it (:attr:`Sentence.tied`) that are known, free and
    within ``[low, high]``; the walk up stops at a heading (growth weighs it as a next step, as
    any sentence) and never starts from one. Going down, a heading comes with the sentence after
    it (alone it says nothing: a window would end on the next section's bare heading), and a
    sentence of no table alone. Where the walk
    stops at a sentence not known yet, growth weighs that sentence next and names it as wanted.
    """
    first, last, cost = index, index + 1, here.tokens + 1
    if way <= 0 and not here.heading:  # never up past a heading
        while first > low and (doc_id, first - 1) not in owner:
            before = known_get((doc_id, first - 1))
            if before is None or not before.tied or before.heading:
                break
            first -= 1
            cost += before.tokens + 1
    if way >= 0:
        pulls = here.tied or here.heading  # a heading comes with the sentence after it: alone it says nothing
        while pulls and last <= high and (doc_id, last) not in owner:
            after = known_get((doc_id, last))
            if after is None:
                break
            last += 1
            cost += after.tokens + 1
            pulls = after.tied
    return first, last, cost
