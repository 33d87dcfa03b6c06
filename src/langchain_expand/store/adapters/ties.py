"""Ties at the ``k``-th: the one rule by which every path orders results equal in distance.

A repeated sentence ("Okay.", a log line) is stored many times with one vector, so its copies
tie. A store's index hands ties back in an order of its own and, where a tie straddles the
``k``-th, keeps whichever it met first; the exact search in memory cannot know either. Every
path therefore orders equal results (to ``TIES`` decimals) by document id, then position
(:func:`tie_key`), and a store's search is asked far enough to see the tie (:func:`nearest`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TypeVar

from langchain_expand.store.records import unit_position

__all__ = ["MAX_SEARCH", "TIES", "TIE_GROWTH", "nearest", "tie_key", "tie_ordered"]

MAX_SEARCH = 100_000
"""The most matches one search asks a store for, whatever the budget (a budget of 10**12 tokens
asked Chroma for more results than its integer type holds)."""

TIES = 6
"""Decimals to which two distances (or relevances) are equal: a repeated sentence's copies differ
in the last bits of a float32 sum, and each path (the store's index, the snapshot's exact
search) computes them its own way."""

TIE_GROWTH = 8
"""How many times more a search asks while its last result still ties the ``k``-th (a sentence repeated many
times: a meeting's "Okay.", a log line); more cost Chroma little (benchmarks/README.md, "Scale")."""

F = TypeVar("F")


def nearest(
    fetch: Callable[[int], Sequence[tuple[F, float]]],
    k: int,
    id_of: Callable[[F], str | None],
    spare: int = 0,
    beam: int = 0,
) -> list[tuple[F, float]]:
    """The ``k`` nearest of what ``fetch(n)`` finds (each with its distance: lower is nearer), ties in units' order.

    One more than ``k`` is asked (and ``spare`` more, where a result costs the store little),
    and ``TIE_GROWTH`` times as many while the last still ties the ``k``-th; ties go by
    :func:`tie_key`, the snapshot's rule, so a repeated sentence brings the same hit whichever
    path answers.

    ``beam``: how many results the store's search looks at whatever fewer are asked (Chroma's
    ``ef_search``), 0 where not known. A tie is completed up to it and no further: a larger
    search is another search, with a wider beam, which may find nearer results this one missed
    (an index's miss, which the raw search makes too) and costs more the wider it is
    (benchmarks/README.md, "Scale").
    """
    asked = min(k + 1 + spare, MAX_SEARCH)
    reach = min(max(beam, asked), MAX_SEARCH) if beam > 0 else MAX_SEARCH
    while True:
        found = list(fetch(asked))
        rounded = [round(distance, TIES) for _, distance in found]
        if any(a >= b for a, b in itertools.pairwise(rounded)):  # most searches have no tie: nothing to sort
            found.sort(key=lambda pair: (round(pair[1], TIES), tie_key(id_of(pair[0]))))
            rounded.sort()
        if k < 1 or len(found) < asked or asked >= reach or rounded[-1] > rounded[k - 1]:
            return found[:k]
        asked = min(TIE_GROWTH * asked, reach)


def tie_ordered(found: Sequence[tuple[F, float]], id_of: Callable[[F], str | None]) -> list[tuple[F, float]]:
    """``found`` best first by relevance, results equal to ``TIES`` decimals in their units' order (:func:`tie_key`)."""
    return sorted(found, key=lambda pair: (-round(pair[1], TIES), tie_key(id_of(pair[0]))))


def tie_key(unit: str | None) -> tuple[str, int]:
    """Where a unit id stands among equal results: its document's id, then its position."""
    position = unit_position(unit or "")
    return position if position is not None else (unit or "", -1)
