"""One call's plan: its settings, checked, and how a budget turns ranked hits into windows.

How far the budget reaches (how many hits a first search asks for, how much is gathered
before the exact fit, when guided windows grow on into room left) is the retriever's
:class:`~langchain_expand.policy.BudgetPolicy`, which the plan carries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document

from langchain_expand import rules
from langchain_expand.policy import BudgetPolicy
from langchain_expand.store.adapters.ties import TIES
from langchain_expand.text.ranges import largest_fitting, window_bounds
from langchain_expand.units import DOC_ID, SPAN
from langchain_expand.windows.growth import MAX_RADIUS
from langchain_expand.windows.hits import Hit
from langchain_expand.windows.regions import Position, Seed

__all__ = [
    "DEFAULT_K",
    "DEFAULT_SIDE",
    "RULES",
    "Plan",
    "Unit",
    "absorb",
    "check_window",
    "covers",
    "hits_for",
    "plan_call",
    "seeds_of",
]


@dataclass
class Unit:
    """A window: sentences ``[first, last)`` of one document, and the hits inside it."""

    doc_id: str
    first: int
    last: int
    n: int
    hits: list[Hit]


@dataclass(frozen=True)
class Plan:
    """One call's settings, checked, and how they turn ranked hits into units."""

    k: int | None
    """The most units; None: as many as ``max_tokens`` holds."""
    before: int
    after: int
    merge: bool
    merge_gap: int
    max_tokens: int | None
    score_threshold: float | None = None
    relative_score_threshold: float | None = None
    shape: str = "fixed"
    """"fixed": ``before``/``after`` around every hit; "guided": grown toward the evidence."""
    max_radius: int = MAX_RADIUS
    policy: BudgetPolicy = field(default_factory=BudgetPolicy)
    """How far the budget reaches: the retriever's ``budget_policy``."""
    excluded: frozenset[str] = frozenset()
    """Documents whose hits are passed over: found half-written earlier in this call."""
    skipped: set[str] = field(default_factory=set)
    """Documents this answer skipped because the store held no whole version of them."""

    @property
    def sentences_per_window(self) -> int:
        """A fixed window's sentences: its hit and ``before`` and ``after`` it."""
        return self.before + 1 + self.after

    @property
    def budget_decides(self) -> bool:
        """No ``k``: hits are taken in rank order until the budget is full or evidence runs out."""
        return self.k is None

    def taken(self, hits: list[Hit]) -> list[Hit]:
        """The hits above the relevance floor: where the evidence runs out, the rest stop."""
        if not hits:
            return hits
        floor = max(
            self.score_threshold if self.score_threshold is not None else float("-inf"),
            hits[0].score * self.relative_score_threshold if self.relative_score_threshold is not None else -1e9,
        )
        return [h for h in hits if h.score >= floor and h.doc_id not in self.excluded]

    def units(self, hits: list[Hit]) -> list[Unit]:
        """One unit per hit, or, when merging, one per group of overlapping windows."""
        return self.joined([(hit, *window_bounds(hit.index, hit.n, self.before, self.after)) for hit in hits])

    def joined(self, spans: list[tuple[Hit, int, int]]) -> list[Unit]:
        """Each hit's sentences ``[first, last)`` as a unit; merged, when merging, where they touch."""
        units: list[Unit] = []
        by_doc: dict[str, list[Unit]] = {}  # each document's units, in the order of ``units``
        gone: set[int] = set()  # units absorbed by another, by id()
        gap = self.merge_gap
        for hit, first, last in spans:
            same = by_doc.setdefault(hit.doc_id, [])
            joined = [u for u in same if first <= u.last + gap and u.first <= last + gap] if self.merge else []
            if not joined:
                unit = Unit(hit.doc_id, first, last, hit.n, [hit])
                units.append(unit)
                same.append(unit)
                continue
            keep = joined[0]  # the best-ranked unit absorbs the others
            keep.first = min([first] + [u.first for u in joined])
            keep.last = max([last] + [u.last for u in joined])
            keep.hits = by_score([*keep.hits, *(h for u in joined[1:] for h in u.hits), hit])
            if len(joined) > 1:
                gone.update(id(u) for u in joined[1:])
                same[:] = [u for u in same if id(u) not in gone]
        return [u for u in units if id(u) not in gone]

    def first_fetch(self) -> int:
        """Hits asked of the first search: ``k`` (2k when merging), or what the budget may hold."""
        if self.shape == "guided":
            assert self.max_tokens is not None
            return self.policy.guided_first_fetch(self.max_tokens)
        if self.k is None:
            assert self.max_tokens is not None
            return self.policy.fixed_first_fetch(self.max_tokens, self.sentences_per_window)
        return 2 * self.k if self.merge else self.k


DEFAULT_K = 4
"""Windows returned when neither ``k`` nor a budget says how many."""
DEFAULT_SIDE = 2
"""Sentences each side of a fixed window's hit where neither the call nor the retriever sets ``before``/``after``."""


def hits_for(budget: int, taken: list[Hit], plan: Plan, sizes: dict[Position, int]) -> int:
    """How many of the ranked hits it takes for their windows to reach ``budget`` tokens.

    Sizes are the sentences' own token counts (the gaps between them are left out), so the
    windows may run a little over; fitting them to the budget is exact. All of them when
    even all fall short.
    """

    def size(n: int) -> int:
        return sum(sizes.get((u.doc_id, i), 0) for u in plan.units(taken[:n]) for i in range(u.first, u.last))

    counts = list(range(1, len(taken) + 1))
    last_needed = largest_fitting(counts, lambda n: size(n - 1) < budget)
    return len(taken) if last_needed is None else counts[last_needed]


def covers(windows: list[Document], others: list[Document]) -> bool:
    """Every sentence of ``others`` is in one of ``windows``."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for w in windows:
        spans.setdefault(w.metadata[DOC_ID], []).append(tuple(w.metadata[SPAN]))
    return all(
        any(a <= o.metadata[SPAN][0] and o.metadata[SPAN][1] <= b for a, b in spans.get(o.metadata[DOC_ID], ()))
        for o in others
    )


_TIE = 10.0**-TIES
"""Two scores closer than this are one score computed two ways (:data:`~langchain_expand.store.adapters.ties.TIES`)."""


def absorb(units: list[Unit], hits: list[Hit]) -> None:
    """List in each unit every hit inside it, also those another hit's growth reached first."""
    by_doc: dict[str, list[Hit]] = {}
    for hit in hits:
        by_doc.setdefault(hit.doc_id, []).append(hit)
    for unit in units:
        inside = [h for h in by_doc.get(unit.doc_id, ()) if unit.first <= h.index < unit.last]
        listed = {h.index for h in unit.hits}
        unit.hits = by_score([*unit.hits, *(h for h in inside if h.index not in listed)])


def by_score(hits: list[Hit]) -> list[Hit]:
    """One unit's hits, best score first; scores within ``10**-TIES`` of the next (a run of them) by position.

    A repeated line scores as its twin up to the last bits of the sum each path computes, so
    ties are runs of near scores, not bins; the order they were found in differs by path,
    their positions do not.
    """
    ranked = sorted(hits, key=lambda h: -h.score)
    ordered: list[Hit] = []
    run: list[Hit] = []
    for hit in ranked:
        if run and run[-1].score - hit.score > _TIE:
            ordered += sorted(run, key=lambda h: h.index)
            run = []
        run.append(hit)
    return ordered + sorted(run, key=lambda h: h.index)


def seeds_of(hits: list[Hit]) -> dict[Seed, Hit]:
    """Growth's seeds, in rank order.

    A seed's relevance is a hit's score, reassigned in rank order (the best score to the
    first hit, and so on): the ranking (dense, or fused with BM25) decides the order, the
    scores the scale that neighbours' similarities are compared on.
    """
    scores = sorted((h.score for h in hits), reverse=True)
    return {Seed(h.doc_id, h.index, h.n, s): h for h, s in zip(hits, scores, strict=True)}


def check_window(window: object) -> None:
    """Refuse a ``window`` that is not one of the shapes, naming them."""
    if window not in (None, "guided", "fixed"):
        msg = f"`window` must be 'guided', 'fixed' or None (guided when there is a budget), got {window!r}."
        raise ValueError(msg)


def plan_call(fields: Any, given: dict[str, Any], *, has_embeddings: bool) -> Plan:
    """A call's plan: each setting the call ``given`` (not None), else the retriever's ``fields``; checked.

    ``has_embeddings``: whether the store can score sentences against the query (guided growth needs it).
    """
    values = {name: getattr(fields, name) if given.get(name) is None else given[name] for name in given}
    for name, value in values.items():
        if name in RULES:
            RULES[name](name, value)
    if values["k"] is None and values["max_tokens"] is None:
        values["k"] = DEFAULT_K
    floors = {name: values.pop(name, getattr(fields, name)) for name in ("score_threshold", "relative_score_threshold")}
    expand = values["expand"]  # False: the matched sentences alone, each a window of one
    return Plan(
        k=values["k"],
        before=_side(values["before"]) if expand else 0,
        after=_side(values["after"]) if expand else 0,
        merge=values["merge"] and expand,
        merge_gap=fields.merge_gap if expand else 0,
        max_tokens=values["max_tokens"],
        shape=_shape(fields, given, values["max_tokens"], has_embeddings) if expand else "fixed",
        max_radius=fields.max_radius,
        policy=fields.budget_policy,
        **floors,
    )


def _side(sentences: int | None) -> int:
    """A fixed window's ``before`` or ``after``: :data:`DEFAULT_SIDE` where it is None."""
    return DEFAULT_SIDE if sentences is None else sentences


def _shape(fields: Any, given: dict[str, Any], max_tokens: int | None, has_embeddings: bool) -> str:
    """The call's window shape, "guided" or "fixed", by the rule in ``window``'s docstring."""
    window = given.get("window") or fields.window
    check_window(window)
    shaped_here = [name for name in ("before", "after") if given.get(name) is not None]
    if window == "guided":
        if max_tokens is None:
            msg = "window='guided' grows windows until the budget is full: give max_tokens, or use window='fixed'."
            raise ValueError(msg)
        if shaped_here:
            msg = (
                f"`{shaped_here[0]}` sets the fixed window's shape; guided windows choose their own. "
                "Leave it out, or pass window='fixed' with it."
            )
            raise ValueError(msg)
        if not has_embeddings:
            msg = "window='guided' scores sentences against the query: the vector store needs embeddings."
            raise ValueError(msg)
        return "guided"
    shaped = shaped_here or [name for name in ("before", "after") if getattr(fields, name) is not None]
    guided = window is None and max_tokens is not None and not shaped and has_embeddings
    return "guided" if guided else "fixed"


RULES: dict[str, Callable[[str, object], None]] = {
    "k": rules.check_optional_positive,
    "expand": rules.check_flag,
    "merge": rules.check_flag,
    "before": rules.check_optional_non_negative,
    "after": rules.check_optional_non_negative,
    "merge_gap": rules.check_non_negative,
    "max_radius": rules.check_non_negative,
    "max_tokens": rules.check_optional_positive,
    "max_sentence_tokens": rules.check_optional_positive,
    "score_threshold": rules.check_fraction,
    "relative_score_threshold": rules.check_fraction,
}
"""Every numeric and flag parameter's rule, for the fields and for the same arguments per call."""
