"""Guided growth, driven for one query: what growth knows of each sentence, and its fetch rounds.

:func:`~langchain_expand.windows.growth.grow` decides; this module feeds it. Where the
columns built at the store's change mark hold it (:mod:`langchain_expand.windows.columns`), a
sentence is known the first time growth looks at it; otherwise the neighbours growth wants are fetched
and scored between rounds.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_expand.text.cues import Cues
from langchain_expand.windows.growth import Growth, grow
from langchain_expand.windows.hits import Hit
from langchain_expand.windows.plan import Plan
from langchain_expand.windows.reads import Reads
from langchain_expand.windows.regions import Lookup, Position, Seed, Sentence

__all__ = ["GROWTH_ROUNDS", "Growing"]


_RING = 4
"""Sentences fetched per neighbour guided growth asks for: it and the next three in its direction."""


GROWTH_ROUNDS = 6
"""Fetch-and-grow rounds at most per search; with everything in memory growth runs once. Each
round grows from the seeds again, knowing more; before the last, every sentence within
``max_radius`` of a seed is read (a long table grows four rows a round), so the last grows as
full knowledge does: what memory holds changes no window."""

_SEED_RING = 1
"""The sentences this far on each side of every seed, fetched before the first round (else it
guesses from its first step). Each constant here is measured in ``benchmarks/README.md``."""


class _Known:
    """What growth knows of each sentence; one held in memory is learned when growth first asks for it."""

    def __init__(self, held: Lookup | None) -> None:
        self._known: dict[Position, Sentence] = {}
        self._held = held
        self._not_held: set[Position] = set()
        if held is None:  # nothing to learn on asking: growth reads the dict itself, its hottest call
            self.get = self._known.get  # type: ignore[method-assign]

    def get(self, position: Position, /) -> Sentence | None:
        found = self._known.get(position)
        if found is None and self._held is not None and position not in self._not_held:
            found = self._held(position)
            if found is None:
                self._not_held.add(position)
            else:
                self._known[position] = found
        return found

    def learn(self, position: Position, sentence: Sentence, *, keep: bool = False) -> None:
        """Know ``sentence`` at ``position``; with ``keep``, only if nothing is known of it yet."""
        if not keep or position not in self._known:
            self._known[position] = sentence


def _sentence(tokens: int, similarity: float, cue: Cues) -> Sentence:
    """What growth knows of a sentence: its token count, its similarity to the query and its cues."""
    return Sentence(tokens, similarity, tied=cue.tied, heading=cue.heading)


class Growing:
    """One query's guided growth: what it knows of each sentence, and its fetch-and-grow rounds.

    Growth runs on what is known and names the neighbours it wants next; those (and a few
    beyond, in its direction) are fetched, scored against the query, and growth runs again,
    at most ``GROWTH_ROUNDS`` times.
    """

    def __init__(self, reads: Reads, vector: Sequence[float], plan: Plan, decay: float) -> None:
        self.reads = reads
        self.vector = vector
        self.plan = plan
        self.decay = decay
        self.known = _Known(reads.held(vector))
        self._asked: set[Position] = set()

    def seeded(self, hits: list[Hit], counts: list[int], budget: int) -> list[Hit]:
        """Learn the hits' sentences; the hits that fit ``budget`` (a window holds its hit whole)."""
        fitting: list[Hit] = []
        for hit, tokens in zip(hits, counts, strict=True):
            self._asked.add((hit.doc_id, hit.index))
            self.known.learn((hit.doc_id, hit.index), _sentence(tokens, hit.score, hit.cues), keep=True)
            if tokens <= budget:
                fitting.append(hit)
        return fitting

    def rounds(
        self,
        seeds: list[Seed],
        target: int,
        *,
        heads: list[str] | None = None,
        taken: dict[int, tuple[int, int]] | None = None,
        spent: int = 0,
    ) -> Growth:
        """Grow ``seeds`` toward ``target`` (on from ``taken``, as :func:`grow`), fetching what it wants between rounds.

        ``heads`` (documents) are read with the first fetch, for the version check; with
        columns they are read before it, since the columns serve each document at its head's revision.
        """
        sizes = {s.doc_id: s.n for s in seeds}
        ahead: list[Position] = []
        if self.reads.snapshot is None and taken is None:  # nothing known beside the seeds yet
            if self.reads.columns is not None:  # read apart: the columns know a sentence at its head's revision
                self.reads.heads(heads or ())
            else:
                ahead = [(doc_id, 0) for doc_id in heads or ()]
            ahead += [(s.doc_id, j) for s in seeds for j in _around(s.index, s.n, _SEED_RING)]
        growth: Growth | None = None
        for attempt in range(1, GROWTH_ROUNDS + 1):
            self._fetch(ahead)
            growth = grow(
                seeds,
                self.known,
                target,
                k=self.plan.k,
                max_radius=self.plan.max_radius,
                decay=self.decay,
                unknown_tokens=self.plan.policy.tokens_per_sentence,
                taken=taken,
                spent=spent,
                full=self.plan.policy.growth_full,
            )
            if not growth.wanted or attempt == GROWTH_ROUNDS:
                break  # after the last fetch nothing growth can weigh is unknown
            if attempt == GROWTH_ROUNDS - 1:  # all it can reach, so the last round knows everything
                ahead = [(s.doc_id, j) for s in seeds for j in _around(s.index, s.n, self.plan.max_radius)]
                continue
            ahead = [
                (doc, j)
                for (doc, i), way in growth.wanted.items()
                for j in range(i, i + way * _RING, way)
                if 0 <= j < sizes[doc]
            ]
        assert growth is not None  # GROWTH_ROUNDS >= 1
        return growth

    def _fetch(self, positions: list[Position]) -> None:
        """Learn the sentences at ``positions`` not known (held) or asked yet: counts, cues, similarity to the query."""
        fresh = list(dict.fromkeys(p for p in positions if p not in self._asked and self.known.get(p) is None))
        if not fresh:
            return
        self._asked.update(fresh)
        for position, tokens, similarity, cue in self.reads.similar(fresh, self.vector):
            self.known.learn(position, _sentence(tokens, similarity, cue))


def _around(index: int, n: int, reach: int) -> range:
    """The indices within ``reach`` of ``index`` in a document of ``n`` sentences."""
    return range(max(0, index - reach), min(n, index + reach + 1))
