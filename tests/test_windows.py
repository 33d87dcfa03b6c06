"""SentenceWindowRetriever on real Chroma, real MiniLM embeddings and real tiktoken counts."""

from __future__ import annotations

import itertools
import re
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.runnables import ConfigurableField

from langchain_expand import (
    BudgetPolicy,
    Performance,
    SentenceSplitter,
    SentenceWindowRetriever,
    TokenCounter,
    window_bounds,
)
from langchain_expand.store.records import sentence_span
from langchain_expand.units import STORED_DOC, STORED_END, STORED_START

from .conftest import CountingEmbeddings, as_documents, gold_recall, load_docs, load_queries

COUNTER = TokenCounter()
Make = Callable[..., SentenceWindowRetriever]


@pytest.mark.parametrize(
    ("hit", "n", "before", "after", "expected"),
    [
        (5, 10, 2, 2, (3, 8)),
        (0, 10, 2, 2, (0, 3)),
        (9, 10, 2, 2, (7, 10)),
        (5, 10, 3, 1, (2, 7)),
        (1, 3, 0, 0, (1, 2)),
    ],
)
def test_window_clamps_at_document_edges(hit: int, n: int, before: int, after: int, expected: tuple[int, int]) -> None:
    assert window_bounds(hit, n, before, after) == expected


def sentences_in(text: str, start: int, end: int, splitter: SentenceSplitter) -> int:
    return sum(1 for s, e in splitter(text) if start <= s and e <= end)


def test_windows_hold_before_plus_after_plus_one_sentences_and_the_source_text(
    qmsum_index: SentenceWindowRetriever,
) -> None:
    sources = {d["doc_id"]: d["text"] for d in load_docs("qmsum")}
    splitter = SentenceSplitter()
    counts = {d: len(splitter(t)) for d, t in sources.items()}
    for query in load_queries("qmsum"):
        for before, after in [(2, 2), (3, 1), (0, 4)]:
            for doc in qmsum_index.invoke(query["query"], before=before, after=after, merge=False):
                m = doc.metadata
                text = sources[m["doc_id"]]
                assert text[m["start_index"] : m["end_index"]] == doc.page_content
                first, last = m["span"]
                assert (first, last) == window_bounds(m["hit"], counts[m["doc_id"]], before, after)
                assert sentences_in(text, m["start_index"], m["end_index"], splitter) == last - first
                if before <= m["hit"] < counts[m["doc_id"]] - after:
                    assert last - first == before + after + 1
                assert m["tokens"] == COUNTER(doc.page_content)
                assert 0.0 <= m["score"] <= 1.0
                assert m["title"] == m["doc_id"]


def test_results_are_ordered_by_score(qmsum_index: SentenceWindowRetriever) -> None:
    scores = [d.metadata["score"] for d in qmsum_index.invoke("the price of the remote control")]
    assert len(scores) == 8
    assert scores == sorted(scores, reverse=True)


def test_per_call_window_change_makes_no_embedding_call(make_retriever: Make, counting: CountingEmbeddings) -> None:
    retriever = make_retriever(k=3, merge=False)  # one window a hit, whatever its width
    retriever.add_documents(as_documents(load_docs("qmsum")[:1]))
    embedded = counting.documents_embedded
    assert embedded > 0
    wide = retriever.invoke("remote control design", before=4, after=4)
    narrow = retriever.invoke("remote control design", before=1, after=0)
    configurable = retriever.configurable_fields(
        before=ConfigurableField(id="before"), after=ConfigurableField(id="after")
    )
    configured = configurable.invoke("remote control design", config={"configurable": {"before": 0, "after": 3}})
    assert counting.documents_embedded == embedded
    assert counting.queries_embedded == 3
    assert [d.metadata["hit"] for d in wide] == [d.metadata["hit"] for d in narrow]
    for doc in narrow:
        assert doc.metadata["span"][0] == doc.metadata["hit"] - 1 or doc.metadata["hit"] == 0
    for doc in configured:
        first, last = doc.metadata["span"]
        assert first == doc.metadata["hit"]
        assert last - first <= 4
    assert sum(d.metadata["tokens"] for d in wide) > sum(d.metadata["tokens"] for d in narrow)


def test_a_configurable_budget_answers_as_the_same_budget_given_per_call(qmsum_index: SentenceWindowRetriever) -> None:
    # LangChain's configurable_fields builds the retriever again with every field passed: the
    # default `before` and `after`, passed back, once read as set, and its windows came back fixed.
    query = "what did they decide about the remote control's buttons?"
    configurable = qmsum_index.configurable_fields(max_tokens=ConfigurableField(id="budget"))
    configured = configurable.invoke(query, config={"configurable": {"budget": 600}})
    per_call = qmsum_index.invoke(query, max_tokens=600)
    assert [(d.metadata["span"], d.page_content) for d in configured] == [
        (d.metadata["span"], d.page_content) for d in per_call
    ]
    fixed = qmsum_index.invoke(query, max_tokens=600, window="fixed")
    assert [d.metadata["span"] for d in fixed] != [d.metadata["span"] for d in per_call]  # the shapes differ here


def test_neighbours_come_in_one_batched_fetch_per_query(make_retriever: Make) -> None:
    retriever = make_retriever(k=6)
    retriever.add_documents(as_documents(load_docs("qmsum")[:2]))
    calls: list[int] = []
    store = retriever.vectorstore
    original = store.get_by_ids

    def counted(ids):  # type: ignore[no-untyped-def]
        calls.append(len(ids))
        return original(ids)

    object.__setattr__(store, "get_by_ids", counted)
    docs = retriever.invoke("who will design the remote")
    assert len(docs) == 6
    assert len(calls) == 1


def test_match_only_mode_returns_the_hit_sentence_with_the_same_metadata(
    qmsum_index: SentenceWindowRetriever,
) -> None:
    sources = {d["doc_id"]: d["text"] for d in load_docs("qmsum")}
    hits = qmsum_index.invoke("the budget for the remote", expand=False)
    windows = qmsum_index.invoke("the budget for the remote", merge=False)
    assert [h.metadata["hit"] for h in hits] == [w.metadata["hit"] for w in windows]
    for hit in hits:
        m = hit.metadata
        assert m["span"] == [m["hit"], m["hit"] + 1]
        assert sources[m["doc_id"]][m["start_index"] : m["end_index"]] == hit.page_content
        assert set(m) >= {"doc_id", "hit", "span", "start_index", "end_index", "score", "tokens"}


def test_re_adding_a_document_replaces_its_sentences_without_orphans(make_retriever: Make) -> None:
    retriever = make_retriever(k=50)
    long = " ".join(f"Sentence number {i} talks about topic {i}." for i in range(30))
    short = "Only a short text now. It has two sentences."
    retriever.add_documents([Document(long, id="doc"), Document("Another document here.", id="other")])
    retriever.add_documents([Document(short, id="doc")])
    stored = retriever.vectorstore.get_by_ids([f"doc::{i}" for i in range(40)])
    assert sorted(d.id for d in stored) == ["doc::0", "doc::1"]
    found = retriever.invoke("topic", k=3, before=5, after=5)
    assert {d.metadata["doc_id"] for d in found} == {"doc", "other"}
    assert all(d.page_content in (short, "Another document here.") for d in found)


def test_re_adding_unchanged_documents_embeds_nothing(make_retriever: Make, counting: CountingEmbeddings) -> None:
    retriever = make_retriever()
    docs = as_documents(load_docs("qmsum")[:1])
    retriever.add_documents(docs)
    before = counting.documents_embedded
    assert retriever.add_documents(docs) == [docs[0].id]
    assert counting.documents_embedded == before


def test_search_kwargs_mean_what_they_mean_in_langchain(make_retriever: Make) -> None:
    retriever = make_retriever(search_kwargs={"k": 1, "filter": {"source": "b.md"}})
    assert (retriever.k, retriever.filter) == (1, {"source": "b.md"})
    text = "The router reboots at night. Its lights blink twice. Nobody knows why."
    retriever.add_documents([Document(text, id=n, metadata={"source": f"{n}.md"}) for n in "ab"])
    (window,) = retriever.invoke("why does the router reboot")
    assert window.metadata["source"] == "b.md"


def test_new_metadata_on_the_same_text_is_served_and_filtered_on(make_retriever: Make) -> None:
    retriever = make_retriever(k=1)
    text = "The launch plan moves to March. The budget was approved by the board."
    retriever.add_documents([Document(text, id="plan", metadata={"acl": "public"})])
    retriever.add_documents([Document(text, id="plan", metadata={"acl": "secret"})])
    (window,) = retriever.invoke("when is the launch")
    assert window.metadata["acl"] == "secret"
    assert retriever.invoke("when is the launch", filter={"acl": "secret"})
    assert not retriever.invoke("when is the launch", filter={"acl": "public"})


@pytest.mark.parametrize("edit", ["same length", "longer"])
def test_re_adding_the_committed_version_after_an_interrupted_update_repairs_it(
    make_retriever: Make, caplog: pytest.LogCaptureFixture, edit: str
) -> None:
    retriever = make_retriever(k=1)
    v1 = Document("The price is ten dollars. It ships in May. Blue is the colour. Returns are free.", id="doc")
    text = v1.page_content.replace("ten", "ninety-nine").replace("May", "June")
    v2 = Document(text + (" A new sentence. And another." if edit == "longer" else ""), id="doc")
    retriever.add_documents([v1])
    retriever._layout().write_body([retriever._prepare(v2, "doc")])  # a kill here: v2's body under v1's head
    retriever.add_documents([v1])  # the edit is reverted, or the job replays the last good state
    with caplog.at_level("WARNING"):
        (window,) = retriever.invoke("what is the price", before=5, after=5)
    assert window.page_content == v1.page_content
    assert "Skipping" not in caplog.text
    assert retriever.vectorstore._collection.count() == 4  # type: ignore[attr-defined]


def test_document_ids_come_from_ids_then_document_id_then_content(make_retriever: Make) -> None:
    retriever = make_retriever()
    ids = retriever.add_documents(
        [Document("First text here."), Document("Second one.", id="given"), Document("Third text.")],
        ids=["explicit", None, None],  # type: ignore[list-item]
    )
    assert ids[:2] == ["explicit", "given"]
    again = retriever.add_documents([Document("Third text.")])
    assert again == [ids[2]]
    assert ids[2].startswith("doc-")


def test_delete_removes_every_sentence_of_a_document(make_retriever: Make) -> None:
    retriever = make_retriever(k=5)
    rows = load_docs("qmsum")[:2]
    retriever.add_documents(as_documents(rows))
    retriever.delete([rows[0]["doc_id"]])
    left = retriever.vectorstore.get_by_ids([f"{rows[0]['doc_id']}::{i}" for i in range(1000)])
    assert left == []
    assert {d.metadata["doc_id"] for d in retriever.invoke("remote control")} == {rows[1]["doc_id"]}


def test_metadata_that_chroma_rejects_round_trips(make_retriever: Make) -> None:
    retriever = make_retriever(k=1)
    meta = {"tags": ["a", "b"], "owner": {"name": "x"}, "missing": None, "page": 3, "ok": True}
    retriever.add_documents([Document("The budget is twelve euros. Nothing else.", metadata=meta, id="m")])
    (doc,) = retriever.invoke("budget")
    assert {k: doc.metadata[k] for k in meta} == meta


def test_a_custom_splitter_callable_replaces_the_default(make_retriever: Make) -> None:
    def by_line(text: str) -> list[tuple[int, int]]:
        spans, at = [], 0
        for line in text.split("\n"):
            if line:
                spans.append((at, at + len(line)))
            at += len(line) + 1
        return spans

    retriever = make_retriever(k=1, splitter=by_line, before=1, after=1)
    text = "alpha one. alpha two.\nbeta line here\ngamma line. end"
    retriever.add_documents([Document(text, id="lines")])
    (doc,) = retriever.invoke("beta line")
    assert doc.page_content == text
    assert doc.metadata["span"] == [0, 3]


def test_log_windows_stay_under_the_window_times_cap_bound(make_retriever: Make) -> None:
    cap, before, after = 64, 2, 2
    retriever = make_retriever(k=8, splitter=SentenceSplitter(max_unit_tokens=cap), before=before, after=after)
    logs = [{**d, "text": "\n".join(d["text"].split("\n")[:60])} for d in load_docs("loghub")]
    retriever.add_documents(as_documents(logs))
    for query in ["error in state", "window manager freezing display", "kernel instruction cache parity"]:
        for doc in retriever.invoke(query, merge=False):  # the bound is a window's
            assert doc.metadata["tokens"] <= (before + after + 1) * cap


def test_window_size_follows_the_formula_on_punctuated_text(make_retriever: Make) -> None:
    retriever = make_retriever(k=8)
    rows = load_docs("emanual")
    retriever.add_documents(as_documents(rows))
    splitter = SentenceSplitter()
    text = rows[0]["text"]
    median_sentence = statistics.median(COUNTER.count_many([text[s:e] for s, e in splitter(text)]))
    questions = [q["query"] for q in load_queries("emanual")[:40]]
    sizes = [d.metadata["tokens"] for q in questions for d in retriever.invoke(q, merge=False)]
    predicted = 5 * median_sentence
    # Retrieval favours content-bearing sentences and sentence sizes are right-skewed, so
    # the measured median sits above the product; the budget report shows this error.
    assert abs(statistics.median(sizes) - predicted) / predicted < 0.35


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"k": 0}, "`k` must be a positive integer or None \\(no limit\\), got 0"),
        ({"k": -2}, "`k` must be a positive integer or None \\(no limit\\), got -2"),
        ({"before": -1}, "`before` must be an integer >= 0, got -1"),
        ({"after": -3}, "`after` must be an integer >= 0, got -3"),
        ({"performance": {"batch_size": 0}}, "`batch_size` must be a positive integer, got 0"),
        ({"performance": {"cache_size": -1}}, "`cache_size` must be an integer >= 0, got -1"),
        ({"max_tokens": 0}, "`max_tokens` must be a positive integer or None \\(no limit\\), got 0"),
        ({"befor": 3}, "got an unknown argument `befor`. Did you mean `before`\\?"),
        ({"top_k": 3}, "got an unknown argument `top_k`. Did you mean `k`\\?"),  # Haystack's name
        ({"window_size": 3}, "unknown argument `window_size`. Did you mean `before` and `after`\\?"),
        ({"search_kwargs": {"fetch_k": 20}}, "search_kwargs key `fetch_k` has no meaning here"),
        ({"k": 3, "search_kwargs": {"k": 2}}, "`k` is given twice, as `k=3` and in search_kwargs"),
    ],
)
def test_bad_parameters_fail_when_the_retriever_is_built(make_retriever: Make, params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_retriever(**params)


def test_bad_per_call_parameters_are_clear_errors(qmsum_index: SentenceWindowRetriever) -> None:
    with pytest.raises(ValueError, match="`k` must be a positive integer or None \\(no limit\\), got 0"):
        qmsum_index.invoke("anything", k=0)
    with pytest.raises(ValueError, match="`before` must be an integer >= 0, got -1"):
        qmsum_index.invoke("anything", before=-1)
    with pytest.raises(ValueError, match="`max_tokens` must be a positive integer or None \\(no limit\\), got -5"):
        qmsum_index.invoke("anything", max_tokens=-5)
    with pytest.raises(ValueError, match=r"invoke got an unknown argument `befor`\. Did you mean `before`\?"):
        qmsum_index.invoke("anything", befor=3)
    with pytest.raises(ValueError, match=r"unknown argument `similarity_top_k`\. Did you mean `k`\?"):  # LlamaIndex's
        qmsum_index.invoke("anything", similarity_top_k=3)
    with pytest.raises(ValueError, match="invoke got an unknown argument `search_kwargs`"):
        qmsum_index.invoke("anything", search_kwargs={"k": 2})


def joined_tokens(docs: list[Document]) -> int:
    return COUNTER("\n\n".join(d.page_content for d in docs))


def test_max_tokens_bounds_the_joined_windows_per_call_on_the_instance_and_after_reranking(
    qmsum_index: SentenceWindowRetriever,
) -> None:
    sources = {d["doc_id"]: d["text"] for d in load_docs("qmsum")}
    query = "what did the group decide about the price of the remote"
    full = qmsum_index.invoke(query, merge=True)
    budget = joined_tokens(full) // 2
    per_call = qmsum_index.invoke(query, merge=True, max_tokens=budget)
    on_instance = qmsum_index.model_copy(update={"max_tokens": budget, "merge": True}).invoke(query)
    matches = qmsum_index.invoke(query, expand=False, k=16)
    expanded = qmsum_index.expand_hits(matches, merge=True, max_tokens=budget)
    assert [d.page_content for d in on_instance] == [d.page_content for d in per_call]
    for kept in (per_call, expanded):
        assert 0 < joined_tokens(kept) <= budget
        for doc in kept:
            m = doc.metadata
            assert sources[m["doc_id"]][m["start_index"] : m["end_index"]] == doc.page_content
            assert m["span"][0] <= m["hit"] < m["span"][1]  # a shrunk window keeps its hit
            assert m["budget"]["max_tokens"] == budget
    assert per_call[0].metadata["hit"] == full[0].metadata["hit"]  # the best window is never the one cut
    assert len(per_call) < len(full) or any(d.metadata["truncated"] for d in per_call)


@pytest.mark.parametrize("text", ["", "   \n\t  "])
def test_empty_document_is_refused_and_nothing_stored_is_lost(make_retriever: Make, text: str) -> None:
    retriever = make_retriever(k=1)
    retriever.add_documents([Document("Kept safe. Still here.", id="kept")])
    with pytest.raises(ValueError, match="Document 'blank' has no text to index"):
        retriever.add_documents([Document("A new good one.", id="new"), Document(text, id="blank")])
    assert retriever.vectorstore.get_by_ids(["new::0"]) == []
    assert retriever.invoke("kept")[0].metadata["doc_id"] == "kept"


def test_duplicate_ids_in_one_call_are_refused(make_retriever: Make) -> None:
    retriever = make_retriever()
    with pytest.raises(ValueError, match="share the id 'same'"):
        retriever.add_documents([Document("One.", id="same"), Document("Two.", id="same")])


def test_an_uncapped_five_megabyte_line_is_refused_naming_the_document(make_retriever: Make) -> None:
    retriever = make_retriever(splitter=SentenceSplitter(max_unit_tokens=None))
    line = "word " * 1_000_000
    with pytest.raises(ValueError, match=r"Document 'huge': sentence 0 .* over `max_sentence_tokens`=2048"):
        retriever.add_documents([Document(line, id="huge")])


def test_a_broken_custom_splitter_is_a_clear_error(make_retriever: Make) -> None:
    retriever = make_retriever(splitter=lambda text: [(5, 2)])
    with pytest.raises(ValueError, match="Document 'x': the splitter returned span 0"):
        retriever.add_documents([Document("some text here", id="x")])


async def test_async_add_query_and_delete(make_retriever: Make) -> None:
    retriever = make_retriever(k=2)
    rows = load_docs("qmsum")[:1]
    await retriever.aadd_documents(as_documents(rows))
    docs = await retriever.ainvoke("what should the remote look like", before=1, after=1)
    assert len(docs) == 2
    sync_docs = retriever.invoke("what should the remote look like", before=1, after=1)
    assert [d.page_content for d in docs] == [d.page_content for d in sync_docs]
    await retriever.adelete([rows[0]["doc_id"]])
    assert await retriever.ainvoke("what should the remote look like") == []


def test_small_write_batches_store_the_same_windows(make_retriever: Make) -> None:
    rows = load_docs("qmsum")[:2]
    one_batch = make_retriever(k=5)
    many_batches = make_retriever(k=5, performance=Performance(batch_size=37))
    one_batch.add_documents(as_documents(rows))
    many_batches.add_documents(as_documents(rows))
    query = "the remote should be easy to use"
    assert [d.page_content for d in many_batches.invoke(query)] == [d.page_content for d in one_batch.invoke(query)]


# -- the budget decides how much is sent ---------------------------------------------------

SOURCES = {d["doc_id"]: d["text"] for d in load_docs("qmsum")}
BUDGET_QUERIES = [*[q["query"] for q in load_queries("qmsum")][:6], "OK .", "the remote control buttons"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    query=st.sampled_from(BUDGET_QUERIES),
    budget=st.integers(min_value=20, max_value=6000),
    before=st.integers(min_value=0, max_value=4),
    after=st.integers(min_value=0, max_value=4),
    merge=st.booleans(),
)
def test_budget_driven_windows_stay_in_budget_with_exact_offsets(
    qmsum_index: SentenceWindowRetriever, query: str, budget: int, before: int, after: int, merge: bool
) -> None:
    docs = qmsum_index.invoke(query, k=None, max_tokens=budget, before=before, after=after, merge=merge)
    assert_exact_windows_in_budget(docs, budget, disjoint=merge)


def assert_exact_windows_in_budget(docs: list[Document], budget: int, *, disjoint: bool) -> None:
    """In budget, each window the source's own text around its hits; with ``disjoint``, no sentence twice."""
    assert joined_tokens(docs) <= budget
    for doc in docs:
        m = doc.metadata
        assert SOURCES[m["doc_id"]][m["start_index"] : m["end_index"]] == doc.page_content
        first, last = m["span"]
        assert first <= m["hit"] < last
        assert all(first <= h < last for h in m["hits"])
    if disjoint:
        spans = sorted((d.metadata["doc_id"], *d.metadata["span"]) for d in docs)
        for (doc_a, _, end_a), (doc_b, start_b, _) in itertools.pairwise(spans):
            assert doc_a != doc_b or end_a <= start_b


def test_the_budget_decides_how_many_windows_and_fills_it(qmsum_index: SentenceWindowRetriever) -> None:
    query = "what did the group decide about the price of the remote"
    assert qmsum_index.k == 8  # the fixture's cap
    uncapped = qmsum_index.model_copy(update={"k": None})
    assert len(uncapped.invoke(query)) == 4  # no budget, no k: the default count
    for budget in (300, 1500, 4000):
        docs = uncapped.invoke(query, max_tokens=budget, merge=True)
        used = joined_tokens(docs)
        assert 0.95 * budget <= used <= budget, (budget, used)
    capped = uncapped.invoke(query, k=3, max_tokens=4000, merge=True)
    assert len(capped) <= 3  # k only caps: three windows leave the budget unspent
    assert joined_tokens(capped) < 0.95 * 4000 <= joined_tokens(uncapped.invoke(query, max_tokens=4000, merge=True))


def test_budget_driven_retrieval_stops_at_the_relevance_floor(qmsum_index: SentenceWindowRetriever) -> None:
    query = "what did the group decide about the price of the remote"
    floored = qmsum_index.model_copy(update={"k": None, "relative_score_threshold": 0.85})
    docs = floored.invoke(query, max_tokens=6000, merge=True)
    best = max(d.metadata["score"] for d in docs)
    matches = qmsum_index.invoke(query, k=200, expand=False)
    above = {(m.metadata["doc_id"], m.metadata["hit"]) for m in matches if m.metadata["score"] >= 0.85 * best}
    returned = {(d.metadata["doc_id"], h) for d in docs for h in d.metadata["hits"]}
    assert returned == above  # every hit above the floor, none below it
    assert joined_tokens(docs) < 6000  # the evidence ran out before the budget
    with pytest.raises(ValueError, match="`relative_score_threshold` must be a number between 0 and 1"):
        SentenceWindowRetriever(vectorstore=qmsum_index.vectorstore, relative_score_threshold=1.5)


def test_a_relevance_floor_given_per_call_is_the_fields_floor(qmsum_index: SentenceWindowRetriever) -> None:
    # issue #52, finding 2: invoke(q, score_threshold=0.4) was refused as an unknown argument,
    # so the floor that keeps weak hits out of a budget was a constructor field only
    query = "what did the group decide about the price of the remote"
    for name, value in (("score_threshold", 0.45), ("relative_score_threshold", 0.8)):
        floored = qmsum_index.model_copy(update={"k": None, name: value})
        per_call = qmsum_index.invoke(query, k=None, max_tokens=1500, **{name: value})
        assert per_call == floored.invoke(query, max_tokens=1500)
        assert per_call != qmsum_index.invoke(query, k=None, max_tokens=1500)  # the floor left something out
        best = max(d.metadata["score"] for d in per_call)
        floor = value if name == "score_threshold" else value * best
        assert all(d.metadata["score"] >= floor for d in per_call)
    with pytest.raises(ValueError, match="`score_threshold` must be a number between 0 and 1"):
        qmsum_index.invoke(query, score_threshold=4)


# -- guided: windows that grow toward the evidence ---------------------------------------------


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.sampled_from(BUDGET_QUERIES), budget=st.integers(min_value=20, max_value=6000), merge=st.booleans())
def test_guided_windows_stay_in_budget_with_exact_offsets(
    qmsum_index: SentenceWindowRetriever, query: str, budget: int, merge: bool
) -> None:
    docs = qmsum_index.invoke(query, k=None, max_tokens=budget, merge=merge, window="guided")
    assert_exact_windows_in_budget(docs, budget, disjoint=True)  # guided windows never overlap, merged or not
    for doc in docs:
        m = doc.metadata
        first, last = m["span"]
        assert max(m["hit"] - first, last - 1 - m["hit"]) <= qmsum_index.max_radius or len(m["hits"]) > 1


def test_guided_is_the_default_with_a_budget_and_fixed_windows_stay_exact(qmsum_index: SentenceWindowRetriever) -> None:
    query = "what did the group decide about the price of the remote"
    uncapped = qmsum_index.model_copy(update={"k": None})
    guided = uncapped.invoke(query, max_tokens=3000)
    assert [d.metadata["span"] for d in guided] == [
        d.metadata["span"] for d in uncapped.invoke(query, max_tokens=3000, window="guided")
    ]
    widths = {d.metadata["span"][1] - d.metadata["span"][0] for d in guided}
    assert len(widths) > 1  # the shape follows the evidence, not a fixed radius
    for fixed in (
        uncapped.invoke(query, max_tokens=3000, window="fixed", merge=False),
        uncapped.invoke(query, max_tokens=3000, before=1, after=1, merge=False),  # a shape given: fixed windows
        SentenceWindowRetriever(vectorstore=qmsum_index.vectorstore, before=1, after=1).invoke(
            query, max_tokens=3000, merge=False
        ),
    ):
        assert fixed
        for d in fixed[:-1]:  # the last may be shrunk to fit
            first, last = d.metadata["span"]
            assert last - first <= 5
            assert d.metadata["hit"] - first <= 2
            assert last - 1 - d.metadata["hit"] <= 2


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ({"window": "guided"}, "window='guided' grows windows until the budget is full: give max_tokens"),
        ({"window": "guided", "max_tokens": 500, "before": 3}, "`before` sets the fixed window's shape"),
        ({"window": "wide", "max_tokens": 500}, "`window` must be 'guided', 'fixed' or None"),
    ],
)
def test_guided_window_arguments_are_checked(qmsum_index: SentenceWindowRetriever, call: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        qmsum_index.invoke("the price of the remote", **call)
    with pytest.raises(ValueError, match="`max_radius` must be"):
        SentenceWindowRetriever(vectorstore=qmsum_index.vectorstore, max_radius=-1)


def test_a_merge_gap_without_merging_is_refused_and_a_calls_merge_false_turns_it_off(
    qmsum_index: SentenceWindowRetriever,
) -> None:
    # merge_gap=2 beside merge=False was accepted, and did nothing
    store = qmsum_index.vectorstore
    with pytest.raises(ValueError, match=re.escape("`merge_gap=2` joins windows that many sentences apart")):
        SentenceWindowRetriever(vectorstore=store, merge=False, merge_gap=2)
    gapped = SentenceWindowRetriever(vectorstore=store, merge_gap=2)
    with pytest.raises(ValueError, match="set merge=True, or leave merge_gap at 0"):
        gapped.merge = False
    query = "the price of the remote control"
    plain = SentenceWindowRetriever(vectorstore=store, merge=False)
    assert gapped.invoke(query, k=6, merge=False) == plain.invoke(query, k=6)


def test_guided_windows_work_on_an_in_memory_store(minilm: object) -> None:
    from langchain_core.vectorstores import InMemoryVectorStore

    rows = load_docs("qmsum")[:1]
    retriever = SentenceWindowRetriever(vectorstore=InMemoryVectorStore(minilm))  # type: ignore[arg-type]
    retriever.add_documents(as_documents(rows))
    docs = retriever.invoke("the price of the remote control", max_tokens=800, merge=True)
    assert 0.95 * 800 <= joined_tokens(docs) <= 800
    for d in docs:
        m = d.metadata
        assert rows[0]["text"][m["start_index"] : m["end_index"]] == d.page_content


TABLE_PASSAGES = 15


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory, minilm: object) -> SentenceWindowRetriever:
    """TAT-QA's first passages, each table one unit (up to a few hundred tokens), hybrid by default."""
    return _table_passages(tmp_path_factory, minilm, SentenceSplitter())


@pytest.fixture(scope="module")
def table_rows(tmp_path_factory: pytest.TempPathFactory, minilm: object) -> SentenceWindowRetriever:
    """The same passages with the default splitter: a table's headings one unit, each row another."""
    return _table_passages(tmp_path_factory, minilm, None)


def _table_passages(
    tmp_path_factory: pytest.TempPathFactory, minilm: object, splitter: SentenceSplitter | None
) -> SentenceWindowRetriever:
    from langchain_expand import LexicalIndex, chroma_store

    path = tmp_path_factory.mktemp("tatqa")
    store = chroma_store("tatqa", persist_directory=path / "chroma", embeddings=minilm)  # type: ignore[arg-type]
    lexical = LexicalIndex(path / "lexical.sqlite")
    shape = {} if splitter is None else {"splitter": splitter}
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=lexical, **shape)  # type: ignore[arg-type]
    retriever.add_documents([Document(r["text"], id=r["doc_id"]) for r in load_docs("tatqa")[:TABLE_PASSAGES]])
    return retriever


def table_queries() -> list[str]:
    passages = {r["doc_id"] for r in load_docs("tatqa")[:TABLE_PASSAGES]}
    return [q["query"] for q in load_queries("tatqa") if q["doc_id"] in passages][::2]


def test_guided_windows_grow_on_into_the_room_fitting_left(tables: SentenceWindowRetriever) -> None:
    """Issue 13: contexts use at least 95% of the budget where the corpus holds enough text.

    Fitting drops a window whose hit is too big for the room left, and cuts one by whole
    sentences: on tables that left a tenth of a small budget empty (TAT-QA at 250 tokens: 90%
    used on average). Growth goes on from the windows kept into that room, and only adds.
    """
    sources = {r["doc_id"]: r["text"] for r in load_docs("tatqa")}
    budget = 250
    no_top_up = tables.model_copy(update={"budget_policy": BudgetPolicy(top_up=0.0)})
    fitted_once = [no_top_up.invoke(q, max_tokens=budget) for q in table_queries()]
    topped_up = [tables.invoke(q, max_tokens=budget) for q in table_queries()]
    used = [joined_tokens(docs) for docs in topped_up]
    assert statistics.mean(joined_tokens(docs) for docs in fitted_once) < 0.95 * budget <= statistics.mean(used)
    assert max(used) <= budget
    for before, after in zip(fitted_once, topped_up, strict=True):
        for doc in after:
            m = doc.metadata
            assert sources[m["doc_id"]][m["start_index"] : m["end_index"]] == doc.page_content
        sent = {(d.metadata["doc_id"], i) for d in after for i in range(*d.metadata["span"])}
        assert sum(d.metadata["span"][1] - d.metadata["span"][0] for d in after) == len(sent)  # no sentence twice
        assert {(d.metadata["doc_id"], i) for d in before for i in range(*d.metadata["span"])} <= sent


def test_a_hit_bigger_than_the_budget_is_passed_over(tables: SentenceWindowRetriever) -> None:
    """A window holds its hit whole: a row longer than the budget can never be sent, so growth spends nothing on it."""
    rows = tables.invoke("total revenue operating income net sales", k=60, expand=False)
    row = max(rows, key=lambda r: joined_tokens([r]))
    budget = joined_tokens([row]) - 1
    growth_alone = tables.model_copy(update={"budget_policy": BudgetPolicy(top_up=0.0)})  # no top-up: growth alone
    assert tables.invoke(row.page_content, k=1, expand=False)[0].metadata["hit"] == row.metadata["hit"]
    for retriever in (growth_alone, tables):  # the row is the best hit of its own text
        docs = retriever.invoke(row.page_content, max_tokens=budget)
        assert joined_tokens(docs) <= budget
        assert all(
            d.metadata["doc_id"] != row.metadata["doc_id"] or row.metadata["hit"] not in range(*d.metadata["span"])
            for d in docs
        )
    assert 0.9 * budget <= joined_tokens(docs)  # the room it would have taken is grown into


def test_a_table_row_is_matched_alone_and_sent_with_its_whole_table(
    table_rows: SentenceWindowRetriever, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 13: on TAT-QA a question names one row; a table embedded whole blurs it among the others.

    Rows are matched one at a time and growth takes the table they are in whole where it fits
    (on the benchmark's 60 TAT-QA queries, 0.481 -> 0.609 recall at 250 tokens, 0.768 -> 0.807 at
    2,000). Growth learns each row's tie from the snapshot and, without one, from the store.
    """
    from langchain_expand.text.cues import tied
    from langchain_expand.windows import guided

    given: list[Any] = []  # what each run of growth read its sentences from
    grow = guided.grow
    monkeypatch.setattr(
        guided, "grow", lambda seeds, sentences, *a, **kw: given.append(sentences) or grow(seeds, sentences, *a, **kw)
    )
    checked = 0
    for row in load_docs("tatqa")[:TABLE_PASSAGES]:
        text, doc_id = row["text"], row["doc_id"]
        spans = table_rows.splitter(text)
        units = [text[a:b] for a, b in spans]
        ties = [tied(units[i], text[spans[i][1] : spans[i + 1][0]]) for i in range(len(spans) - 1)] + [False]
        if "|---" not in units[0] or ties[:3] != [True, True, True]:
            continue  # a passage that opens with a table of 3 rows or more under its headings
        end = ties.index(False) + 1  # the table: units [0, end)
        (hit,) = table_rows.invoke(units[2], k=1, expand=False)
        if hit.metadata["hit"] != 2 or hit.metadata["doc_id"] != doc_id:
            continue  # the row's own text found another sentence first
        for retriever in (table_rows, table_rows.model_copy(update={"performance": Performance(in_memory=False)})):
            retriever.clear_cache()
            given.clear()
            (window,) = retriever.invoke(units[2], k=1, max_tokens=1000)  # one window: the row's
            first, last = window.metadata["span"]
            assert first == 0  # the headings,
            assert last >= end  # every row
            assert text[window.metadata["start_index"] : window.metadata["end_index"]] == window.page_content
            known = [given[-1].get((doc_id, i)) for i in range(end)]
            assert [s.tied for s in known if s is not None] == ties[:end]  # each one known, with its tie
        checked += 1
    assert checked >= 3


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    query=st.sampled_from(table_queries()),
    budget=st.integers(min_value=20, max_value=6000),
    window=st.sampled_from(["guided", "fixed"]),
    merge=st.booleans(),
    snapshot=st.booleans(),
)
def test_hybrid_windows_stay_in_budget_with_exact_offsets(
    table_rows: SentenceWindowRetriever, query: str, budget: int, window: str, merge: bool, snapshot: bool
) -> None:
    """The budget and the offsets hold with BM25 fused in, tables matched row by row, on the snapshot and off it."""
    retriever = table_rows if snapshot else table_rows.model_copy(update={"performance": Performance(in_memory=False)})
    docs = retriever.invoke(query, k=None, max_tokens=budget, merge=merge, window=window)
    assert joined_tokens(docs) <= budget
    sources = {r["doc_id"]: r["text"] for r in load_docs("tatqa")[:TABLE_PASSAGES]}
    for doc in docs:
        m = doc.metadata
        assert sources[m["doc_id"]][m["start_index"] : m["end_index"]] == doc.page_content
        first, last = m["span"]
        assert first <= m["hit"] < last
    if merge or window == "guided":  # no sentence sent twice
        sent = [(d.metadata["doc_id"], i) for d in docs for i in range(*d.metadata["span"])]
        assert len(sent) == len(set(sent))


def test_a_window_does_not_grow_up_past_its_sections_heading(make_retriever: Make) -> None:
    """Issue 13: the text above a Markdown heading is another section; a window stops at its own heading.

    It may grow down into the next section. On the E-Manual (``##`` sections), the benchmark's
    60 queries went 0.493 -> 0.512 recall at 250 tokens and 0.844 -> 0.858 at 2,000.
    Growth learns each sentence's heading mark from the snapshot and, without one, from the store.
    """
    from langchain_expand.text.cues import heading

    row = load_docs("emanual")[0]
    text, doc_id = row["text"], row["doc_id"]
    retriever = make_retriever()
    retriever.add_documents([Document(text, id=doc_id)])
    spans = retriever.splitter(text)
    units = [text[a:b] for a, b in spans]
    checked = 0
    for h in [i for i, unit in enumerate(units) if heading(unit)][1:]:  # not the first: nothing is above it
        if h + 3 >= len(units) or any(heading(u) for u in units[h + 1 : h + 3]):
            continue  # a section with two sentences or more under its heading
        (hit,) = retriever.invoke(units[h + 1], k=1, expand=False)
        if hit.metadata["hit"] != h + 1:
            continue  # its first sentence's own text found another sentence first
        for copy in (retriever, retriever.model_copy(update={"performance": Performance(in_memory=False)})):
            copy.clear_cache()
            (window,) = copy.invoke(units[h + 1], k=1, max_tokens=300)
            first, last = window.metadata["span"]
            assert first == h  # its heading, and nothing above it
            assert last >= h + 3  # the budget went below instead
            assert text[window.metadata["start_index"] : window.metadata["end_index"]] == window.page_content
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize("corpus", ["emanual", "fastapi-docs"])
def test_no_window_is_a_heading_alone_or_ends_on_the_next_sections(make_retriever: Make, corpus: str) -> None:
    # issue #52, finding 4: at 500 tokens 5 of 50 windows ended on the next section's bare
    # heading, and 3 units were a heading alone (`### Shadowing`, 3 tokens)
    from langchain_expand.text.cues import heading

    rows = load_docs(corpus)[:12]
    retriever = make_retriever()
    retriever.add_documents([Document(r["text"], id=r["doc_id"]) for r in rows])
    texts = {r["doc_id"]: r["text"] for r in rows}
    queries = [u for r in rows for u in re.findall(r"^#+ (.+)$", r["text"], flags=re.M)][::5][:10]
    assert len(queries) >= 6
    crossed = 0
    for query in queries:
        for budget in (150, 500, 1500):
            windows = retriever.invoke(query, max_tokens=budget)
            assert joined_tokens(windows) <= budget
            for w in windows:
                m = w.metadata
                units = [texts[m["doc_id"]][a:b] for a, b in m["sentences"]]
                hit = m["hit"] - m["span"][0]
                assert not all(heading(u) for u in units), (query, budget, units)
                assert not heading(units[-1]) or len(units) - 1 == hit, (query, budget, units)
                assert m["crossed"] == sum(heading(u) for u in units[1:])  # it says where it runs on
                crossed += m["crossed"] > 0
    assert crossed > 0  # growth still goes down into the next section, where it pays


# -- hybrid: exact terms the dense ranking misses -------------------------------------------


def test_the_lexical_ranking_finds_more_evidence_of_names_and_exact_words(tmp_path: Path, minilm: object) -> None:
    from langchain_expand import LexicalIndex, chroma_store

    rows = load_docs("friendsqa")
    store = chroma_store("friends", persist_directory=tmp_path / "chroma", embeddings=minilm)  # type: ignore[arg-type]
    hybrid = SentenceWindowRetriever(vectorstore=store, merge=True, lexical=LexicalIndex(tmp_path / "lexical.sqlite"))
    hybrid.add_documents([Document(r["text"], id=r["doc_id"]) for r in rows])
    dense = hybrid.model_copy(update={"lexical": None})
    sources = {r["doc_id"]: r["text"] for r in rows}
    queries = load_queries("friendsqa")[::5]

    def recall(retriever: SentenceWindowRetriever, **call: object) -> float:
        total = 0.0
        for q in queries:
            docs = retriever.invoke(q["query"], max_tokens=500, **call)
            assert joined_tokens(docs) <= 500
            for d in docs:
                m = d.metadata
                assert sources[m["doc_id"]][m["start_index"] : m["end_index"]] == d.page_content
            total += gold_recall(q, docs)
        return total / len(queries)

    dense_recall, hybrid_recall = recall(dense, window="fixed"), recall(hybrid, window="fixed")
    assert hybrid_recall > 1.1 * dense_recall, (dense_recall, hybrid_recall)  # every 5th query measured 0.474 -> 0.596


def test_the_dialogue_setting_spreads_a_budget_over_more_hits(tmp_path: Path, minilm: object) -> None:
    # issue #50: the README's setting for dialogue, BudgetPolicy(tokens_per_sentence=8): turns are
    # short, so a budget asks for more hits and grows each window less; the budget holds as before
    from langchain_expand import LexicalIndex, chroma_store

    rows = load_docs("friendsqa")
    store = chroma_store("dialogue", persist_directory=tmp_path / "chroma", embeddings=minilm)  # type: ignore[arg-type]
    default = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(tmp_path / "lexical.sqlite"))
    default.add_documents([Document(r["text"], id=r["doc_id"]) for r in rows])
    dialogue = default.model_copy(update={"budget_policy": BudgetPolicy(tokens_per_sentence=8)})
    queries = load_queries("friendsqa")[::6]

    def measured(retriever: SentenceWindowRetriever, budget: int) -> tuple[int, float]:
        hits, total = 0, 0.0
        for q in queries:
            docs = retriever.invoke(q["query"], max_tokens=budget)
            assert joined_tokens(docs) <= budget
            hits += sum(len(d.metadata["hits"]) for d in docs)
            total += gold_recall(q, docs)
        return hits, total / len(queries)

    for budget in (500, 2000):
        (few, before), (more, after) = measured(default, budget), measured(dialogue, budget)
        assert more > 1.2 * few, (budget, few, more)  # measured 577 -> 889 hits at 500, 2,059 -> 3,251 at 2,000
        assert after >= before - 0.02, (budget, before, after)  # 0.516 -> 0.571 at 500, 0.824 both at 2,000


def test_hits_skipped_for_a_half_written_document_are_refilled_from_the_others(make_retriever: Make) -> None:
    """Issue 15, finding 9: a query during a write returned far fewer than k windows."""
    rows = load_docs("qmsum")
    retriever = make_retriever(k=6, before=1, after=1, performance=Performance(batch_size=50))
    retriever.add_documents(as_documents(rows))
    edited = [Document(rows[0]["text"].replace(" the ", " THE "), id=rows[0]["doc_id"])]
    store = retriever._vectors  # every write of the retriever's records goes through its adapter
    original = store.add_documents
    calls = iter(range(1000))

    def dies_on_the_third_write(documents: list[Document], **kwargs: Any) -> dict:
        if next(calls) == 2:
            raise KeyboardInterrupt  # the writer dies: two body batches of v2 under a v1 head
        return original(documents, **kwargs)

    object.__setattr__(store, "add_documents", dies_on_the_third_write)
    with pytest.raises(KeyboardInterrupt):
        retriever.add_documents(edited)
    query = rows[0]["text"][200:400]  # asks for the half-written meeting first
    windows = retriever.invoke(query)
    assert len(windows) == 6
    sources = {r["doc_id"]: r["text"] for r in rows}
    for w in windows:
        m = w.metadata
        assert sources[m["doc_id"]][m["start_index"] : m["end_index"]] == w.page_content


def test_records_written_with_their_end_serve_the_same_windows_and_lose_it_when_rewritten(
    make_retriever: Make,
) -> None:
    # Sentence records keep no lcx_end (it is the start plus the text); records written before do.
    retriever = make_retriever(k=3, performance=Performance(in_memory=False))
    docs = as_documents(load_docs("qmsum")[:2])
    retriever.add_documents(docs)
    collection = retriever.vectorstore._collection  # type: ignore[attr-defined]
    stored = collection.get(include=["metadatas", "documents"])
    assert all(STORED_END not in m for m in stored["metadatas"])
    query = load_queries("qmsum")[0]["query"]
    served = [(w.page_content, w.metadata) for w in retriever.invoke(query)]
    ends = [m[STORED_START] + len(t) for m, t in zip(stored["metadatas"], stored["documents"], strict=True)]
    collection.update(ids=stored["ids"], metadatas=[{STORED_END: end} for end in ends])  # as written before
    retriever.clear_cache()
    assert [(w.page_content, w.metadata) for w in retriever.invoke(query)] == served
    first = docs[0]
    retriever.add_documents([Document(first.page_content + " One more sentence.", id=first.id)])
    rewritten = collection.get(where={STORED_DOC: first.id}, include=["metadatas"])["metadatas"]
    assert len(rewritten) > 1
    assert all(STORED_END not in m for m in rewritten)  # removed, as any key a new version lacks


def test_a_sentence_span_is_its_start_and_text_or_the_end_stored() -> None:
    assert sentence_span(Document("Four words in here.", metadata={STORED_START: 10})) == (10, 29)
    assert sentence_span(Document("Four words in here.", metadata={STORED_START: 10, STORED_END: 31})) == (10, 31)
