"""A call's windows from its hits: fixed around the ``k`` best, as many as a budget holds, or grown toward the evidence.

The retriever decides what the query searches (:mod:`.retriever`); this turns the ranking into
windows by the call's :class:`~langchain_expand.windows.plan.Plan`, one function a window
shape, and fits them to the budget exactly (:func:`~langchain_expand.budget.fit_counted`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from langchain_core.documents import Document

from langchain_expand.budget import fit_counted
from langchain_expand.store.adapters.base import matched
from langchain_expand.store.search import VectorSearch, overfetch
from langchain_expand.units import DOC_ID, HIT, SPAN
from langchain_expand.windows.assembly import assemble, by_sections, runs_of
from langchain_expand.windows.growth import Growth, decay_for
from langchain_expand.windows.guided import Growing
from langchain_expand.windows.hits import Ranking
from langchain_expand.windows.plan import Plan, Unit, absorb, covers, hits_for, seeds_of
from langchain_expand.windows.reads import Reads
from langchain_expand.windows.regions import Position

__all__ = ["answer", "budgeted"]

logger = logging.getLogger(__name__)
_SHORT = (
    "%d of k=%d windows: the store's index matched %d records that are no longer stored (deleted by another "
    "process; an embedded Chroma's index catches up when this process reopens it)."
)


def answer(
    plan: Plan, ranking: Ranking, dense: VectorSearch, reads: Reads, counter: Callable[[str], int]
) -> list[Document]:
    """The call's windows by its plan, from ``ranking``'s hits: guided, budget-driven or ``k`` fixed.

    ``counter`` counts each window's tokens, and the budget's.
    """
    if plan.shape == "guided":
        return _grown(ranking, dense, plan, reads, counter)
    if plan.budget_decides:
        return budgeted(_fill(ranking, plan, reads, counter), plan.max_tokens, counter)
    return _fixed(ranking, plan, reads, counter)


def _fixed(ranking: Ranking, plan: Plan, reads: Reads, counter: Callable[[str], int]) -> list[Document]:
    """The windows of the ``k`` best hits (merged windows count once), fitted to the budget where there is one.

    Fewer than ``k`` merged windows that hold twice the sentences ``k`` windows would are the
    answer: a document whose every sentence is a hit would otherwise chain into one window of it all.
    """
    assert plan.k is not None
    units: list[Unit] = []
    dropped = 0
    for hits in overfetch(ranking, plan.first_fetch(), plan.k):
        units = plan.units(plan.taken(hits))
        dropped = matched(hits) - len(hits)
        if len(units) >= plan.k or sum(u.last - u.first for u in units) >= 2 * plan.k * plan.sentences_per_window:
            break
    if len(units) < plan.k and dropped:
        logger.warning(_SHORT, len(units), plan.k, dropped)
    units = units[: plan.k]
    return budgeted(assemble(units, runs_of(reads, units), counter, plan.skipped), plan.max_tokens, counter)


def _fill(ranking: Ranking, plan: Plan, reads: Reads, counter: Callable[[str], int]) -> list[Document]:
    """Windows of the best hits, as many as it takes to hold the budget.

    Hits are taken in rank order: the shortest prefix of the ranking whose windows reach
    the policy's ``fixed_target`` (by the sentences' own token counts). The search goes further while
    even all its hits fall short, until the relevance floor cuts the ranking (the evidence
    ran out) or the store has no more. Sentences counted in one round are not read again in
    the next; the caller fits the windows to the budget exactly.
    """
    budget = plan.max_tokens
    assert budget is not None
    sizes: dict[Position, int] = {}
    asked: set[Position] = set()
    units: list[Unit] = []
    first = plan.first_fetch()
    for hits in overfetch(ranking, first, first):
        taken = plan.taken(hits)
        spans = {(u.doc_id, i): None for u in plan.units(taken) for i in range(u.first, u.last)}  # windows may overlap
        wanted = [p for p in spans if p not in asked]
        asked.update(wanted)
        sizes.update(reads.sizes(wanted))
        needed = hits_for(plan.policy.fixed_target(budget), taken, plan, sizes)
        units = plan.units(taken[:needed])
        if len(taken) < len(hits) or needed < len(taken):
            break
    return assemble(units, runs_of(reads, units), counter, plan.skipped)


def _grown(
    ranking: Ranking, dense: VectorSearch, plan: Plan, reads: Reads, counter: Callable[[str], int]
) -> list[Document]:
    """Windows grown from the best hits toward the evidence, fitted to the budget.

    Hits are searched as in :func:`_fill`; a hit's own relevance is its score in the ranking.
    Growth gathers the policy's ``guided_target`` (:class:`Growing`) and the windows are
    fitted to the budget exactly. Where that leaves more than ``1 - top_up`` of it free
    (a hit or a window's last sentences too big for the room left: long table rows), growth
    goes on from the windows kept into the room left, and the result is kept if it holds
    more and all they held.
    """
    budget = plan.max_tokens
    assert budget is not None
    vector = dense.vector()
    assert vector is not None  # _shape chose "fixed" for a store without embeddings
    target = plan.policy.guided_target(budget)
    growing = Growing(reads, vector, plan, decay_for(target))

    def fitted(growth: Growth) -> tuple[list[Document], int]:
        units = plan.joined([(by_seed[r.seed], r.first, r.last) for r in growth.regions])
        absorb(units, hits)
        kept, used = fit_counted(assemble(units, runs_of(reads, units), counter, plan.skipped), budget, counter)
        kept, cut = by_sections(kept, counter)
        if cut:  # counted again: a cut is smaller, and the count says so exactly
            kept, used = fit_counted(kept, budget, counter)
        return kept, used or 0

    first = plan.first_fetch()
    for found in overfetch(ranking, first, first):
        above = plan.taken(found)
        hits = growing.seeded(above, ranking.tokens(above), budget)
        by_seed = seeds_of(hits)
        seeds = list(by_seed)
        growth = growing.rounds(seeds, target, heads=[h.doc_id for h in hits])
        if not growth.exhausted or len(above) < len(found):
            break
    windows, used = fitted(growth)
    if used < plan.policy.top_up * budget and not plan.skipped:
        numbers = {(s.doc_id, s.index): n for n, s in enumerate(seeds)}
        taken = {numbers[w.metadata[DOC_ID], w.metadata[HIT]]: tuple(w.metadata[SPAN]) for w in windows}
        more, more_used = fitted(growing.rounds(seeds, budget, taken=taken, spent=used))
        if more_used > used and covers(more, windows):
            return more
    return windows


def budgeted(windows: list[Document], max_tokens: int | None, counter: Callable[[str], int]) -> list[Document]:
    """The windows that fit the budget, if there is one (their counts are ``assemble``'s, exact)."""
    return fit_counted(windows, max_tokens, counter)[0]
