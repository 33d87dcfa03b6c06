from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_expand import SentenceSplitter, TokenCounter
from langchain_expand.text.cues import Cues, cues, heading, tied

from .conftest import load_docs

COUNTER = TokenCounter()
SPLITTER = SentenceSplitter(token_counter=COUNTER)


def pieces(text: str, splitter: SentenceSplitter = SPLITTER) -> list[str]:
    return [text[s:e] for s, e in splitter(text)]


def test_abbreviations_decimals_and_initials_do_not_split() -> None:
    text = "Dr. Smith paid $3.50 for it. J. R. R. Tolkien wrote e.g. this. It ends here."
    assert pieces(text) == ["Dr. Smith paid $3.50 for it.", "J. R. R. Tolkien wrote e.g. this.", "It ends here."]


def test_quotes_stay_with_their_sentence_and_ellipsis_before_lowercase_continues() -> None:
    text = 'He said "stop." Then we waited... and waited. Why? Because!'
    assert pieces(text) == ['He said "stop."', "Then we waited... and waited.", "Why?", "Because!"]


def test_chinese_and_japanese_sentences_end_at_their_marks_without_a_space() -> None:
    # CJK text puts no space after 。！？: a whole paragraph was one sentence, cut only by the token cap
    chinese = ["今天天气很好。", "我们去公园吧！", "你要来吗？", "好的。"]
    assert pieces("".join(chinese)) == chinese
    assert pieces("他说：「我明天来。」然后走了。") == ["他说：「我明天来。」", "然后走了。"]  # its bracket stays
    assert pieces("東京は晴れです。明日も晴れるでしょう｡") == ["東京は晴れです。", "明日も晴れるでしょう｡"]
    assert pieces("Version 3.5 is out。It works.") == ["Version 3.5 is out。", "It works."]


def test_other_scripts_full_stops_and_question_marks_end_sentences() -> None:
    # a Hindi, Arabic or Urdu paragraph was one unit, cut only by the token cap
    hindi = ["यह पहला वाक्य है।", "दूसरा वाक्य॥", "क्या यह तीसरा है?"]
    assert pieces(" ".join(hindi)) == hindi
    arabic = ["هذه جملة.", "هل هذه أخرى؟", "نعم."]
    assert pieces(" ".join(arabic)) == arabic
    assert pieces("یہ جملہ ہے۔ دوسرا جملہ۔") == ["یہ جملہ ہے۔", "دوسرا جملہ۔"]
    assert pieces("Սա առաջինն է։ Սա երկրորդն է։") == ["Սա առաջինն է։", "Սա երկրորդն է։"]
    assert pieces("ይህ ነው። ሁለተኛው፧ ሦስተኛ።") == ["ይህ ነው።", "ሁለተኛው፧", "ሦስተኛ።"]
    assert pieces("संख्या १।२ है") == ["संख्या १।२ है"]  # no space after it: no end


def test_each_transcript_line_is_a_boundary() -> None:
    text = "Grad C: So we had a long discussion\nPhD D: It didn't move . So .\nGrad C: OK ."
    assert pieces(text) == ["Grad C: So we had a long discussion", "PhD D: It didn't move .", "So .", "Grad C: OK ."]


def test_a_chinese_transcripts_lines_are_boundaries_and_wrapped_chinese_prose_joins() -> None:
    # a full-width colon ends a speaker label with no space after it; and a line that ends in 。
    # ends a sentence, so prose wrapped mid-sentence is not cut at each line
    transcript = "张三：你好。我们今天去北京\n李四：好的\n王五：明天见！"
    assert pieces(transcript) == ["张三：你好。", "我们今天去北京", "李四：好的", "王五：明天见！"]
    wrapped = "今天天气很好，我们去公园\n散步。然后我们回家\n吃饭。晚上看电视，\n然后睡觉。"
    assert pieces(wrapped) == ["今天天气很好，我们去公园\n散步。", "然后我们回家\n吃饭。", "晚上看电视，\n然后睡觉。"]


def test_wrapped_prose_lines_join_into_one_sentence() -> None:
    text = "If the remote does not pair to the TV, point it at the\nsensor and hold the buttons. Then wait."
    assert pieces(text) == [
        "If the remote does not pair to the TV, point it at the\nsensor and hold the buttons.",
        "Then wait.",
    ]


def test_markdown_code_block_and_table_are_atomic_and_heading_is_its_own_unit() -> None:
    code = "```python\nx = 1. \n\ny = 2. Z = 3.\n```"
    table = "| code | meaning |\n|---|---|\n| 409 | Key used. Retry later. |\n| 200 | OK. |"
    text = f"# Errors\n\nReturns 409 if used. See below.\n\n{code}\n\n{table}\n\nAfter the table."
    assert pieces(text) == ["# Errors", "Returns 409 if used.", "See below.", code, table, "After the table."]


def test_table_rows_split_a_table_into_its_headings_and_one_unit_a_row() -> None:
    """A question about one row should match that row, not the blur of a whole table's vector."""
    header = "|  |  | Years Ended June 30, |\n|---|---|---|\n|  | 2019 | 2018 |"
    table = f"{header}\n| Services | $59,545 | $64,476 |\n| Other | 3,788 | 2,904 |"
    text = f"Revenue by type.\n\n{table}\n\nAfter the table."
    splitter = SentenceSplitter(token_counter=COUNTER, table_rows=True)
    units = pieces(text, splitter)
    assert units == [
        "Revenue by type.",
        header,
        "| Services | $59,545 | $64,476 |",
        "| Other | 3,788 | 2,904 |",
        "After the table.",
    ]
    assert pieces(text) == ["Revenue by type.", table, "After the table."]  # off by default: the table is one unit
    assert "table_rows=True" in repr(splitter)  # the repr is part of a document's revision
    assert "table_rows" not in repr(SPLITTER)  # unchanged where it is off
    spans = splitter(text)
    gaps = [text[e : spans[i + 1][0]] for i, (_, e) in enumerate(spans[:-1])] + [""]
    assert [tied(u, g) for u, g in zip(units, gaps, strict=True)] == [False, True, True, False, False]
    # a plain table's heading is its first row; code is not split
    code = "```\n| not | a table |\n```"
    assert pieces(f"| a | b |\n|---|---|\n| 1 | 2 |\n\n{code}", splitter) == ["| a | b |\n|---|---|", "| 1 | 2 |", code]


def test_a_heading_unit_is_marked_so_growth_does_not_go_up_past_it() -> None:
    text = "# Setup\n\nInstall it. Then run it.\n\n## Ports\n\n| port | use |\n|---|---|\n| 80 | web |\n\nDone."
    splitter = SentenceSplitter(token_counter=COUNTER, table_rows=True)
    spans = splitter(text)
    units = [text[a:b] for a, b in spans]
    gaps = [text[e : spans[i + 1][0]] for i, (_, e) in enumerate(spans[:-1])] + [""]
    found = [cues(u, g) for u, g in zip(units, gaps, strict=True)]
    assert list(zip(units, found, strict=True)) == [
        ("# Setup", Cues(heading=True)),
        ("Install it.", Cues()),
        ("Then run it.", Cues()),
        ("## Ports", Cues(heading=True)),
        ("| port | use |\n|---|---|", Cues(tied=True)),
        ("| 80 | web |", Cues()),
        ("Done.", Cues()),
    ]
    assert all(heading(h) for h in ("######", "###### Six", "#\tTabbed"))
    assert not any(heading(t) for t in ("#hashtag", "####### seven", "C# is a language.", " # indented", "| # |"))
    assert not heading("# a comment in unfenced code\nx = 1")  # a heading is one line
    # setext (and reStructuredText) titles: a line underlined, split as its own unit
    text = "Intro here.\n\nInstallation\n============\n\nRun it.\n\nUsage\n-----\n\nCall it."
    assert [(u, heading(u)) for u in pieces(text, splitter)] == [
        ("Intro here.", False),
        ("Installation\n============", True),
        ("Run it.", False),
        ("Usage\n-----", True),
        ("Call it.", False),
    ]
    assert not any(heading(t) for t in ("- navigation\n---", "> quoted\n---", "1. step\n===", "Total\n--", "---"))


def test_unclosed_fence_runs_to_the_end() -> None:
    text = "Intro.\n\n```\nnever closed. Still code."
    assert pieces(text) == ["Intro.", "```\nnever closed. Still code."]


def test_markup_lines_join_their_neighbours_instead_of_counting_as_sentences() -> None:
    text = "Intro here.\n\n/// note\n\nMind the gap.\n\n///\n\n---\n\nAfter."
    assert pieces(text) == ["Intro here.", "/// note\n\nMind the gap.\n\n///\n\n---", "After."]


def test_list_items_start_new_units() -> None:
    text = "Steps:\n- open the menu\n- press OK\n1. then wait"
    assert pieces(text) == ["Steps:", "- open the menu", "- press OK", "1. then wait"]


def test_cap_splits_long_log_lines_at_line_breaks_first() -> None:
    logs = load_docs("loghub")
    splitter = SentenceSplitter(max_unit_tokens=48, token_counter=COUNTER)
    for doc in logs:
        units = pieces(doc["text"], splitter)
        assert max(COUNTER.count_many(units)) <= 48
    # a log of short lines: every unit is made of whole lines
    text = "\n".join(f"081109 2035{i:02d} 148 INFO dfs.DataNode: Receiving block blk_{i}" for i in range(40))
    for unit in pieces(text, SentenceSplitter(max_unit_tokens=64, token_counter=COUNTER)):
        assert all(line.startswith("081109") for line in unit.split("\n"))


def test_cap_splits_an_oversized_table_at_row_boundaries() -> None:
    rows = "\n".join(f"| {i} | value number {i} with some words |" for i in range(60))
    table = "| id | value |\n|---|---|\n" + rows
    units = pieces(table, SentenceSplitter(max_unit_tokens=100, token_counter=COUNTER))
    assert len(units) > 1
    assert "\n".join(units) == table
    assert all(COUNTER(u) <= 100 for u in units)


def test_cap_bounds_a_five_megabyte_single_line() -> None:
    text = ("status ok node seven reports nominal load " * 120_000)[:5_000_000]
    splitter = SentenceSplitter(max_unit_tokens=256, token_counter=COUNTER)
    spans = splitter(text)
    assert max(COUNTER.count_many([text[s:e] for s, e in spans])) <= 256
    assert spans[0][0] == 0
    assert spans[-1][1] == len(text.rstrip())


def test_a_giant_word_splits_between_characters() -> None:
    text = "x" * 5000 + "🚀" * 300
    units = pieces(text, SentenceSplitter(max_unit_tokens=50, token_counter=COUNTER))
    assert "".join(units) == text
    assert all(COUNTER(u) <= 50 for u in units)


@pytest.mark.parametrize("bad", [0, -3])
def test_cap_below_one_is_rejected(bad: int) -> None:
    with pytest.raises(ValueError, match=f"`max_unit_tokens` must be >= 1 or None, got {bad}"):
        SentenceSplitter(max_unit_tokens=bad)


def test_unknown_line_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="`line_breaks`"):
        SentenceSplitter(line_breaks="sometimes")  # type: ignore[arg-type]


def check_spans(text: str, spans: list[tuple[int, int]]) -> None:
    """Ordered, non-overlapping, trimmed, and together covering every visible character."""
    end = 0
    covered = [False] * len(text)
    for s, e in spans:
        assert end <= s < e <= len(text)
        assert not text[s].isspace()
        assert not text[e - 1].isspace()
        for i in range(s, e):
            covered[i] = True
        end = e
    assert all(covered[i] or text[i].isspace() for i in range(len(text)))


TOKENS = [
    *list("ab Z.!?\n\r\t#|`-:\"'1 é🚀́\x00"),
    "...",
    "```",
    "\n\n",
    "Dr.",
    "e.g.",
    "| a |",
    "## ",
    "- ",
    "/// note\n",
    "////\n",
    "::: tip\n",
]
TEXT = st.lists(st.sampled_from(TOKENS), max_size=200).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_spans_cover_the_text_in_order_without_overlap(text: str) -> None:
    check_spans(text, SPLITTER(text))


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=600), st.integers(min_value=4, max_value=40))
def test_no_unit_exceeds_the_cap_on_any_text(text: str, cap: int) -> None:
    splitter = SentenceSplitter(max_unit_tokens=cap, token_counter=COUNTER)
    spans = splitter(text)
    check_spans(text, spans)
    assert all(COUNTER(text[s:e]) <= cap for s, e in spans)


def test_markdown_structure_comes_from_a_parser_at_any_nesting() -> None:
    from langchain_core.documents import Document

    from langchain_expand import MarkdownSectionSplitter

    text = (Path(__file__).parent / "data" / "markdown" / "nested-fences.md").read_text()
    units = [text[s:e] for s, e in SentenceSplitter()(text)]
    fences = [
        "> ```bash\n> # not a heading\n> pip install x. Then y.\n> ```",
        '```python\n   print("a. b. c.")\n   # still code\n   ```',
        "~~~\n    code. here.\n    ## not a heading either\n    ~~~",
        "| flag | meaning |\n| --- | --- |\n| -a | all. of it. |",
    ]
    for block in fences:  # each block lies whole in one unit, with no prose beside it
        holding = [u for u in units if block in u]
        assert len(holding) == 1
        assert not any(ch.isalnum() for ch in holding[0].replace(block, ""))  # at most quote markers
        assert not [u for u in units if u in block and u != holding[0]]
    assert "Indented prose." in units  # indentation alone is not code
    assert "Closing words." in units

    sections = MarkdownSectionSplitter(max_level=2).sections(Document(text))
    assert [meta["headings"] for _, _, meta in sections] == [["Guide"], ["Guide", "Usage"]]


def test_the_cap_is_max_unit_tokens_and_the_old_name_still_works_with_a_warning() -> None:
    """Issue #33: ``max_tokens`` means the context budget everywhere but here; the cap has its own name."""
    from langchain_expand.store.records import revision

    text = "One sentence here. " * 40
    new = SentenceSplitter(max_unit_tokens=16, token_counter=COUNTER)
    with pytest.warns(DeprecationWarning, match="max_unit_tokens"):
        old = SentenceSplitter(max_tokens=16, token_counter=COUNTER)
    assert old(text) == new(text)
    with pytest.warns(DeprecationWarning, match="max_unit_tokens"):
        assert old.max_tokens == 16
    # the stored revisions know the cap by its old name: renaming it re-embeds no index
    assert revision("One. Two.", SentenceSplitter(token_counter=COUNTER, table_rows=True)) == "f2e7da8691df6956"


def test_counted_gives_the_spans_and_the_counts_the_cap_took() -> None:
    counter = TokenCounter()
    text = "A short sentence. Another one here.\n\n" + " ".join(f"word{i}" for i in range(80)) + "\n\nThe end."
    splitter = SentenceSplitter(max_unit_tokens=20, token_counter=counter)
    spans, counts = splitter.counted(text)
    assert spans == splitter(text)
    assert [n is None for n in counts].count(True) >= 2  # the long line, split into pieces the cap counted in groups
    taken = [(text[s:e], n) for (s, e), n in zip(spans, counts, strict=True) if n is not None]
    assert [n for _, n in taken] == [counter(t) for t, _ in taken]
    assert len(taken) == 3  # the two short sentences and the last
    uncapped, none = SentenceSplitter(max_unit_tokens=None).counted(text)
    assert none == [None] * len(uncapped)  # nothing counted: the cap is off


def test_a_clause_or_list_items_number_stays_with_its_sentence() -> None:
    # cut off, "1." was a sentence: embedded, a hit for nothing, and a place in every fixed window
    licence = (
        '1. Definitions.\n\n   "License" shall mean the terms.\n\n2. Grant of License. Subject to the terms, it grants.'
    )
    assert pieces(licence) == [
        "1. Definitions.",
        '"License" shall mean the terms.',
        "2. Grant of License.",
        "Subject to the terms, it grants.",
    ]
    numbered = ["2.1. Scope.", "This applies.", "iv. Term.", "It ends."]
    assert pieces(" ".join(numbered)) == numbered
    assert pieces("Steps:\n\n1. Install the package. Then run it.\n2. Open the app.") == [
        "Steps:",
        "1. Install the package.",
        "Then run it.",
        "2. Open the app.",
    ]
    # after the word that names it, a number opens its sentence too: a filing's item, a contract's section
    labelled = ["Item 7. Management's Discussion.", "Revenue grew.", 'Section 1.01. "Affiliate" means any entity.']
    assert pieces(" ".join(labelled)) == labelled
    # a number later in a sentence ends it as before
    assert pieces("He came in 2. Then he left. See Section 3. It says so.") == [
        "He came in 2.",
        "Then he left.",
        "See Section 3.",
        "It says so.",
    ]


def test_a_lower_case_list_item_after_a_sentence_starts_the_next() -> None:
    # the item's lower-case marker read as the sentence going on: "First clause.\nb." was one unit
    assert pieces("a. First clause.\nb. Second clause.") == ["a. First clause.", "b. Second clause."]
    assert pieces("i. First clause. ii. Second clause.") == ["i. First clause.", "ii. Second clause."]
    # lower-case words go on as before: an abbreviation, an ellipsis, an item whose text is lower case
    assert pieces("See e.g. the figure. Well... maybe. x. y is here.") == [
        "See e.g. the figure.",
        "Well... maybe. x. y is here.",
    ]


def test_bulleted_lines_are_items_as_markdowns_are() -> None:
    # a PDF's or a plain text's bullets ran into one unit with the sentence after the list
    text = (
        "Each is covered by the warranty.\nIn the box:\n\u2022 Power adapter with a cable\n"
        "\u25cfRemote control\n\uf0b7 Wall mount\n\u2013 Two batteries\nKeep the receipt. It is needed."
    )
    assert pieces(text) == [
        "Each is covered by the warranty.",
        "In the box:",
        "\u2022 Power adapter with a cable",
        "\u25cfRemote control",
        "\uf0b7 Wall mount",
        "\u2013 Two batteries\nKeep the receipt.",  # as after a Markdown item: a line of no item goes on in it
        "It is needed.",
    ]
    no_item = "It was cold:\n\u20135 degrees at noon."  # a dash with no space after it is a minus
    assert pieces(no_item) == [no_item]


def test_a_case_citation_and_a_clause_reference_do_not_end_a_sentence() -> None:
    text = "In Altera Corp. v. Commissioner the court agreed, as cl. 4 and Sch. 2 provide. It was final."
    cited = "In Altera Corp. v. Commissioner the court agreed, as cl. 4 and Sch. 2 provide."
    assert pieces(text) == [cited, "It was final."]


def test_a_letter_after_a_word_is_no_labelled_number() -> None:
    # "Section 1.01." and "Part II." open their sentences; "First a." is a sentence that ends
    assert pieces("First a. First b. Part II. Other Information.") == [
        "First a.",
        "First b.",
        "Part II. Other Information.",
    ]
