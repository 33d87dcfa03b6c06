"""The window plan's own rules (``windows/plan.py``), on hits made by hand."""

from __future__ import annotations

import itertools

from langchain_expand.windows.hits import Hit
from langchain_expand.windows.plan import by_score


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
