"""Packing units into a budget: which units are kept, and which are shrunk to fit.

The policy (:func:`~langchain_expand.budget.fit_to_budget`'s): units in rank order, one that
does not fit is shrunk around its focus (:func:`~langchain_expand.shrink.shrink`), and smaller,
lower-ranked units still get their turn. :func:`pack_exactly` takes every decision on an exact
count of the joined context; :func:`pack_plain`, for units joined by a plain separator, on the
sum of their own counts, which is linear in the context, and settles exactly at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from langchain_core.documents import Document

from langchain_expand.shrink import shrink
from langchain_expand.text.sentences import Splitter
from langchain_expand.text.tokens import count_many, separator_cost, starts_token
from langchain_expand.units import TOKENS

__all__ = ["Context", "Packed", "pack_exactly", "pack_plain"]


class Context:
    """The joined context of some units, counted against one limit; each distinct text once."""

    def __init__(self, render: Callable[[Sequence[Document]], str], count: Callable[[str], int], limit: int) -> None:
        self.render = render
        self.limit = limit
        self._count = count
        self._counted: dict[str, int] = {}  # the same context is often asked for twice (the final report)

    def size(self, text: str) -> int:
        """The count of ``text`` (a context as rendered), each distinct text counted once."""
        if text not in self._counted:
            self._counted[text] = self._count(text)
        return self._counted[text]

    def known(self, units: Sequence[Document], size: int) -> None:
        """Record the exact count of ``units`` joined, where it follows from theirs."""
        self._counted[self.render(units)] = size

    def fits(self, units: Sequence[Document]) -> bool:
        """Whether ``units`` joined fit the limit."""
        return self.size(self.render(units)) <= self.limit

    def check_room(self) -> None:
        """Raise where the prompt around the context is already over the limit."""
        if not self.fits([]):
            msg = (
                f"The prompt without any context is already {self.size(self.render([]))} tokens, over the "
                f"budget of {self.limit}. Raise `max_tokens` or shorten the prompt, history or question."
            )
            raise ValueError(msg)

    def fits_after(self, prefix: list[Document], unit: Document) -> bool:
        """Whether ``unit`` fits after ``prefix``."""
        return self.fits([*prefix, unit])


def pack_plain(
    documents: Sequence[Document],
    context: Context,
    counter: Callable[[str], int],
    separator: str,
    splitter: Splitter,
    counts: Sequence[int] | None,
    counts_exact: bool,
) -> list[tuple[int, Document]]:
    """Units joined by a plain separator: packed by their own counts, then checked exactly."""
    sizes = count_many(counter, [d.page_content for d in documents]) if counts is None else counts
    kept, total = _pack_by_parts(documents, sizes, context.limit, counter, separator, splitter)
    if total is not None and (counts is None or counts_exact):
        context.known([d for _, d in kept], total)  # the joined count, exactly: no need to count it
    if not context.fits([d for _, d in kept]):  # the parts' sum fell short: settle the last units exactly
        ranks = [rank for rank, _ in kept]
        settled = pack_exactly([d for _, d in kept], context.fits, context.fits_after, counter, splitter)
        kept = [(ranks[i], d) for i, d in settled]
    return kept


Packed = list[tuple[int, Document]]
"""Kept units (some shrunk), each with its rank in the input."""


def pack_exactly(
    documents: Sequence[Document],
    fits: Callable[[Sequence[Document]], bool],
    fits_after: Callable[[list[Document], Document], bool],
    counter: Callable[[str], int],
    splitter: Splitter,
) -> Packed:
    """The packing policy, every decision taken on an exact count of the joined context."""
    fitting = _fitting_prefix(documents, fits)
    kept: Packed = list(enumerate(documents[:fitting]))
    for rank, doc in enumerate(documents[fitting:], fitting):
        current = [d for _, d in kept]
        if fits([*current, doc]):
            kept.append((rank, doc))
            continue
        smaller = shrink(doc, partial(fits_after, current), counter, splitter, first=not kept)
        if smaller is not None:
            kept.append((rank, smaller))
    return kept


def _pack_by_parts(
    documents: Sequence[Document],
    sizes: Sequence[int],
    limit: int,
    counter: Callable[[str], int],
    separator: str,
    splitter: Splitter,
) -> tuple[Packed, int | None]:
    """The same policy, each decision taken on the sum of the parts' counts.

    Counting every unit once (and each shrunk candidate alone) is linear in the context,
    where the exact policy counts the joined context for every unit and every shrink step.
    A separator is counted with the end of the unit before it (:func:`separator_cost`): with
    tiktoken's encodings the sum is then the joined count, provably so for cl100k_base and
    o200k_base with a line-break separator (one token less per separator than alone was up
    to 10 short on the dev corpora). Returns the kept units and, where the sum is proven to
    be the joined count (given exact ``sizes``), that sum; else None, and the caller counts
    the result and settles any excess with the exact policy, over these few units only.
    """
    kept: Packed = []
    used = 0
    proven = True
    joint, joint_exact = 0, True  # what the separator after the last unit kept adds, once another follows

    for rank, (doc, tokens) in enumerate(zip(documents, sizes, strict=True)):
        gap = joint if kept else 0
        room = limit - used - gap
        unit = doc
        if tokens > room:
            smaller = shrink(doc, partial(_fits_in, room, counter), counter, splitter, first=not kept, room=room)
            if smaller is None:
                continue
            unit, tokens = smaller, _counted(smaller, counter)
        if kept:
            proven = proven and joint_exact and starts_token(unit.page_content)
        used += gap + tokens
        kept.append((rank, unit))
        joint, joint_exact = separator_cost(counter, unit.page_content, separator)
    return kept, used if proven else None


def _counted(doc: Document, counter: Callable[[str], int]) -> int:
    """A unit's count: its ``tokens`` where :func:`trim` just counted them, else counted now."""
    tokens = doc.metadata.get(TOKENS)
    return tokens if isinstance(tokens, int) else counter(doc.page_content)


def _fits_in(room: int, counter: Callable[[str], int], doc: Document) -> bool:
    return _counted(doc, counter) <= room


def _fitting_prefix(documents: Sequence[Document], fits: Callable[[Sequence[Document]], bool]) -> int:
    """How many leading units fit together, found with few counts of the joined text.

    Usually all of them do, and one count settles it; otherwise a binary search over
    prefix lengths costs log2(n) counts instead of one per unit. Each count is exact, so
    whatever prefix this returns fits, even where tokenization is not quite monotone.
    """
    if fits(documents):
        return len(documents)
    fitting, failing = 0, len(documents)  # fits(documents[:fitting]) and not fits(documents[:failing])
    while failing - fitting > 1:
        middle = (fitting + failing) // 2
        if fits(documents[:middle]):
            fitting = middle
        else:
            failing = middle
    return fitting
