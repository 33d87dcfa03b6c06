"""How a token budget becomes a fetch size, a growth target and a stopping point: one object for both retrievers.

A budget says how many tokens the joined context may hold; what it takes to fill it well is
a handful of ratios, each measured on the evidence benchmark against its alternatives
(``benchmarks/README.md``, "Defaults and what they were measured against"). They live here
and nowhere else: each retriever has a ``budget_policy`` field holding a
:class:`BudgetPolicy`, and every decision the budget drives reads it. The exact fit itself
is :func:`~langchain_expand.budget.fit_to_budget`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["BudgetPolicy"]


@dataclass(frozen=True)
class BudgetPolicy:
    """The ratios that turn a budget into what to fetch and gather before the exact fit.

    Gathering past the budget matters because the fit keeps whole units in rank order and
    trims only the last: with exactly the budget gathered, a last unit cut down leaves room
    that smaller, lower-ranked units would have filled.
    """

    tokens_per_sentence: int = 15
    """A first guess of a sentence's size: how many hits a budget-driven search asks first, and
    what growth counts for a sentence it has not read yet."""
    fixed_overfill: float = 1.5
    """Fixed windows are gathered for this much of the budget (by their sentences' own counts)."""
    guided_overfill: float = 1.2
    """Guided growth gathers this much of the budget (sentence counts plus one each)."""
    top_up: float = 0.95
    """Guided windows that fill less of the budget than this once fitted grow on into the room left."""
    growth_full: float = 0.95
    """Growth that ran out of seeds and neighbours below this share of its target is exhausted:
    the caller searches for more hits (near the target, what is left is sentences too big for the
    room, not a lack of evidence)."""
    parents_overfill: float = 1.5
    """Parents are gathered until their capped sizes reach this much of the budget."""
    parents_full: float = 0.95
    """Gathering parents stops once the fitted ones fill this share of the budget."""
    reranked_k: int = 4
    """Reranked matches expanded when neither the call's ``k`` nor a budget says how many."""

    def __post_init__(self) -> None:
        for name in ("fixed_overfill", "guided_overfill", "parents_overfill"):
            if getattr(self, name) < 1:
                msg = f"BudgetPolicy.{name} must be >= 1 (gather at least the budget), got {getattr(self, name)}."
                raise ValueError(msg)
        for name in ("top_up", "growth_full", "parents_full"):
            if not 0 <= getattr(self, name) <= 1:
                msg = f"BudgetPolicy.{name} is a share of the budget, in [0, 1]; got {getattr(self, name)}."
                raise ValueError(msg)
        for name in ("tokens_per_sentence", "reranked_k"):
            if getattr(self, name) < 1:
                msg = f"BudgetPolicy.{name} must be >= 1, got {getattr(self, name)}."
                raise ValueError(msg)

    def kept_after_rerank(self, fetched: int, max_tokens: int | None) -> int:
        """Reranked matches to expand where the call names no ``k``.

        With a budget, every one fetched (the fit keeps what it holds, in reranked order);
        without one, ``reranked_k``.
        """
        return fetched if max_tokens is not None else min(self.reranked_k, fetched)

    def guided_first_fetch(self, max_tokens: int) -> int:
        """Hits a guided call asks of its first search: a third of the sentences the budget holds, at least 4."""
        return max(4, math.ceil(max_tokens / (3 * self.tokens_per_sentence)))

    def fixed_first_fetch(self, max_tokens: int, sentences_per_window: int) -> int:
        """Hits a budget-driven fixed call asks first: the windows its overfill holds, at least 4."""
        return max(4, math.ceil(self.fixed_overfill * max_tokens / (sentences_per_window * self.tokens_per_sentence)))

    def fixed_target(self, max_tokens: int) -> int:
        """Tokens of fixed windows gathered before the fit."""
        return math.ceil(self.fixed_overfill * max_tokens)

    def guided_target(self, max_tokens: int) -> int:
        """Tokens guided growth gathers before the fit."""
        return math.ceil(self.guided_overfill * max_tokens)
