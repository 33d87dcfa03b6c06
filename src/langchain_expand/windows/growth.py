"""Windows that grow toward the evidence: spend a token budget where relevance is highest.

Guided growth starts each hit as its own sentence and spends the budget one sentence at a
time, on the free sentence beside a region most likely to be evidence, by two signals:

- *closeness to a strong hit*: ``(hit relevance) x decay ** distance`` (evidence comes in
  runs: a discussion, a section, a table);
- *its own similarity* to the query, with a small weight, so a window grows further on its
  relevant side.

A new hit competes with the neighbours of the hits already taken: a strong hit's window grows
wide, a weak hit gets its sentence alone, or nothing. A sentence not known yet is taken on
trust and reported as ``wanted``; the caller learns it and runs growth again. A table's rows
are taken together where they fit (:attr:`Sentence.tied`); a region does not grow up past a
Markdown heading, and takes a heading below only with the sentence after it. Each default is
measured against its alternatives in ``benchmarks/README.md``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from langchain_expand.policy import BudgetPolicy
from langchain_expand.windows.regions import Entry, Lookup, Position, Region, Regions, Seed, Sentences

__all__ = [
    "DECAY_SCALE",
    "HEADING_STOPS",
    "MAX_DECAY",
    "MAX_RADIUS",
    "SIMILARITY_WEIGHT",
    "Growth",
    "decay_for",
    "grow",
]

DECAY_SCALE = 0.87
MAX_DECAY = 0.98
"""The closeness prior's factor per sentence of distance is ``1 - DECAY_SCALE / sqrt(target)``,
at most ``MAX_DECAY``: a small budget is better spent on several hits than on one hit's
neighbours, a large one holds whole runs of evidence around each hit."""
SIMILARITY_WEIGHT = 0.15
"""Weight of a neighbour's own similarity to the query, beside its closeness to a hit (one
sentence of a dialogue says little on its own)."""
HEADING_STOPS = frozenset({-1})
"""The directions in which a Markdown heading stops a region: -1, up (the text above a
section's heading is another section); not down, where its subsections follow."""
MAX_RADIUS = 32
"""A window grows at most this many sentences on each side of its hit."""


@dataclass
class Growth:
    """The regions, best seed first, and what the greedy could not see."""

    regions: list[Region]
    wanted: dict[Position, int] = field(default_factory=dict)
    """Sentences it took or weighed without knowing them, each with the direction it was heading
    (-1: toward the document's start, 1: toward its end). None wanted: the growth full knowledge gives."""
    exhausted: bool = False
    """Every seed and neighbour was used up before the target was reached."""


def decay_for(target: int) -> float:
    """The closeness prior's factor per sentence for growth toward ``target`` tokens."""
    return min(MAX_DECAY, 1 - DECAY_SCALE / math.sqrt(max(target, 1)))


def grow(
    seeds: Sequence[Seed],
    sentences: Sentences,
    target: int,
    *,
    k: int | None = None,
    max_radius: int = MAX_RADIUS,
    decay: float | None = None,
    similarity_weight: float | None = None,
    unknown_tokens: int = 15,
    taken: Mapping[int, tuple[int, int]] | None = None,
    spent: int = 0,
    full: float = BudgetPolicy.growth_full,
) -> Growth:
    """Grow regions from ``seeds`` until their sentences hold ``target`` tokens.

    Each sentence costs its tokens plus one (the separator or gap before the next). A seed
    or neighbour that does not fit what is left is passed over. Regions never overlap: a
    sentence belongs to the first region that takes it.

    A sentence not in ``sentences`` is taken on trust (``unknown_tokens`` tokens, as similar
    to the query as the sentence it was reached from) and named in ``wanted``.

    Args:
        seeds: Hits, best first, each with the relevance it starts with; their sentences
            must be in ``sentences``.
        sentences: Token count and query similarity of each sentence known so far.
        target: Tokens to gather (the caller fits the result to its budget exactly).
        k: At most this many regions; later seeds are skipped and the budget goes
            to growing the regions already taken.
        max_radius: A region reaches at most this far from its seed, on each side.
        decay: The closeness prior's factor per sentence of distance; ``decay_for(target)`` if None.
        similarity_weight: A neighbour's own similarity's weight in its priority; ``SIMILARITY_WEIGHT`` if None.
        unknown_tokens: The size assumed for a sentence not known yet.
        taken: Regions already taken, ``[first, last)`` by seed number (their seeds' hits
            inside): growth goes on from their ends. Other seeds inside them are passed over.
        spent: Tokens the ``taken`` regions already hold, counted against ``target``.
        full: Below this share of ``target`` with nothing left to take, the growth is
            ``exhausted`` (:attr:`BudgetPolicy.growth_full`).
    """
    weight = SIMILARITY_WEIGHT if similarity_weight is None else similarity_weight
    decay = decay_for(target) if decay is None else decay
    regions = Regions(seeds, sentences.get, k, max_radius, decay, weight, taken or {}, HEADING_STOPS)
    heap = regions.heap()
    used = _spend(regions, heap, spent, target, sentences.get, unknown_tokens)
    return Growth(
        regions=[Region(seeds[n], regions.firsts[n], regions.lasts[n]) for n in sorted(regions.firsts)],
        wanted=regions.wanted,
        exhausted=not heap and used < full * target,
    )


def _spend(
    regions: Regions,
    heap: list[Entry],
    used: int,
    target: int,
    known_get: Lookup,
    unknown_tokens: int,
) -> int:
    """Take ``heap``'s best entries while ``used`` is under ``target``: the tokens used then.

    An entry's sentence already owned is passed over, as is one whose piece does not fit the
    room left.
    """
    owner, docs = regions.owner, regions.docs
    push, pop = heapq.heappush, heapq.heappop
    while heap and used < target:
        _, _, number, index, distance, previous = pop(heap)
        position = (docs[number], index)
        if position in owner or (distance == 0 and regions.closed(distance)):
            continue
        known = known_get(position)
        first, last, cost = regions.extent(number, index, distance, known, target - used, unknown_tokens)
        if used + cost > target:
            continue
        entries = regions.beside(number, first, last, previous)  # from a table's end row where rows were taken
        regions.take(number, index, distance, first, last, known)
        used += cost
        for entry in entries:
            push(heap, entry)
    return used
