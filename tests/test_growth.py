"""Guided growth on its own: regions, the budget they hold, and where the budget goes."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_expand.windows.growth import Growth, decay_for, grow
from langchain_expand.windows.regions import Position, Seed, Sentence


def cost(regions: list, sentences: dict[Position, Sentence], unknown: int) -> int:
    return sum(
        (sentences[(r.seed.doc_id, i)].tokens if (r.seed.doc_id, i) in sentences else unknown) + 1
        for r in regions
        for i in range(r.first, r.last)
    )


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[Seed], dict[Position, Sentence], int, int | None, int]:
    lengths = draw(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=3))
    sentences: dict[Position, Sentence] = {}
    for d, n in enumerate(lengths):
        ties = draw(st.integers(min_value=0, max_value=4**n - 1))  # one draw a document: hypothesis draws are slow
        for i in range(n):
            if i == 0 or draw(st.integers(min_value=0, max_value=9)) > 0:  # a tenth are not fetched yet
                tokens = draw(st.integers(min_value=1, max_value=60))
                kind = (ties >> 2 * i) & 3  # a quarter are tied to the next (rows of a table), a quarter headings
                similarity = draw(st.floats(min_value=-1, max_value=1))
                sentences[(f"d{d}", i)] = Sentence(tokens, similarity, tied=kind == 0, heading=kind == 1)
    positions = sorted(sentences)
    chosen = draw(st.lists(st.sampled_from(positions), unique=True, min_size=1, max_size=8))
    relevances = sorted(draw(st.lists(st.floats(0, 1), min_size=len(chosen), max_size=len(chosen))), reverse=True)
    seeds = [Seed(d, i, lengths[int(d[1:])], r) for (d, i), r in zip(chosen, relevances, strict=True)]
    target = draw(st.integers(min_value=1, max_value=2000))
    max_units = draw(st.none() | st.integers(min_value=1, max_value=8))
    radius = draw(st.integers(min_value=0, max_value=10))
    return seeds, sentences, target, max_units, radius


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_regions_are_disjoint_runs_around_their_seeds_within_the_target(
    layout: tuple[list[Seed], dict[Position, Sentence], int, int | None, int],
) -> None:
    seeds, sentences, target, max_units, radius = layout
    growth = grow(seeds, sentences, target, k=max_units, max_radius=radius, unknown_tokens=15)
    assert cost(growth.regions, sentences, 15) <= target
    assert max_units is None or len(growth.regions) <= max_units
    for region in growth.regions:
        seed = region.seed
        assert region.first <= seed.index < region.last <= seed.n
        assert seed.index - region.first <= radius
        assert region.last - 1 - seed.index <= radius
    for a, b in itertools.combinations(growth.regions, 2):
        assert a.seed.doc_id != b.seed.doc_id or a.last <= b.first or b.last <= a.first
    taken = {(r.seed.doc_id, i) for r in growth.regions for i in range(r.first, r.last)}
    assert taken - set(sentences) <= set(growth.wanted)  # the unknown sentences it used, and unknown next steps
    assert not set(growth.wanted) & set(sentences)
    assert list(growth.regions) == sorted(growth.regions, key=lambda r: seeds.index(r.seed))


@settings(max_examples=300, deadline=None)
@given(layouts(), st.data())
def test_growth_goes_on_from_regions_taken_into_the_room_left(
    layout: tuple[list[Seed], dict[Position, Sentence], int, int | None, int], data: st.DataObject
) -> None:
    """The top-up after fitting: regions kept stay (and may grow); the rest of the target is spent as before."""
    seeds, sentences, target, max_units, radius = layout
    first = grow(seeds, sentences, target, k=max_units, max_radius=radius, unknown_tokens=15)
    kept = data.draw(st.lists(st.sampled_from(first.regions), unique_by=id)) if first.regions else []
    taken = {seeds.index(r.seed): (r.first, r.last) for r in kept}
    spent = cost(kept, sentences, 15)
    room = data.draw(st.integers(min_value=0, max_value=500))
    growth = grow(seeds, sentences, spent + room, k=max_units, max_radius=radius, taken=taken, spent=spent)
    assert cost(growth.regions, sentences, 15) <= spent + room
    grown = {seeds.index(r.seed): r for r in growth.regions}
    for number, (a, b) in taken.items():
        assert grown[number].first <= a  # kept whole
        assert b <= grown[number].last
    for region in growth.regions:
        seed = region.seed
        assert region.first <= seed.index < region.last <= seed.n
        assert max(seed.index - region.first, region.last - 1 - seed.index) <= radius
    for a, b in itertools.combinations(growth.regions, 2):
        assert a.seed.doc_id != b.seed.doc_id or a.last <= b.first or b.last <= a.first
    if not taken:  # nothing taken, nothing spent: the same growth as from the start
        assert growth.regions == grow(seeds, sentences, room, k=max_units, max_radius=radius).regions


def test_a_taken_region_grows_on_toward_its_relevant_side() -> None:
    sentences = {("d", i): Sentence(10, 0.9 if i < 10 else 0.0) for i in range(21)}
    seed = Seed("d", 10, 21, 0.6)
    (region,) = grow([seed], sentences, target=9 * 11, taken={0: (9, 12)}, spent=3 * 11).regions
    assert (region.first, region.last) == (4, 13)  # 5 of the 6 sentences' room on the relevant side
    assert grow([seed], sentences, target=9 * 11).regions == [region]  # as growth from the seed alone


def test_a_window_grows_toward_its_relevant_side() -> None:
    sentences = {("d", i): Sentence(10, 0.9 if i < 10 else 0.0) for i in range(21)}
    (region,) = grow([Seed("d", 10, 21, 0.6)], sentences, target=77).regions
    assert region.last - region.first == 7
    assert 10 - region.first > region.last - 1 - 10  # more of the relevant (left) side


def test_a_strong_hit_grows_to_its_radius_before_a_weak_hit_gets_its_sentence() -> None:
    sentences = {(d, i): Sentence(10, 0.2) for d in "ab" for i in range(30)}
    seeds = [Seed("a", 15, 30, 0.8), Seed("b", 15, 30, 0.3)]
    strong, weak = grow(seeds, sentences, target=17 * 11 + 11, max_radius=8).regions
    assert (strong.first, strong.last) == (7, 24)
    assert (weak.first, weak.last) == (15, 16)


def test_growth_reports_exhaustion_only_when_seeds_and_neighbours_run_out() -> None:
    sentences = {("d", i): Sentence(10, 0.5) for i in range(3)}
    assert grow([Seed("d", 1, 3, 0.5)], sentences, target=1000).exhausted  # 3 sentences, far from the target
    assert not grow([Seed("d", 1, 3, 0.5)], sentences, target=23).exhausted  # 22 used, the third does not fit


def test_unknown_neighbours_are_wanted_in_the_direction_of_growth() -> None:
    sentences = {("d", 5): Sentence(10, 0.7)}
    growth = grow([Seed("d", 5, 10, 0.7)], sentences, target=40, unknown_tokens=10)
    # 11 + 2 x 11 = 33; a fourth would pass 40. Sentences 3 and 7 were weighed as next steps.
    assert growth.wanted == {("d", 4): -1, ("d", 6): 1, ("d", 3): -1, ("d", 7): 1}


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_growth_that_wants_nothing_is_the_growth_that_knows_every_sentence(
    layout: tuple[list[Seed], dict[Position, Sentence], int, int | None, int],
) -> None:
    """Fetching what growth wants until it wants nothing gives what it grows knowing everything.

    So a retriever that knows every sentence at once (its snapshot) and one that fetches
    them round by round from its store grow the same windows, where the fetching ends.
    """
    seeds, partial, target, max_units, radius = layout
    every = {
        (seed.doc_id, i): partial.get(
            (seed.doc_id, i), Sentence(1 + (7 * i) % 40, ((5 * i) % 11) / 10 - 0.5, i % 3 > 0, i % 6 == 0)
        )
        for seed in seeds
        for i in range(seed.n)
    }
    known = {(s.doc_id, s.index): every[(s.doc_id, s.index)] for s in seeds}  # as a search starts: its hits

    def grown() -> Growth:
        return grow(seeds, known, target, k=max_units, max_radius=radius, unknown_tokens=15)

    growth = grown()
    while growth.wanted:
        assert not set(growth.wanted) & set(known)  # each round learns something new
        known.update((p, every[p]) for p in growth.wanted)
        growth = grown()
    assert growth == grow(seeds, every, target, k=max_units, max_radius=radius, unknown_tokens=15)


def test_a_table_is_taken_whole_where_it_fits_and_row_by_row_where_it_does_not() -> None:
    """Rows are matched one at a time (``SentenceSplitter(table_rows=True)``) but sent as their table.

    Sentences 3-7 are a table (each tied to the next but the last), the hit is its row 5.
    """
    sentences = {("d", i): Sentence(10, 0.1, 3 <= i < 7) for i in range(12)}
    seed = Seed("d", 5, 12, 0.8)
    (region,) = grow([seed], sentences, target=5 * 11).regions
    assert (region.first, region.last) == (3, 8)  # the whole table, though prose would have grown 2 each side
    (region,) = grow([seed], sentences, target=5 * 11 - 1).regions  # it does not fit: rows, from the hit out
    assert (region.first, region.last) in ((2, 6), (3, 7), (4, 8))
    assert region.last - region.first == 4
    # growth reaching a table from the prose beside it takes the table too, as far as the radius reaches
    seed = Seed("d", 1, 12, 0.8)
    (region,) = grow([seed], sentences, target=8 * 11, max_radius=5).regions
    assert (region.first, region.last) == (0, 7)  # sentence 2, then rows 3-6 (row 7 is past the radius)
    (region,) = grow([seed], sentences, target=8 * 11, max_radius=6).regions
    assert (region.first, region.last) == (0, 8)


def test_a_region_does_not_grow_up_past_its_sections_heading_but_grows_down_into_the_next() -> None:
    """Sentences 4 and 12 are headings; the hit is sentence 6, the similarities level."""
    sentences = {("d", i): Sentence(10, 0.5, heading=i in (4, 12)) for i in range(20)}
    seed = Seed("d", 6, 20, 0.6)
    (region,) = grow([seed], sentences, target=10 * 11).regions
    assert (region.first, region.last) == (4, 14)  # its heading, and the room left spent below
    plain = {p: Sentence(10, 0.5) for p in sentences}
    (region,) = grow([seed], plain, target=10 * 11).regions
    assert region.first < 4  # without headings it grows both ways
    # the heading is weighed only once known: taken on trust, it is wanted, and growth goes on up
    partial = {p: s for p, s in sentences.items() if p != ("d", 4)}
    growth = grow([seed], partial, target=10 * 11, unknown_tokens=10)
    assert ("d", 4) in growth.wanted
    assert growth.regions[0].first < 4


def test_growing_down_a_heading_comes_with_the_sentence_after_it() -> None:
    # issue #52, finding 4: a window ended on the next section's bare heading
    sentences = {("d", i): Sentence(10, 0.5, heading=i in (0, 9)) for i in range(20)}
    for target in range(5 * 11, 16 * 11, 11):
        (region,) = grow([Seed("d", 5, 20, 0.6)], sentences, target=target).regions
        assert region.last - 1 != 9, (target, region)  # the region never ends on the heading
    (region,) = grow([Seed("d", 9, 20, 0.6)], sentences, target=2 * 11).regions
    assert (region.first, region.last) == (9, 11)  # a hit on a heading: it and the sentence below


def test_the_decay_follows_the_budget_from_focused_to_wide() -> None:
    """Issue 13: 0.95 at every budget lost evidence from 500 tokens up; 0.98 lost it at 250."""
    factors = [decay_for(round(1.2 * budget)) for budget in (250, 500, 1000, 2000, 4000, 8000)]
    assert [round(f, 3) for f in factors] == [0.95, 0.964, 0.975, 0.98, 0.98, 0.98]
    # grow() uses it by default: a strong hit's run against a weaker second hit, at two targets
    sentences = {("d", i): Sentence(10, 0.2) for i in range(60)} | {("e", i): Sentence(10, 0.2) for i in range(60)}
    seeds = [Seed("d", 30, 60, 0.8), Seed("e", 30, 60, 0.45)]
    for target in (60, 300, 2400):
        regions = grow(seeds, sentences, target).regions
        assert regions == grow(seeds, sentences, target, decay=decay_for(target)).regions
    wide = grow(seeds, sentences, 330).regions  # room for 30 sentences
    narrow = grow(seeds, sentences, 330, decay=0.9).regions
    assert wide[0].last - wide[0].first > narrow[0].last - narrow[0].first
