from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_expand import MergeOverlaps, SentenceSplitter, SentenceWindowRetriever, merge_overlaps, window_bounds

from .conftest import as_documents, load_docs

SOURCE = load_docs("qmsum")[0]["text"]
SENTENCES = SentenceSplitter()(SOURCE)


def window(hit: int, before: int, after: int, doc_id: str = "m", score: float = 0.5) -> Document:
    first, last = window_bounds(hit, len(SENTENCES), before, after)
    start, end = SENTENCES[first][0], SENTENCES[last - 1][1]
    return Document(
        SOURCE[start:end],
        metadata={
            "doc_id": doc_id,
            "hit": hit,
            "span": [first, last],
            "start_index": start,
            "end_index": end,
            "score": score,
            "sentences": [list(s) for s in SENTENCES[first:last]],
        },
    )


def test_overlapping_windows_become_one_unit_covering_the_union() -> None:
    a, b, c = window(40, 2, 2, score=0.9), window(42, 2, 2, score=0.7), window(80, 2, 2, score=0.8)
    merged = merge_overlaps([a, b, c])
    assert len(merged) == 2
    union = merged[0]
    assert union.metadata["span"] == [38, 45]
    assert union.metadata["hits"] == [40, 42]
    assert union.metadata["score"] == 0.9
    assert union.page_content == SOURCE[union.metadata["start_index"] : union.metadata["end_index"]]
    assert merged[1] is c


def test_adjacent_windows_merge_only_with_a_gap_and_a_source() -> None:
    a, b = window(40, 1, 1), window(43, 1, 1)  # sentences 39-41 and 42-44: adjacent, no shared text
    assert len(merge_overlaps([a, b])) == 2
    with pytest.raises(ValueError, match="needs the text between them: pass `source=`"):
        merge_overlaps([a, b], gap=1)
    (merged,) = merge_overlaps([a, b], gap=1, source={"m": SOURCE}.__getitem__)
    assert merged.metadata["span"] == [39, 45]
    assert merged.page_content == SOURCE[merged.metadata["start_index"] : merged.metadata["end_index"]]


def parent(start: int, end: int, children: list[tuple[str, int, int, float]]) -> Document:
    """A parent unit as the parent retriever serves it: its matched children, best first."""
    refs = [
        {"id": i, "start_index": s, "end_index": e, "in_parent": [s - start, e - start], "score": sc}
        for i, s, e, sc in children
    ]
    score = max(c[3] for c in children)
    metadata = {"doc_id": "m", "parent_id": f"p{start}", "start_index": start, "end_index": end, "score": score}
    return Document(SOURCE[start:end], metadata={**metadata, "children": refs})


def test_parents_that_share_text_merge_with_every_childs_place_and_parents_side_by_side_stay_two() -> None:
    a = parent(0, 600, [("a1", 100, 200, 0.6)])
    b = parent(400, 1000, [("b1", 700, 800, 0.8), ("b2", 420, 500, 0.5)])  # shares 400-600 with a
    c = parent(1000, 1500, [("c1", 1100, 1200, 0.7)])  # starts where b ends: no text twice
    merged = merge_overlaps([b, c, a], touching=False)
    assert [m.metadata["parent_id"] for m in merged] == ["p400", "p1000"]  # at the best member's rank
    union = merged[0]
    assert (union.metadata["start_index"], union.metadata["end_index"]) == (0, 1000)
    assert union.page_content == SOURCE[0:1000]
    assert [c["id"] for c in union.metadata["children"]] == ["b1", "a1", "b2"]  # every member's, best first
    assert union.metadata["children"][1]["in_parent"] == [100, 200]  # into its own parent, as stored
    assert "hits" not in union.metadata  # parents have children, not hits
    assert merge_overlaps(merged, touching=False) == merged
    assert len(merge_overlaps([b, c])) == 1  # windows' rule: touching units merge too


def test_a_merged_gap_keeps_one_sentence_per_span_position_so_fitting_keeps_the_hit() -> None:
    from langchain_expand import FitToBudget

    far, near = window(6, 1, 1, score=0.9), window(2, 1, 1, score=0.5)  # [5, 8) and [1, 4): sentence 4 between
    (merged,) = merge_overlaps([far, near], gap=1, source={"m": SOURCE}.__getitem__)
    assert merged.metadata["span"] == [1, 8]
    assert merged.metadata["sentences"] == [list(s) for s in SENTENCES[1:8]]
    for budget in range(8, 200, 4):
        kept = FitToBudget(max_tokens=budget).invoke([merged])
        for unit in kept:
            m = unit.metadata
            first, last = m["span"]
            assert first <= m["hit"] < last
            assert unit.page_content == SOURCE[m["start_index"] : m["end_index"]]
            assert SENTENCES[m["hit"]][0] >= m["start_index"]
            assert SENTENCES[m["hit"]][1] <= m["end_index"]  # the hit's own text is inside


def test_units_without_offsets_pass_through_untouched() -> None:
    plain = Document("no offsets here")
    assert merge_overlaps([plain, window(10, 1, 1)])[0] is plain


def test_negative_gap_is_rejected() -> None:
    with pytest.raises(ValueError, match="`gap` must be >= 0, got -1"):
        MergeOverlaps(gap=-1)


HITS = st.lists(
    st.tuples(st.integers(0, len(SENTENCES) - 1), st.integers(0, 4), st.integers(0, 4), st.sampled_from("ab")),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(HITS)
def test_merging_covers_the_union_once_and_is_idempotent(hits: list[tuple[int, int, int, str]]) -> None:
    docs = [window(h, b, a, doc_id=d, score=1.0 - i / 100) for i, (h, b, a, d) in enumerate(hits)]
    frozen = copy.deepcopy(docs)
    merged = merge_overlaps(docs)
    assert docs == frozen  # the input is not mutated
    for doc_id in "ab":
        wanted = {i for d in docs if d.metadata["doc_id"] == doc_id for i in range(*d.metadata["span"])}
        got = [i for d in merged if d.metadata["doc_id"] == doc_id for i in range(*d.metadata["span"])]
        assert sorted(got) == sorted(wanted)  # the union, and no sentence twice
    for doc in merged:
        assert doc.page_content == SOURCE[doc.metadata["start_index"] : doc.metadata["end_index"]]
    assert merge_overlaps(merged) == merged


async def test_merge_runnable_supports_sync_async_and_batch() -> None:
    docs = [window(40, 2, 2), window(41, 2, 2)]
    runnable = MergeOverlaps()
    assert len(runnable.invoke(docs)) == 1
    assert len(await runnable.ainvoke(docs)) == 1
    assert [len(r) for r in runnable.batch([docs, docs[:1]])] == [1, 1]


def test_retriever_merge_counts_merged_units_and_refills_to_k(
    make_retriever: Callable[..., SentenceWindowRetriever],
) -> None:
    retriever = make_retriever(k=6)
    rows = load_docs("qmsum")
    retriever.add_documents(as_documents(rows))
    sources = {r["doc_id"]: r["text"] for r in rows}
    query = "the remote control should be trendy and original"
    plain = retriever.invoke(query, before=3, after=3)
    merged = retriever.invoke(query, before=3, after=3, merge=True)
    assert len(merged) == 6
    seen: dict[str, set[int]] = {}
    for doc in merged:
        m = doc.metadata
        assert sources[m["doc_id"]][m["start_index"] : m["end_index"]] == doc.page_content
        sentences = set(range(*m["span"]))
        assert not sentences & seen.setdefault(m["doc_id"], set())
        seen[m["doc_id"]] |= sentences
        assert m["hit"] in m["hits"]
    # every hit of the unmerged top k is inside some merged unit
    merged_hits = {(d.metadata["doc_id"], h) for d in merged for h in d.metadata["hits"]}
    assert {(d.metadata["doc_id"], d.metadata["hit"]) for d in plain} <= merged_hits
    # merging is also available on the retriever's own output, bridging gaps from the store
    bridged = MergeOverlaps(gap=2, source=retriever.source_text).invoke(plain)
    for doc in bridged:
        m = doc.metadata
        assert sources[m["doc_id"]][m["start_index"] : m["end_index"]] == doc.page_content


def test_merged_windows_are_not_refilled_past_the_sentences_k_windows_hold(
    make_retriever: Callable[..., SentenceWindowRetriever],
) -> None:
    # where every sentence is a hit the windows chained into one: k=4 returned all 300 sentences
    retriever = make_retriever()
    text = " ".join(f"Fact {i}: the value of item {i} is {i * 7} units." for i in range(300))
    retriever.add_documents([Document(text, id="facts")])
    for k, side in ((4, 2), (8, 2), (4, 5)):
        windows = retriever.invoke("the value of item 42", k=k, before=side, after=side)
        held, window = sum(d.metadata["span"][1] - d.metadata["span"][0] for d in windows), 2 * side + 1
        assert len(windows) <= k
        assert held <= 4 * k * window < 300  # the round that passed twice k windows' sentences, at most
        assert len(windows) == k or held >= 2 * k * window  # fewer than k only where they hold that


def test_crossed_counts_the_headings_a_window_runs_down_across_after_a_merge_and_a_cut() -> None:
    from langchain_expand import FitToBudget

    text = "# One\n\nFirst a. First b.\n\n## Two\n\nSecond a. Second b.\n\n## Three\n\nThird a."
    spans = SentenceSplitter()(text)

    def unit(first: int, last: int, hit: int) -> Document:
        sentences = spans[first:last]
        crossed = sum(text[a:b].startswith("#") for a, b in sentences[1:])
        start, end = sentences[0][0], sentences[-1][1]
        meta = {"doc_id": "d", "hit": hit, "span": [first, last], "start_index": start, "end_index": end}
        meta |= {"sentences": [list(s) for s in sentences], "crossed": crossed}
        return Document(text[start:end], metadata=meta)

    assert [text[a:b] for a, b in spans][3] == "## Two"
    a, b = unit(1, 4, 2), unit(3, 7, 4)  # "First a. ... ## Two" and "## Two ... ## Three"
    assert (a.metadata["crossed"], b.metadata["crossed"]) == (1, 1)
    (merged,) = merge_overlaps([a, b])
    assert merged.metadata["crossed"] == 2  # both headings below its first sentence
    (cut,) = FitToBudget(max_tokens=6).invoke([merged])
    assert cut.metadata["span"][1] <= 4
    assert cut.metadata["crossed"] < 2
    assert cut.metadata["crossed"] == sum(text[a:b].startswith("#") for a, b in cut.metadata["sentences"][1:])
