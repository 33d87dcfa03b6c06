from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnablePassthrough
from pydantic import Field

from langchain_expand import (
    FitToBudget,
    MergeOverlaps,
    SentenceWindowRetriever,
    TokenCounter,
    count_prompt_tokens,
    fit_to_budget,
    format_docs,
)
from langchain_expand.prompt import context_tokens
from langchain_expand.shrink import FINE_UNIT_TOKENS
from langchain_expand.text.sentences import SentenceSplitter

from .test_spans import SENTENCES, SOURCE, window

COUNTER = TokenCounter()


def joined_tokens(docs: list[Document], separator: str = "\n\n") -> int:
    return COUNTER(separator.join(d.page_content for d in docs))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, len(SENTENCES) - 1), st.integers(0, 4), st.integers(0, 4)), max_size=10),
    st.integers(1, 800),
    st.sampled_from(["rank", "score", "position", "lost_in_middle"]),
)
def test_budget_is_never_exceeded(hits: list[tuple[int, int, int]], budget: int, order: Any) -> None:
    docs = [window(h, b, a, score=1 - i / 50) for i, (h, b, a) in enumerate(hits)]
    frozen = copy.deepcopy(docs)
    kept, report = fit_to_budget(docs, budget, order=order)
    assert docs == frozen
    assert joined_tokens(kept) <= budget
    assert report.used == joined_tokens(kept)
    assert report.kept + report.dropped == len(docs)
    for doc in kept:
        m = doc.metadata
        assert SOURCE[m["start_index"] : m["end_index"]] == doc.page_content
        assert m["span"][0] <= m["hit"] < m["span"][1]  # shrinking never loses the hit


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, len(SENTENCES) - 1), st.integers(0, 4), st.integers(0, 4)), max_size=10),
    st.integers(1, 800),
)
def test_units_are_kept_whole_up_to_the_first_that_does_not_fit(hits: list[tuple[int, int, int]], budget: int) -> None:
    docs = [window(h, b, a) for h, b, a in hits]
    whole = next((n for n in range(len(docs)) if joined_tokens(docs[: n + 1]) > budget), len(docs))
    kept, _ = fit_to_budget(docs, budget)
    assert [d.page_content for d in kept[:whole]] == [d.page_content for d in docs[:whole]]
    assert not any(d.metadata["truncated"] for d in kept[:whole])
    if whole < len(docs):  # the first unit that did not fit whole is shrunk, dropped or skipped
        assert docs[whole].page_content not in [d.page_content for d in kept[whole:]]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=8), st.integers(1, 300), st.sampled_from(["\n\n", "\n", " | ", ""]))
def test_budget_holds_for_any_units_and_separator(texts: list[str], budget: int, separator: str) -> None:
    docs = [Document(t) for t in texts]
    kept, report = fit_to_budget(docs, budget, separator=separator)
    assert joined_tokens(kept, separator) == report.used <= budget  # counted, or summed where that is exact


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, len(SENTENCES) - 1), st.integers(0, 4), st.integers(0, 4)), max_size=10),
    st.integers(1, 800),
    st.integers(-3, 3),
)
def test_given_counts_spare_the_counting_and_cannot_break_the_budget(
    hits: list[tuple[int, int, int]], budget: int, error: int
) -> None:
    docs = [window(h, b, a) for h, b, a in hits]
    counts = [COUNTER(d.page_content) for d in docs]
    assert fit_to_budget(docs, budget, counts=counts) == fit_to_budget(docs, budget)  # the retriever's own counts
    wrong = [max(0, n * error) for n in counts]  # a caller's mistake: the packing suffers, the budget holds
    kept, report = fit_to_budget(docs, budget, counts=wrong)
    assert joined_tokens(kept) == report.used <= budget


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, len(SENTENCES) - 1), st.integers(0, 4), st.integers(0, 4)), max_size=10),
    st.integers(1, 800),
)
def test_packing_on_the_parts_counts_decides_as_packing_on_exact_counts(
    hits: list[tuple[int, int, int]], budget: int
) -> None:
    """With tiktoken, each separator counted with the unit's last word makes the parts' sum the joined count."""
    docs = [window(h, b, a) for h, b, a in hits]

    def joined(units: list[Document]) -> str:  # a formatter: every decision on an exact count
        return "\n\n".join(d.page_content for d in units)

    fast, fast_report = fit_to_budget(docs, budget)
    exact, exact_report = fit_to_budget(docs, budget, formatter=joined)
    assert [d.page_content for d in fast] == [d.page_content for d in exact]
    assert fast_report == exact_report


def test_counts_must_match_the_units() -> None:
    with pytest.raises(ValueError, match=r"`counts` must give one count per unit \(2\), got 1"):
        fit_to_budget([Document("a"), Document("b")], 10, counts=[1])


def test_the_budget_holds_when_the_formatter_prints_the_metadata_it_adds() -> None:
    def with_metadata(docs: list[Document]) -> str:
        return "\n\n".join(f"{d.metadata}\n{d.page_content}" for d in docs)

    docs = [window(h, 1, 1) for h in (10, 40, 70)]
    for budget in range(150, 1500, 50):
        kept, report = fit_to_budget(docs, budget, formatter=with_metadata)
        assert COUNTER(with_metadata(kept)) <= budget
        assert report.used == COUNTER(with_metadata(kept))  # the report counts what is printed


def test_the_budget_holds_when_the_joined_count_exceeds_the_parts() -> None:
    """Packing decides on the parts' counts; where joining costs more, the exact check settles it."""

    def squared(text: str) -> int:  # joining two texts costs more than both alone
        return len(text) ** 2 // 400

    docs = [window(h, 2, 2) for h in (10, 40, 70, 100, 130)]
    alone = sum(squared(d.page_content) for d in docs)
    for budget in (alone // 4, alone // 2, alone):
        kept, report = fit_to_budget(docs, budget, token_counter=squared)
        assert kept
        assert squared("\n\n".join(d.page_content for d in kept)) == report.used <= budget
        assert report.kept + report.dropped == len(docs)


def test_a_unit_that_does_not_fit_is_shrunk_from_its_edges_keeping_the_hit() -> None:
    doc = window(60, 4, 4)
    budget = COUNTER(doc.page_content) - 1
    (kept,), report = fit_to_budget([doc], budget)
    m = kept.metadata
    assert m["truncated"] is True
    assert report.truncated == 1
    assert m["span"][0] <= 60 < m["span"][1]
    assert m["span"][1] - m["span"][0] < 9
    assert kept.page_content == SOURCE[m["start_index"] : m["end_index"]]


def parent_of(text: str, child: str) -> Document:
    """A parent as the parent retriever returns it: the whole text, its best child located in it."""
    start = text.index(child)
    children = [{"id": "c", "start_index": start, "end_index": start + len(child), "score": 0.9}]
    return Document(text, metadata={"start_index": 0, "end_index": len(text), "children": children})


def test_a_parent_whose_child_does_not_fit_keeps_whole_sentences_of_the_child() -> None:
    """Issue 13: a matched child wider than the room left no longer drops its parent."""
    first = (
        "The warranty covers the panel, the stand, the remote control, the power cable and every other part "
        "that came in the box for two years from the date of purchase, provided that the set was bought new "
        "from an authorised dealer and registered within ninety days."
    )
    second = "Damage from liquids, drops, power surges or unauthorised repairs is excluded from the warranty."
    before = (
        "Before you call the service centre, write down the model code and the serial number printed on the "
        "label at the back of the set, next to the power socket, and keep your receipt or invoice at hand."
    )
    text = f"{before} {first} {second} Outro."
    parent = parent_of(text, f"{first} {second}")
    budget = COUNTER(first) + 12  # the child's first sentence fits, not both, nor the one before
    assert COUNTER(f"{first} {second}") > budget
    assert COUNTER(f"{before} {first}") > budget
    assert COUNTER(first) > FINE_UNIT_TOKENS  # a sentence kept whole, not pieces of the one before
    (kept,), report = fit_to_budget([parent], budget)
    assert report.truncated == 1
    assert report.used <= budget
    assert kept.page_content == text[kept.metadata["start_index"] : kept.metadata["end_index"]]
    assert kept.page_content == first


def test_a_parent_whose_child_is_a_table_bigger_than_the_room_keeps_rows_of_it() -> None:
    rows = "\n".join(f"| {year} | revenue {year} | {1000 + year} |" for year in range(2000, 2012))
    table = f"| year | item | amount |\n|---|---|---|\n{rows}"
    text = f"Results by year.\n\n{table}\n\nAll figures in thousands."
    parent = parent_of(text, table)
    budget = 60
    assert COUNTER(table) > budget  # one unit of the splitter, too big for the budget
    (kept,), report = fit_to_budget([parent], budget)
    assert budget // 2 <= report.used <= budget
    assert kept.page_content == text[kept.metadata["start_index"] : kept.metadata["end_index"]]
    assert "| 2000 | revenue 2000 | 3000 |" in kept.page_content
    assert set(kept.page_content.splitlines()) <= set(text.splitlines())  # whole rows and lines


def test_a_later_parent_whose_children_have_more_words_than_the_room_is_dropped_unsplit() -> None:
    """A later parent keeps a matched child whole, and no cut holding it counts fewer tokens than
    its words: where the room left is below every child's words, the parent is dropped without
    splitting it (a Markdown parse, most of a parents query); where one child might fit, it is split.
    The kept units are those the split would give either way."""
    first = ("The warranty covers every part that came in the box for two years. " * 3).strip()
    child = "Damage from liquids, drops, power surges or repairs elsewhere is not covered."
    later = parent_of(f"Exclusions follow, and there are many of them. {child} Keep the receipt and the box.", child)
    split: list[str] = []

    def splitter(text: str) -> list[tuple[int, int]]:
        split.append(text)
        return SentenceSplitter(token_counter=COUNTER)(text)

    blind = TokenCounter(count=COUNTER)  # counts the same, but has no bound on a text's tokens
    for room, splits in ((len(child.split()) - 1, 0), (COUNTER(child) + 4, 1)):
        budget = COUNTER(first) + room  # less the separator's token or two: the room left after the first unit
        split.clear()
        kept, _ = fit_to_budget([Document(first), later], budget, splitter=splitter)
        assert len(split) == splits
        assert [d.page_content for d in kept] == [
            d.page_content for d in fit_to_budget([Document(first), later], budget, token_counter=blind)[0]
        ]
        assert [d.page_content for d in kept[1:]] == [child] * splits


def test_skip_and_continue_keeps_smaller_lower_ranked_units() -> None:
    big = Document("word " * 400, metadata={"score": 0.9})  # no sentence map: cannot shrink
    small = window(30, 0, 0, score=0.5)
    kept, report = fit_to_budget([big, small], 100)
    assert kept[0].page_content == small.page_content
    assert report.dropped == 1
    assert kept[0].metadata["budget"]["dropped"] == 1


def test_reserve_leaves_room_for_the_rest_of_the_prompt() -> None:
    docs = [window(h, 2, 2) for h in (10, 50, 90, 130)]
    kept, report = fit_to_budget(docs, 300, reserve=200)
    assert joined_tokens(kept) <= 100
    assert report.max_tokens == 100


def test_output_orders() -> None:
    docs = [window(90, 0, 0, score=0.9), window(10, 0, 0, score=0.8), window(50, 0, 0, score=0.95)]
    by = {
        o: [d.metadata["hit"] for d in fit_to_budget(docs, 10_000, order=o)[0]] for o in ("rank", "score", "position")
    }
    assert by == {"rank": [90, 10, 50], "score": [50, 90, 10], "position": [10, 50, 90]}
    five = [window(h, 0, 0) for h in (1, 2, 3, 4, 5)]
    middle = [d.metadata["hit"] for d in fit_to_budget(five, 10_000, order="lost_in_middle")[0]]
    assert middle == [1, 3, 5, 4, 2]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_tokens": 0}, "`max_tokens` must be a positive integer, got 0"),
        ({"max_tokens": 10, "reserve": 10}, "`reserve` must be >= 0 and below `max_tokens`"),
        ({"max_tokens": 10, "order": "random"}, "`order` must be"),
        # issue #52, finding 11: a plain pydantic error, without the closest name the retrievers give
        ({"max_token": 5}, r"FitToBudget got an unknown argument `max_token`\. Did you mean `max_tokens`\?"),
    ],
)
def test_bad_budget_settings_fail_when_built(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FitToBudget(**kwargs)


def test_an_unknown_argument_to_merge_overlaps_names_the_closest() -> None:
    with pytest.raises(ValueError, match=r"MergeOverlaps got an unknown argument `gaps`\. Did you mean `gap`\?"):
        MergeOverlaps(gaps=1)


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("a question", r"it was given a str: 'a question'"),
        (Document("one unit"), r"it was given a Document"),
        ({"context": [Document("x")]}, r"it was given a dict"),
        ([Document("a"), "b"], r"item 1 is a str: 'b'"),
        (None, r"it was given a NoneType"),
    ],
)
def test_the_runnables_refuse_what_is_not_a_list_of_documents_naming_it(given: Any, said: str) -> None:
    # A chain that pipes a string or a dict into them failed deep inside, on a missing attribute.
    for runnable, owner in ((FitToBudget(max_tokens=50), "fit_to_budget"), (MergeOverlaps(), "merge_overlaps")):
        with pytest.raises(
            TypeError, match=rf"{owner} takes a list of Documents .*{said}.*Give it the list a retriever returns"
        ):
            runnable.invoke(given)
    prompt = ChatPromptTemplate.from_messages([("system", "{context}"), ("human", "{question}")])
    with pytest.raises(TypeError, match=r"FitToBudget, under 'context' of its input, .*a str: 'text'"):
        FitToBudget(max_tokens=50, prompt=prompt).invoke({"context": "text", "question": "q"})
    assert MergeOverlaps().invoke((Document("a"),)) == [Document("a")]  # any sequence of Documents


def test_format_docs_labels_each_unit_and_budget_counts_the_formatted_text() -> None:
    docs = [window(h, 1, 1) for h in (10, 50, 90)]
    text = format_docs(docs)
    assert text.startswith("[1] m (chars ")
    assert text.count("\n\n[") == 2
    kept, _ = fit_to_budget(docs, 120, formatter=format_docs)
    assert COUNTER(format_docs(kept)) <= 120


class Events(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        if name == "fit_to_budget":
            self.events.append(data)


async def test_runnable_sync_async_batch_and_callback_event() -> None:
    docs = [window(h, 2, 2) for h in (10, 50, 90, 130)]
    fit = FitToBudget(max_tokens=150)
    handler = Events()
    kept = fit.invoke(docs, config={"callbacks": [handler]})
    assert joined_tokens(kept) <= 150
    assert handler.events
    assert handler.events[0]["kept"] == len(kept)
    assert [d.page_content for d in await fit.ainvoke(docs)] == [d.page_content for d in kept]
    assert len(fit.batch([docs, docs[:1]])) == 2


class Recorder(GenericFakeChatModel):
    """A fake chat model (no LLM can run here) that keeps the messages it was sent."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(messages)
        return super()._generate(messages, *args, **kwargs)


def test_whole_prompt_mode_fits_the_rendered_prompt_in_a_chain(qmsum_index: SentenceWindowRetriever) -> None:
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "You answer questions about meetings using only this context:\n\n{context}"),
            MessagesPlaceholder("history"),
            ("human", "{question}"),
        ]
    )
    history = [("human", "Earlier question about the meeting " * 20), ("ai", "An earlier answer " * 20)]
    model = Recorder(messages=iter([AIMessage("fine")] * 3))
    budget = 600
    chain = (
        {
            "context": (lambda x: x["question"]) | qmsum_index | MergeOverlaps(),
            "question": lambda x: x["question"],
            "history": lambda x: x["history"],
        }
        | FitToBudget(max_tokens=budget, prompt=prompt, formatter=format_docs)
        | RunnablePassthrough.assign(rendered=prompt)
    )
    runs: list[str] = []

    class Runs(BaseCallbackHandler):
        def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
            runs.append(kwargs.get("name") or "")

    out = chain.invoke(
        {"question": "what colour will the remote control be?", "history": history}, {"callbacks": [Runs()]}
    )
    # each context tried is counted in the rendered prompt, not run: one prompt run in the trace, the chain's own
    assert runs.count("ChatPromptTemplate") == 1
    assert out["context_docs"], "some context must fit"
    assert count_prompt_tokens(out["rendered"], COUNTER) <= budget
    answer = (prompt | model).invoke({k: out[k] for k in ("context", "question", "history")})
    assert answer.content == "fine"
    sent = model.seen[-1]
    assert 3 + sum(4 + COUNTER(m.text) for m in sent) <= budget
    # without the whole-prompt reserve the same context would overflow the prompt
    loose = FitToBudget(max_tokens=budget).invoke(qmsum_index.invoke("what colour will the remote control be?"))
    overflow = prompt.invoke(
        {"context": "\n\n".join(d.page_content for d in loose), "question": "q", "history": history}
    )
    assert count_prompt_tokens(overflow, COUNTER) > budget


def test_a_prompt_variable_the_input_lacks_is_a_clear_error() -> None:
    prompt = ChatPromptTemplate.from_messages([("system", "Context: {context}"), ("human", "{question}")])
    with pytest.raises(
        KeyError, match=r"prompt needs \['question'\], which its input dict lacks \(it holds \['context'\]\)"
    ):
        FitToBudget(max_tokens=100, prompt=prompt).invoke({"context": [window(10, 1, 1)]})


def test_a_prompt_without_the_context_variable_is_refused_naming_it() -> None:
    # A prompt that takes no {context} fitted "within budget" a context it never held: the
    # budget counted the prompt alone, and every unit was kept.
    prompt = ChatPromptTemplate.from_messages([("system", "Answer briefly."), ("human", "{question}")])
    with pytest.raises(ValueError, match=r"prompt takes no \{context\} \(its variables: \['question'\]\)"):
        FitToBudget(max_tokens=100, prompt=prompt)
    fit = FitToBudget(max_tokens=100, prompt=prompt, context_key="question")  # the variable that takes it
    assert fit.context_key == "question"


def test_a_prompt_already_over_budget_is_a_clear_error() -> None:
    prompt = ChatPromptTemplate.from_messages([("system", "rules " * 200 + "{context}"), ("human", "{question}")])
    with pytest.raises(ValueError, match="without any context is already"):
        FitToBudget(max_tokens=50, prompt=prompt).invoke({"context": [], "question": "q"})


def test_fit_to_budget_and_merge_overlaps_are_configurable_per_request() -> None:
    from langchain_core.runnables import ConfigurableField

    from langchain_expand import MergeOverlaps

    docs = [window(h, 2, 2) for h in (10, 12, 40, 70)]
    fit = FitToBudget(max_tokens=60).configurable_fields(max_tokens=ConfigurableField(id="budget"))
    chain = MergeOverlaps().configurable_fields(gap=ConfigurableField(id="gap")) | fit
    small = chain.invoke(docs)
    large = chain.invoke(docs, config={"configurable": {"budget": 400}})
    assert joined_tokens(small) <= 60 < joined_tokens(large) <= 400
    assert len(chain.invoke(docs, config={"configurable": {"budget": 4000}})) == 3  # 10 and 12 overlap: merged
    with pytest.raises(ValueError, match="needs the text between them"):  # gap 30 must bridge text: no source
        chain.invoke(docs, config={"configurable": {"budget": 4000, "gap": 30}})


def _plain(docs: list[Document]) -> str:
    return "\n\n".join(d.page_content for d in docs)


def _with_metadata(docs: list[Document]) -> str:
    return "\n\n".join(f"{d.metadata}\n{d.page_content}" for d in docs)


def _json_lines(docs: list[Document]) -> str:
    import json

    return "\n".join(json.dumps({"text": d.page_content, **d.metadata}, default=str) for d in docs)


FORMATTERS = [_plain, _with_metadata, _json_lines, format_docs]
"""Formatters a user might write: plain, printing the metadata the budget adds, JSON, labelled."""


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, len(SENTENCES) - 1), st.integers(0, 4), st.integers(0, 4)), max_size=10),
    st.integers(0, 3),
    st.integers(1, 900),
    st.sampled_from(FORMATTERS),
)
def test_merge_with_gaps_then_any_formatter_stays_in_budget_and_exact(
    hits: list[tuple[int, int, int]], gap: int, budget: int, formatter: Any
) -> None:
    """The pipeline of finding 1 and 5 of issue 15, over random windows, gaps, budgets, formatters."""
    windows = [window(h, b, a, score=1 - i / 50) for i, (h, b, a) in enumerate(hits)]
    merged = MergeOverlaps(gap=gap, source={"m": SOURCE}.__getitem__).invoke(windows)
    kept = FitToBudget(max_tokens=budget, formatter=formatter).invoke(merged)
    assert COUNTER(formatter(kept)) <= budget
    for unit in kept:
        m = unit.metadata
        assert SOURCE[m["start_index"] : m["end_index"]] == unit.page_content
        assert m["span"][0] <= m["hit"] < m["span"][1]
        if "sentences" in m:  # the sentence map, where kept, describes the text exactly
            assert m["sentences"][0][0] == m["start_index"]
            assert m["sentences"][-1][1] == m["end_index"]


def test_a_budget_policy_refuses_ratios_that_cannot_fill_a_budget() -> None:
    from langchain_expand import BudgetPolicy

    assert BudgetPolicy().guided_target(1000) == 1200
    assert BudgetPolicy().guided_first_fetch(90) == 4  # at least 4 hits
    assert BudgetPolicy(tokens_per_sentence=10).guided_first_fetch(3000) == 100
    with pytest.raises(ValueError, match=r"guided_overfill must be >= 1"):
        BudgetPolicy(guided_overfill=0.8)
    with pytest.raises(ValueError, match=r"top_up is a share of the budget"):
        BudgetPolicy(top_up=1.5)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=6), st.sampled_from(["\n\n", " | "]))
def test_context_tokens_counts_what_the_fit_counts(texts: list[str], separator: str) -> None:
    """The budget report and the CLI measure a context with ``context_tokens``: the fit's own count of it."""
    docs = [Document(t, metadata={"doc_id": f"d{i}"}) for i, t in enumerate(texts)]
    for formatter in (None, format_docs):
        kept, report = fit_to_budget(docs, 10**6, token_counter=COUNTER, separator=separator, formatter=formatter)
        assert [d.page_content for d in kept] == texts
        assert context_tokens(docs, COUNTER, separator=separator, formatter=formatter) == report.used
