"""The tie rule (``store/adapters/ties.py``): results equal in distance go by document, then position, on every path."""

from __future__ import annotations

from langchain_expand.store.adapters.ties import MAX_SEARCH, TIE_GROWTH, nearest, tie_key, tie_ordered
from langchain_expand.store.records import unit_id


class Index:
    """A store's index over ``found`` (id, distance), handing back the first ``n`` in its own order; asks recorded."""

    def __init__(self, found: list[tuple[str, float]]) -> None:
        self.found = found
        self.asked: list[int] = []

    def __call__(self, n: int) -> list[tuple[str, float]]:
        self.asked.append(n)
        return self.found[:n]


def copies(doc_ids: list[str], distance: float) -> list[tuple[str, float]]:
    """One line repeated in each of ``doc_ids`` (at its sentence 4): one distance, to the last bits of a float32 sum."""
    return [(unit_id(d, 4), distance + 1e-9 * n) for n, d in enumerate(doc_ids)]


def test_a_tie_straddling_the_kth_goes_by_document_then_position_whatever_order_the_index_gives() -> None:
    tied = copies(["e", "b", "d", "a", "c"], 0.3)  # the index's own order among the copies
    index = Index([(unit_id("z", 0), 0.1), *tied, (unit_id("z", 1), 0.5)])
    assert [i for i, _ in nearest(index, 3, str)] == ["z::0", "a::4", "b::4"]
    assert index.asked == [4, 4 * TIE_GROWTH]  # the last of 4 ties the 3rd: asked further until one does not


def test_a_tie_is_completed_up_to_the_beam_and_no_further() -> None:
    tied = copies([f"d{n:03d}" for n in range(300)], 0.3)
    index = Index([*tied, (unit_id("z", 0), 0.5)])
    found = nearest(index, 2, str, beam=100)
    assert index.asked == [3, 24, 100]  # the beam's all: a larger search is another search
    assert [i for i, _ in found] == ["d000::4", "d001::4"]  # by position among what the beam found
    unknown = Index(index.found)
    nearest(unknown, 2, str)  # a store whose beam is not known: grown until the tie is whole
    assert unknown.asked == [3, 24, 192, 1536]
    wide = Index(index.found)
    assert nearest(wide, 120, str, spare=64, beam=100) == sorted(tied, key=lambda p: tie_key(p[0]))[:120]
    assert wide.asked == [185]  # asked past the beam already: that search's beam is its own


def test_what_a_search_asks_stays_within_its_bounds() -> None:
    index = Index(copies(["a", "b"], 0.2))
    assert nearest(index, 0, str) == []
    assert nearest(index, 5, str) == sorted(index.found, key=lambda p: tie_key(p[0]))  # fewer than asked: all
    assert index.asked == [1, 6]
    huge = Index([])
    assert nearest(huge, 10**12, str) == []
    assert huge.asked == [MAX_SEARCH]


def test_relevances_go_best_first_and_equal_ones_by_position() -> None:
    found = [(unit_id("b", 2), 0.9), (unit_id("a", 10), 0.5), ("plain-id", 0.5), (unit_id("a", 9), 0.5000000001)]
    assert [i for i, _ in tie_ordered(found, str)] == ["b::2", "a::9", "a::10", "plain-id"]
    assert tie_key("plain-id") == ("plain-id", -1)
    assert tie_key(unit_id("doc::with::colons", 12)) == ("doc::with::colons", 12)
