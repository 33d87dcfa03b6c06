"""Cutting one unit down to what fits the room left: a window by sentences around its hit, a parent around its child.

:func:`~langchain_expand.budget.fit_to_budget` keeps units in rank order; the first that does
not fit is shrunk here, never past its focus (a window's hit, a parent's best child).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from langchain_core.documents import Document

from langchain_expand.text.cues import heading
from langchain_expand.text.ranges import largest_fitting, outward
from langchain_expand.text.sentences import SentenceSplitter, Span, Splitter
from langchain_expand.text.tokens import at_least
from langchain_expand.units import (
    CHILDREN,
    CROSSED,
    END,
    HIT,
    HITS,
    SENTENCES,
    SPAN,
    START,
    TOKENS,
    TRUNCATED,
    is_window,
)

__all__ = ["FINE_UNIT_TOKENS", "shrink", "trim"]


def shrink(
    doc: Document,
    fits: Callable[[Document], bool],
    counter: Callable[[str], int],
    splitter: Splitter,
    *,
    first: bool,
    room: int | None = None,
) -> Document | None:
    """The largest trimmed version of a unit that fits and keeps its focus, or None.

    A window is trimmed by whole sentences around its hit; a parent by the splitter's
    units (sentences, whole tables and code blocks) around its best-matching child, which
    it keeps whole. Only the ``first`` unit of a context, where nothing else would be sent,
    keeps what fits of a child too large for the room: the units around one of the child's,
    the first that fits, else finer units (table rows, pieces of ``FINE_UNIT_TOKENS``)
    around one of its pieces. After it, a part of a child is a fragment that may not hold
    the words it matched on (a parent cut to 3 tokens of its child), so it is not sent;
    where the best child does not fit whole, another matched child that does is kept
    whole instead (a parent matched twice, by a table and by the sentence under it). Where
    ``fits`` is "at most ``room`` tokens" and no child can fit that (:func:`_hopeless`), the
    parent is not split at all.
    """
    if not first and room is not None and _hopeless(doc, counter, room):
        return None
    for units, focus in _cuts(doc, splitter, counter, first=first):
        cut = _largest_cut(doc, units, focus, fits, counter)
        if cut is not None:
            return cut
    return None


def _largest_cut(
    doc: Document, units: list[Span], focus: Span, fits: Callable[[Document], bool], counter: Callable[[str], int]
) -> Document | None:
    """``doc`` trimmed to the most ``units`` around ``focus`` that fit, short of all of them; or None.

    A focus whose own units do not fit costs one count.
    """
    ranges = outward(units, focus)[:-1]  # the last is every unit: the whole did not fit
    if not ranges or not fits(smallest := trim(doc, units, ranges[0], counter)):
        return None
    best = largest_fitting(ranges[1:], lambda r: fits(trim(doc, units, r, counter)))
    return smallest if best is None else trim(doc, units, ranges[best + 1], counter)


FINE_UNIT_TOKENS = 48
"""The cap on the pieces a parent is cut to when none of its matched child's own units fits
the room left (a table's rows are one unit up to the splitter's cap of 256 tokens)."""


def _cuts(
    doc: Document, splitter: Splitter, counter: Callable[[str], int], *, first: bool
) -> Iterator[tuple[list[Span], Span]]:
    """Ways to cut a unit down, the most faithful first.

    Each is the unit's trimmable pieces (absolute offsets) and the span a cut must keep: a
    parent's best child whole; for the ``first`` unit only, parts of it; then each of its
    other matched children whole.
    """
    m = doc.metadata
    if not isinstance(m.get(START), int):
        return
    base = int(m[START])
    if is_window(m):
        units = [(int(s), int(e)) for s, e in m[SENTENCES]]
        local = int(m[HIT]) - int(m[SPAN][0])
        if 0 <= local < len(units):
            yield units, units[local]
        return
    if m.get(CHILDREN):
        best, *others = [(int(c[START]), int(c[END])) for c in m[CHILDREN]]
        units = [(base + s, base + e) for s, e in splitter(doc.page_content)]
        yield units, best
        if first:
            yield from ((units, u) for u in units if _overlaps(u, best))
            fine = SentenceSplitter(max_unit_tokens=FINE_UNIT_TOKENS, token_counter=counter)
            pieces = [(base + s, base + e) for s, e in fine(doc.page_content)]
            yield from ((pieces, p) for p in pieces if _overlaps(p, best))
        end = base + len(doc.page_content)
        yield from ((units, child) for child in others if base <= child[0] and child[1] <= end)  # whole in it


def _hopeless(doc: Document, counter: Callable[[str], int], room: int) -> bool:
    """Whether every matched child of parent ``doc`` (the part of it in ``doc``) has more words than ``room``.

    A cut keeps a child whole, so it holds every word of it, and no count of a text is below its
    words (:func:`~langchain_expand.text.tokens.at_least`; 0 for a counter it does not know).
    """
    m = doc.metadata
    if is_window(m) or not m.get(CHILDREN) or not isinstance(m.get(START), int):
        return False
    base, text = int(m[START]), doc.page_content
    spans = [(max(int(c[START]) - base, 0), min(int(c[END]) - base, len(text))) for c in m[CHILDREN]]
    return all(at_least(counter, text[s:e]) > room for s, e in spans)


def _overlaps(a: Span, b: Span) -> bool:
    return a[0] < b[1] and a[1] > b[0]


def trim(doc: Document, units: Sequence[Span], kept: tuple[int, int], counter: Callable[[str], int]) -> Document:
    """``doc`` cut down to ``units[lo:hi]``, its metadata following the cut."""
    lo, hi = kept
    m = doc.metadata
    base = int(m[START])
    start, end = units[lo][0], units[hi - 1][1]
    text = doc.page_content[start - base : end - base]
    metadata = {**m, START: start, END: end, TRUNCATED: True}
    if SENTENCES in m and SPAN in m:
        first = int(m[SPAN][0]) + lo
        metadata[SPAN] = [first, first + (hi - lo)]
        metadata[SENTENCES] = [list(u) for u in units[lo:hi]]
        if HITS in m:
            metadata[HITS] = [h for h in m[HITS] if first <= h < first + (hi - lo)]
    if CROSSED in m:
        metadata[CROSSED] = sum(heading(doc.page_content[a - base : b - base]) for a, b in units[lo + 1 : hi])
    if CHILDREN in m:
        metadata[CHILDREN] = [c for c in m[CHILDREN] if c[START] < end and c[END] > start]
    if TOKENS in m:
        metadata[TOKENS] = counter(text)
    return Document(page_content=text, metadata=metadata, id=doc.id)
