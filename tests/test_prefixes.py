from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand import (
    MarkdownSectionSplitter,
    SentenceSplitter,
    SentenceWindowRetriever,
    Span,
    StructuralPrefix,
    TokenCounter,
)
from langchain_expand.text.cues import cues

SPLITTER = SentenceSplitter(token_counter=TokenCounter())


def prefixed(text: str, context: StructuralPrefix | None = None) -> list[tuple[str, str]]:
    """Each sentence of ``text`` with the prefix embedded before it."""
    spans = SPLITTER(text)
    prefixes = (context or StructuralPrefix())(text, spans)
    return [(p, text[s:e]) for p, (s, e) in zip(prefixes, spans, strict=True)]


def test_a_turns_later_sentences_carry_its_speaker() -> None:
    text = "Ross Geller: She 's not here . She could be giving birth in the cab .\nRachel Green: Relax ."
    assert prefixed(text) == [
        ("", "Ross Geller: She 's not here ."),
        ("Ross Geller: ", "She could be giving birth in the cab ."),
        ("", "Rachel Green: Relax ."),
    ]


def test_a_chinese_turns_later_sentences_carry_its_speaker() -> None:
    text = "张三：你好。我们今天去北京。\n李四：好的。"  # a full-width colon, no space after it
    assert prefixed(text) == [("", "张三：你好。"), ("张三： ", "我们今天去北京。"), ("", "李四：好的。")]


def test_sentences_carry_the_heading_above_them_and_a_heading_its_parent() -> None:
    text = "# Remote\n\n## Pairing\nPoint it at the TV. Hold both buttons.\n\n## Battery\nSlide the cover off.\n"
    assert prefixed(text) == [
        ("", "# Remote"),
        ("Remote\n", "## Pairing"),
        ("Pairing\n", "Point it at the TV."),
        ("Pairing\n", "Hold both buttons."),
        ("Remote\n", "## Battery"),  # its parent, not the sibling section before it
        ("Battery\n", "Slide the cover off."),
    ]


def test_a_byte_order_mark_hides_no_heading() -> None:
    # A Markdown file saved on Windows may start with U+FEFF; its first heading then parsed as a
    # paragraph: its section had no title, and its sentences no heading in their prefix or cue.
    text = "# Setup\n\nInstall the tool first. Then run it.\n\n## Usage\n\nCall it with a path.\n"
    marked = "\ufeff" + text
    assert [(p, t.lstrip("\ufeff")) for p, t in prefixed(marked)] == prefixed(text)
    assert prefixed(text)[1] == ("Setup\n", "Install the tool first.")
    sections = MarkdownSectionSplitter().split_documents([Document(marked)])
    assert [d.metadata["title"] for d in sections] == ["Setup", "Usage"]
    assert cues("\ufeff# Setup", "\n\n").heading
    assert cues("\ufeff| a | b |\n| --- | --- |", "\n").tied  # a table's column headings, then its rows


def test_a_tables_rows_carry_its_column_headings() -> None:
    header = "|  |  | Years Ended September 30, |\n|---|---|---|\n|  | 2019 | 2018 |"
    rows = "\n".join(f"| Item {i} | {i}.5 | {i}.25 |" for i in range(80))
    text = f"Sales by year.\n\n{header}\n{rows}\n"
    spans = SentenceSplitter(token_counter=TokenCounter(), max_unit_tokens=120)(text)
    prefixes = StructuralPrefix()(text, spans)
    pieces = [text[s:e] for s, e in spans]
    assert len(pieces) > 3  # the table is cut into pieces of rows
    assert prefixes[:2] == ["", ""]  # the prose, and the piece holding the headings
    assert pieces[1].startswith("|  |  | Years")
    headings = "|  |  | Years Ended September 30, |\n|  | 2019 | 2018 |\n"
    assert all(p == headings for p in prefixes[2:])  # the separator row is not a heading
    assert all(p is prefixes[2] for p in prefixes[2:])  # one string, shared


def test_a_plain_tables_heading_is_its_first_row() -> None:
    text = "| Name | Value |\n|---|---|\n" + "\n".join(f"| key{i} | {i} |" for i in range(60))
    spans = SentenceSplitter(token_counter=TokenCounter(), max_unit_tokens=60)(text)
    prefixes = StructuralPrefix()(text, spans)
    assert prefixes[0] == ""
    assert set(prefixes[1:]) == {"| Name | Value |\n"}


def test_each_part_can_be_turned_off_and_is_cut_to_max_chars() -> None:
    text = "## Pairing the remote\nAnna: Point it. Hold it.\n"
    heading = "Pairing the remote\n"
    assert [p for p, _ in prefixed(text)] == ["", heading, heading + "Anna: "]
    assert [p for p, _ in prefixed(text, StructuralPrefix(headings=False))] == ["", "", "Anna: "]
    assert [p for p, _ in prefixed(text, StructuralPrefix(labels=False))] == ["", heading, heading]
    assert [p for p, _ in prefixed(text, StructuralPrefix(max_chars=7))] == ["", "Pairing\n", "Pairing\nAnna: "]


def test_a_headings_attribute_list_is_not_part_of_its_title() -> None:
    text = "## Code snippets { #code-snippets }\nRun it twice.\n\n## {#only-an-anchor}\nThen stop.\n"
    assert [p for p, _ in prefixed(text)] == ["", "Code snippets\n", "", "{#only-an-anchor}\n"]


def test_plain_prose_has_no_context() -> None:
    text = "The cable goes in first. Then the power: press it once. Wait."
    assert [p for p, _ in prefixed(text)] == ["", "", ""]


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_max_chars_is_checked(bad: object) -> None:
    with pytest.raises(ValueError, match="`max_chars` must be an int >= 1"):
        StructuralPrefix(max_chars=bad)  # type: ignore[arg-type]


LINES = st.sampled_from(
    [
        "# Title",
        "## Sub",
        "Anna: Hi . Bye .",
        "| a | b |",
        "|---|---|",
        "|  | 2019 |",
        "| x | 1 |",
        "Plain text. More.",
        "",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(LINES, max_size=30), st.sampled_from(["\n", "\r\n"]))
def test_one_prefix_per_sentence_made_only_of_text_before_it(lines: list[str], end: str) -> None:
    text = end.join(lines)
    spans = SPLITTER(text)
    prefixes = StructuralPrefix()(text, spans)
    assert len(prefixes) == len(spans)
    for prefix, (start, _) in zip(prefixes, spans, strict=True):
        for part in filter(None, prefix.replace(": ", ":\n").split("\n")):
            assert part.strip() in text[:start] or part.strip("# ") in text[:start]


# -- the window retriever embeds each sentence with its context ---------------------------------

SCENE = (
    "## The lost things\n"
    "Ross Geller: I lost the ring . It fell behind the couch .\n"
    "Joey Tribbiani: I lost my sandwich . It fell behind the fridge .\n"
    "Monica Geller: I lost my keys . They fell in the sink .\n"
)


def stored(retriever: SentenceWindowRetriever, sentence: str) -> tuple[Document, np.ndarray]:
    """The record of the stored sentence whose text is ``sentence``, with its vector."""
    got = retriever.vectorstore._collection.get(  # type: ignore[attr-defined]
        where_document={"$contains": sentence}, include=["documents", "metadatas", "embeddings"]
    )
    rows = zip(got["documents"], got["metadatas"], got["embeddings"], strict=True)
    [(text, meta, vector)] = [r for r in rows if r[0] == sentence]
    return Document(text, metadata=meta), np.asarray(vector)


def unit(vector: Sequence[float] | np.ndarray) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float64)
    return v / np.linalg.norm(v)


def test_a_sentence_is_stored_alone_and_embedded_with_its_context(
    make_retriever: Callable[..., SentenceWindowRetriever], minilm: Embeddings
) -> None:
    retriever = make_retriever()
    retriever.add_documents([Document(SCENE, id="scene")])
    record, vector = stored(retriever, "It fell behind the fridge .")
    start = record.metadata["lcx_start"]
    assert SCENE[start:].startswith(record.page_content)  # the text and offset are the sentence's own
    assert record.page_content == "It fell behind the fridge ."
    [expected] = minilm.embed_documents(["The lost things\nJoey Tribbiani: It fell behind the fridge ."])
    assert unit(vector) @ unit(expected) == pytest.approx(1.0, abs=1e-5)

    alone = make_retriever(sentence_prefix=None)
    alone.add_documents([Document(SCENE, id="scene")])
    _, plain = stored(alone, "It fell behind the fridge .")
    [expected] = minilm.embed_documents(["It fell behind the fridge ."])
    assert unit(plain) @ unit(expected) == pytest.approx(1.0, abs=1e-5)
    window = retriever.invoke("Where did Joey's thing end up?", k=1, before=0, after=0)[0]
    assert SCENE[window.metadata["start_index"] : window.metadata["end_index"]] == window.page_content


def test_a_question_naming_the_speaker_finds_their_later_sentence(
    make_retriever: Callable[..., SentenceWindowRetriever],
) -> None:
    query = "Where did Joey's thing end up?"
    scores = {}
    for context in (StructuralPrefix(), None):
        retriever = make_retriever(sentence_prefix=context)
        retriever.add_documents([Document(SCENE, id="scene")])
        hits = retriever.invoke(query, expand=False, k=5)
        scores[context is None] = {h.page_content: h.metadata["score"] for h in hits}
        if context is not None:
            assert hits[0].page_content == "It fell behind the fridge ."  # the answer, in Joey's turn
    # the sentence alone does not name Joey: without its context it matches the question far less
    assert scores[True]["It fell behind the fridge ."] < scores[False]["It fell behind the fridge ."] - 0.2


def test_another_context_re_embeds_a_document_when_it_is_next_added(
    make_retriever: Callable[..., SentenceWindowRetriever], counting: Any
) -> None:
    retriever = make_retriever(sentence_prefix=None)
    doc = Document(SCENE, id="scene")
    assert retriever.index_documents([doc]).written == ["scene"]
    assert retriever.index_documents([doc]).unchanged == ["scene"]  # the same settings: nothing embedded
    contextual = retriever.model_copy(update={"sentence_prefix": StructuralPrefix()})
    assert contextual.index_documents([doc]).written == ["scene"]
    _, vector = stored(contextual, "It fell behind the fridge .")
    [expected] = counting.embed_documents(["The lost things\nJoey Tribbiani: It fell behind the fridge ."])
    assert unit(vector) @ unit(expected) == pytest.approx(1.0, abs=1e-5)


def test_a_context_that_does_not_give_one_prefix_a_sentence_is_refused_before_anything_is_written(
    make_retriever: Callable[..., SentenceWindowRetriever],
) -> None:
    def short(text: str, spans: Sequence[Span]) -> list[str]:
        return [""] * (len(spans) - 1) if "Joey" in text else [""] * len(spans)

    retriever = make_retriever(sentence_prefix=short)
    good, bad = Document("A first line. A second one.", id="good"), Document(SCENE, id="scene")
    with pytest.raises(ValueError, match=r"Document 'scene': `sentence_prefix` must return a list of 7 strings"):
        retriever.add_documents([good, bad])
    assert retriever.invoke("first line", k=2) == []  # nothing of the batch was written
