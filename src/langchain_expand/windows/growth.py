"""Windows that grow toward the evidence: spend a token budget where relevance is highest.

A fixed window gives every hit the same ``before``/``after`` sentences, whether they hold
evidence or not. Guided growth starts each hit as its own sentence and spends the budget one
sentence at a time, always on the sentence, among those next to what is already taken, most
likely to be evidence. That likelihood is estimated from two signals the store already holds:

- *closeness to a strong hit*: ``(hit relevance) x decay ** distance``. Evidence comes in runs
  (a discussion, a section, a table), so a sentence next to a strong hit is likely evidence
  even when it shares no words with the query;
- *its own similarity* to the query (the cosine of its stored vector), with a small weight:
  a window grows further on its relevant side and stops on an irrelevant one.

A new hit competes with the neighbours of the hits already taken, so a strong hit's window
grows wide while a weak hit gets its sentence alone, or nothing. The greedy works on a
partial view: a sentence whose vector has not been fetched yet is reported as ``wanted`` and
the caller fetches more and runs it again (it is cheap: everything is in memory).

A table is matched row by row (``SentenceSplitter(table_rows=True)``, the window retriever's
default) but sent whole: a row and the rows tied to it (:attr:`Sentence.tied`) are taken in
one step where they all fit the room left, within the radius; otherwise its rows grow one at
a time.

A region does not grow up past a Markdown heading: the text above a section's heading is
another section. It may grow down into the next section (a section's subsections follow it,
and a question's evidence may run on), taking a heading with the sentence after it: alone, at
a window's end, a heading says nothing. Each default here was measured against its
alternatives on the evidence benchmark: ``benchmarks/README.md``, "Defaults and what they
were measured against".
"""

from __future__ import annotations

import copy
import heapq
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from langchain_expand.policy import BudgetPolicy

__all__ = [
    "DECAY_SCALE",
    "HEADING_STOPS",
    "MAX_DECAY",
    "MAX_RADIUS",
    "SIMILARITY_WEIGHT",
    "Growth",
    "Region",
    "Seed",
    "Sentence",
    "Sentences",
    "decay_for",
    "grow",
]

DECAY_SCALE = 0.87
MAX_DECAY = 0.98
"""The closeness prior's factor per sentence of distance is ``decay_for(target)``:
``1 - DECAY_SCALE / sqrt(target)``, at most ``MAX_DECAY``. It is 0.95 for a 250-token budget,
0.965 for 500, 0.975 for 1,000 and 0.98 from 2,000 up (a budget's growth target is 1.2x it).
A small budget holds a dozen sentences, better spent on several hits than on one hit's
neighbours; a large one holds whole runs of evidence around each hit, so no fixed factor
serves both."""
SIMILARITY_WEIGHT = 0.15
"""Weight of a neighbour's own similarity to the query, beside its closeness to a hit: a
single sentence of a dialogue or transcript says little on its own, so it weighs little."""
HEADING_STOPS = frozenset({-1})
"""The directions in which a Markdown heading stops a region: -1, up (the text above a
section's heading is another section). Down (1) as well was measured and lost on the evidence
benchmark: a section's subsections follow its heading, and evidence runs on into them."""
MAX_RADIUS = 32
"""A window grows at most this many sentences on each side of its hit (the closeness prior,
not the radius, usually ends growth first)."""

Position = tuple[str, int]
"""A sentence: its document's id and its index in the document."""


class Sentences(Protocol):
    """What growth reads each sentence's figures from: a ``dict`` will do."""

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


@dataclass
class Region:
    """Sentences ``[first, last)`` of one document, grown from ``seed``."""

    seed: Seed
    first: int
    last: int


@dataclass
class Growth:
    """The regions, best seed first, and what the greedy could not see."""

    regions: list[Region]
    wanted: dict[Position, int] = field(default_factory=dict)
    """Sentences it looked at (took, or weighed as a next step) but has no vector or token count
    for, each with the direction growth was heading in (-1: toward the document's start, 1:
    toward its end). When nothing is wanted, every figure growth used was known: it is the
    growth it would have made knowing every sentence."""
    exhausted: bool = False
    """Every seed and neighbour was used up before the target was reached."""
    paused: Paused | None = field(default=None, compare=False, repr=False)
    """Where this growth first weighed a sentence it did not know: run again on more knowledge
    (``resume``), growth starts there instead of at the seeds. None when it needed nothing it did
    not know, or from its first step."""


class Paused:
    """A growth's state just before its first step that weighed a sentence not known.

    Every step before it used known figures only, so a growth of the same seeds toward the same
    target that knows more (and nothing different) makes those same steps: it may start here.
    Guided growth runs in fetch rounds; each round goes on from where the last one first had to
    guess, instead of growing from the seeds again.
    """

    __slots__ = ("_heap", "_regions", "_used")

    def __init__(self, regions: _Regions, heap: list[Entry], entry: Entry, used: int) -> None:
        self._regions = regions.copy()
        self._heap = [*heap, entry]  # the step's own entry goes back: the step is made again
        heapq.heapify(self._heap)
        self._used = used

    def restart(self, known_get: Callable[[Position], Sentence | None]) -> tuple[_Regions, list[Entry], int]:
        """A copy of the state, reading sentences through ``known_get`` (so it may restart again)."""
        regions = self._regions.copy()
        regions.known_get = known_get
        return regions, list(self._heap), self._used


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
    resume: Paused | None = None,
) -> Growth:
    """Grow regions from ``seeds`` until their sentences hold ``target`` tokens.

    Each sentence costs its tokens plus one (the separator or gap before the next). A seed
    or neighbour that does not fit what is left is passed over. Regions never overlap: a
    sentence belongs to the first region that takes it.

    A sentence not in ``sentences`` yet is taken on trust (``unknown_tokens`` tokens, as
    similar to the query as the sentence it was reached from) and named in ``wanted``, so
    the caller fetches exactly what this growth used and runs it again. ``sentences`` may
    learn a sentence when it is first asked for (its ``get``): growth asks only for
    sentences it weighs.

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
        resume: The :attr:`Growth.paused` of an earlier growth with the same arguments whose
            ``sentences`` knew less (and nothing different): this one starts there.
    """
    if resume is None:
        weight = SIMILARITY_WEIGHT if similarity_weight is None else similarity_weight
        decay = decay_for(target) if decay is None else decay
        regions = _Regions(seeds, sentences.get, k, max_radius, decay, weight, taken or {})
        heap, used = regions.heap(), spent
    else:
        regions, heap, used = resume.restart(sentences.get)
    used, paused = _spend(regions, heap, used, target, sentences.get, unknown_tokens)
    return Growth(
        regions=[Region(seeds[n], regions.firsts[n], regions.lasts[n]) for n in sorted(regions.firsts)],
        wanted=regions.wanted,
        exhausted=not heap and used < full * target,
        paused=paused,
    )


def _spend(
    regions: _Regions,
    heap: list[Entry],
    used: int,
    target: int,
    known_get: Callable[[Position], Sentence | None],
    unknown_tokens: int,
) -> tuple[int, Paused | None]:
    """Take ``heap``'s best entries while ``used`` is under ``target``: the tokens used then, and where it paused.

    An entry's sentence already owned is passed over, as is one whose piece does not fit the
    room left. Growth pauses (:class:`Paused`) at the first step that weighs a sentence not known.
    """
    owner, docs = regions.owner, regions.docs
    push, pop = heapq.heappush, heapq.heappop
    paused: Paused | None = None
    sure = not regions.wanted  # no step so far weighed a sentence not known
    while heap and used < target:
        step = pop(heap)
        _, _, number, index, distance, previous = step
        position = (docs[number], index)
        if position in owner or (distance == 0 and regions.closed(distance)):
            continue
        known = known_get(position)
        first, last, cost = regions.extent(number, index, distance, known, target - used, unknown_tokens)
        if used + cost > target:
            if sure and known is None:  # passed over on a guessed size
                paused, sure = Paused(regions, heap, step, used), False
            continue
        # The sentences beside the piece taken, weighed before it is taken (taking it changes
        # nothing they read), so a guess among them pauses here, before any change.
        entries = regions.beside(number, first, last, previous)  # from a table's end row where rows were taken
        if sure and (known is None or regions.wanted):
            paused, sure = Paused(regions, heap, step, used), False
        regions.take(number, index, distance, first, last, known)
        used += cost
        for entry in entries:
            push(heap, entry)
    return used, paused


Entry = tuple[float, int, int, int, int, float]
"""A heap entry: (-priority, tiebreak, seed number, index, distance, similarity of the sentence it
grew from). The tiebreaks are unique, so the order entries leave the heap does not depend on its
layout."""


class _Regions:
    """One growth's regions: which region owns each sentence, each region's ends, what is wanted."""

    def __init__(
        self,
        seeds: Sequence[Seed],
        known_get: Callable[[Position], Sentence | None],
        k: int | None,
        max_radius: int,
        decay: float,
        weight: float,
        taken: Mapping[int, tuple[int, int]],
    ) -> None:
        self.seeds, self.known_get, self.k, self.weight, self.taken = seeds, known_get, k, weight, taken
        self.stops_up, self.stops_down = -1 in HEADING_STOPS, 1 in HEADING_STOPS  # read per growth: explore.py sets it
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

    def copy(self) -> _Regions:
        """A copy whose regions change apart from this one's (what growth has not taken is shared)."""
        twin = copy.copy(self)
        twin.owner, twin.firsts, twin.lasts, twin.wanted = dict(self.owner), dict(self.firsts), dict(self.lasts), {}
        return twin


def _table(
    known_get: Callable[[Position], Sentence | None],
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
