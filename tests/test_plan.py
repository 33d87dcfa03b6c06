"""The window plan's own rules (``windows/plan.py``), on hits made by hand."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

from langchain_expand.policy import BudgetPolicy
from langchain_expand.windows.hits import Hit
from langchain_expand.windows.plan import by_score, plan_call


def hit(index: int, score: float) -> Hit:
    return Hit("s01_e23", index, 500, "r", score, {})


def test_a_units_hits_tie_by_position_whatever_the_path_that_scored_them() -> None:
    # issue #49: "Susan Bunch: What do you see ?" (414) and "What do you see ?" (415) embed alike.
    # The snapshot scored both 0.37901455; the store's path scored one from its distance
    # (0.37901455) and the other from its vector (0.37901449): rounded to 6 decimals they fall
    # apart, and the hits listed 415 before 414 on one path and after it on the other.
    snapshot = [hit(436, 0.43337876), hit(414, 0.37901455), hit(415, 0.37901455), hit(9, 0.2)]
    store = [hit(436, 0.43337870), hit(415, 0.37901455), hit(414, 0.37901449), hit(9, 0.2)]
    expected = [436, 414, 415, 9]
    for hits in (snapshot, store):
        for order in itertools.permutations(hits):
            assert [h.index for h in by_score(list(order))] == expected
    apart = [hit(3, 0.5), hit(1, 0.49), hit(2, 0.5 - 5e-7)]  # a run: 3 and 2 within 1e-6 of each other
    assert [h.index for h in by_score(apart)] == [2, 3, 1]


def test_a_match_only_call_keeps_the_retrievers_budget_policy() -> None:
    # expand=False made its plan with BudgetPolicy(): a budget then asked for hits and gathered
    # by the default ratios, not by the retriever's `budget_policy`.
    policy = BudgetPolicy(tokens_per_sentence=8, fixed_overfill=2.0)
    fields = SimpleNamespace(
        k=None,
        before=None,
        after=None,
        expand=True,
        merge=True,
        merge_gap=3,
        max_tokens=None,
        window=None,
        max_radius=32,
        budget_policy=policy,
        score_threshold=None,
        relative_score_threshold=0.5,
    )
    given = {"k": None, "before": None, "after": None, "expand": False, "merge": None, "max_tokens": 600}
    plan = plan_call(fields, given, has_embeddings=True)
    assert plan.policy is policy
    assert (plan.before, plan.after, plan.merge, plan.merge_gap, plan.shape) == (0, 0, False, 0, "fixed")
    assert plan.relative_score_threshold == 0.5
    assert plan.first_fetch() == policy.fixed_first_fetch(600, 1) == 150
    windows = plan_call(fields, {**given, "expand": None}, has_embeddings=True)
    assert (windows.before, windows.merge, windows.merge_gap, windows.shape) == (2, True, 3, "guided")
