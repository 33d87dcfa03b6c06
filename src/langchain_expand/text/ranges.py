"""Index ranges: a window around a hit, and ranges that widen outward from a focus.

These are the arithmetic under windows and budgets, apart from any Document: a window is
``[first, last + 1)`` clamped to the document, and trimming a unit to a budget walks the
ranges :func:`outward` lists, the largest that fits found by :func:`largest_fitting`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

__all__ = ["largest_fitting", "outward", "window_bounds"]


def window_bounds(hit: int, n: int, before: int, after: int) -> tuple[int, int]:
    """The ``[first, last + 1)`` sentence range of the window around ``hit``.

    Clamped at the ends of a document of ``n`` sentences.
    """
    return max(0, hit - before), min(n, hit + after + 1)


def outward(units: Sequence[tuple[int, int]], focus: tuple[int, int]) -> list[tuple[int, int]]:
    """Ranges ``[lo, hi)`` of ``units`` from those covering ``focus`` outward.

    Each step adds one unit, the nearer side first (before on a tie), so read backwards
    the list trims the unit farthest from the focus first. The last range is all units.
    """
    n = len(units)
    if n == 0:
        return []
    inside = [i for i, (s, e) in enumerate(units) if s < focus[1] and e > focus[0]]
    if not inside:  # the focus falls between units: take the nearest one
        inside = [min(range(n), key=lambda i: abs(units[i][0] - focus[0]))]
    first, last = inside[0], inside[-1] + 1
    lo, hi = first, last
    ranges = [(lo, hi)]
    while lo > 0 or hi < n:
        if lo > 0 and (hi >= n or first - lo <= hi - last):
            lo -= 1
        else:
            hi += 1
        ranges.append((lo, hi))
    return ranges


def largest_fitting(ranges: Sequence[T], ok: Callable[[T], bool]) -> int | None:
    """The index of the last item of ``ranges`` for which ``ok`` holds, ``ok`` being monotone (true, then false)."""
    lo, hi, best = 0, len(ranges) - 1, None
    while lo <= hi:
        mid = (lo + hi) // 2
        if ok(ranges[mid]):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best
