"""Every function that reads unit or document text runs in time linear in the text.

One document with a long line must not be able to stall every query that touches it, nor its
own indexing: a regular expression that backtracks over every split of a line costs seconds on
a unit of a few thousand characters. Each test runs a function on adversarial inputs at one size
and at four times that size, and fails where the time grows by more than ``LIMIT`` (linear is
4x, quadratic 16x). It is a ratio of two CPU-time measurements taken in the same test, so a slow
or busy machine slows both sides alike (wall-clock time would not: see ``_seconds``); a ratio
over the limit is measured again, each side the fastest of five taken in turn.

The sizes are small first (12.5k and 50k chars), so that a quadratic function fails in seconds
rather than running for minutes, then 100k and 400k.
"""

from __future__ import annotations

import functools
import gc
import time
from collections.abc import Callable

import pytest
from langchain_core.documents import Document

from langchain_expand import SentenceSplitter, StructuralPrefix, TokenCounter
from langchain_expand.store.words import words
from langchain_expand.text import cues, markdown
from langchain_expand.text.sections import MarkdownSectionSplitter

LIMIT = 10.0
"""The most a function's time may grow when its input grows 4x."""

SIZES = ((12_500, 50_000), (100_000, 400_000))


def _repeat(text: str, n: int) -> str:
    return (text * (n // len(text) + 1))[:n]


ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "one line without breaks": lambda n: _repeat("lorem ipsum dolor ", n),
    "a word of n letters": lambda n: "a" * n,
    "only line breaks": lambda n: "\n" * n,
    "only CRLF": lambda n: "\r\n" * (n // 2),
    "only spaces": lambda n: " " * n,
    "only punctuation": lambda n: "." * n,
    "mixed punctuation": lambda n: _repeat("?!.)'", n),
    "CJK full stops": lambda n: "\u3002" * n,
    "CJK sentences": lambda n: _repeat("\u5929\u6c14\u5f88\u597d\u3002\u300d", n),
    "dandas and Arabic question marks": lambda n: _repeat("\u0964\u061f \u0965 ", n),
    "| run": lambda n: "|" * n,
    "# run": lambda n: "#" * n,
    "= run": lambda n: "=" * n,
    "- run": lambda n: "-" * n,
    "> run": lambda n: ">" * n,
    "[ run": lambda n: "[" * n,
    "* run": lambda n: "*" * n,
    "a delimiter row that fails at its end": lambda n: _repeat("| --- ", n) + "x",
    "a title, spaces, then an underline": lambda n: "Title" + " " * n + "\n===",
    "a heading with an attribute-like tail": lambda n: "# Title {" + " " * n + "\n\ntext.",
    "a table of n chars": lambda n: "| a | b |\n|---|---|\n" + _repeat("| 1 | 2 |\n", n),
    "one table row of n chars": lambda n: "| a | b |\n|---|---|\n|" + " x |" * (n // 4),
    "a speaker line": lambda n: "Anna: " + _repeat("well. ", n),
    "numbered clauses": lambda n: _repeat("1. 2.1. ii. x. ", n),
    "a bullet a line": lambda n: _repeat("\u2022\n", n),
    "a label, spaces, then abbreviations": lambda n: "Section" + " " * n + _repeat("Dr. ", n),
    "lower-case items after sentences": lambda n: _repeat("end.  b.  c) ", n),
    "a clause number before a long word": lambda n: "1. " + "a" * n + ". B",
}


def _seconds(fn: Callable[[str], object], text: str, repeat: int) -> float:
    """The CPU time of ``repeat`` calls: the work done, whatever share of the CPU the scheduler gives.

    Wall-clock time is not that on a busy machine: a process that has waited gets the CPU at
    once for a few milliseconds, so a short timing ran at full speed and a long one at a
    fraction, and linear checks looked 13-27x slower on 4x the input (Session 21, load 9).
    """
    started = time.thread_time()
    for _ in range(repeat):
        fn(text)
    return time.thread_time() - started


def _growth(fn: Callable[[str], object], small: str, large: str, *, robust: bool = False) -> float:
    """How much longer ``fn`` takes on ``large`` than on ``small``, each timed over enough calls to
    be well above the timer's resolution; ``robust``: each the fastest of five timings, the two
    sizes taken in turn.

    What a busy machine adds to CPU time (another process's use of the caches, a timer tick) only
    ever adds, and it comes in bursts: timed in turn, a burst cannot fall on one size's timings
    alone (a make test run beside model loading once timed one side in one: 10.4-16.2x, 4x idle).
    """
    repeat = 1
    while _seconds(fn, small, repeat) < 0.005 and repeat < 4096:
        repeat *= 4
    if not robust:
        return _seconds(fn, large, repeat) / max(_seconds(fn, small, repeat), 1e-9)
    pairs = [(_seconds(fn, small, repeat), _seconds(fn, large, repeat)) for _ in range(5)]
    return min(lg for _, lg in pairs) / max(min(sm for sm, _ in pairs), 1e-9)


def assert_linear(fn: Callable[[str], object], sizes: tuple[tuple[int, int], ...] = SIZES) -> None:
    """``fn``'s time grows at most ``LIMIT``-fold on every adversarial input made 4x larger."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        for name, make in ADVERSARIAL.items():
            for small, large in sizes:
                texts = make(small), make(large)
                ratios = []
                for attempt in range(4):  # a retry times each size five times, in turn, and keeps the fastest
                    ratios.append(_growth(fn, *texts, robust=attempt > 0))
                    if ratios[-1] < LIMIT:
                        break
                else:
                    pytest.fail(
                        f"{name}: {len(texts[0]):,} -> {len(texts[1]):,} chars took "
                        f"{', '.join(f'{r:.1f}x' for r in ratios)} longer (linear: 4x, limit {LIMIT}x)"
                    )
    finally:
        if enabled:
            gc.enable()


def _parsed(fn: Callable[[str], object]) -> Callable[[str], object]:
    """``fn`` with the Markdown parse it shares with the splitter forgotten first, so each call parses."""

    def fresh(text: str) -> object:
        markdown._tokens.cache_clear()
        return fn(text)

    return fresh


_COUNTER = TokenCounter()
_SPLITTER = SentenceSplitter()


@functools.lru_cache(maxsize=2)
def _spans(text: str) -> list[tuple[int, int]]:
    return _SPLITTER(text)


def _context(text: str) -> object:
    return StructuralPrefix()(text, _spans(text))  # the context alone is timed: the spans are kept


TEXT_FUNCTIONS: dict[str, Callable[[str], object]] = {
    # on the query path: what growth reads of each unit it weighs
    "cues.heading": cues.heading,
    "cues.tied": lambda text: cues.tied(text, text),
    "cues.cues": lambda text: cues.cues(text, "\n"),
    "words.words (a query's terms)": words,
    # on the indexing path
    "SentenceSplitter()": _parsed(_SPLITTER),
    "SentenceSplitter(table_rows=True, line_breaks='hard')": _parsed(
        SentenceSplitter(table_rows=True, line_breaks="hard")
    ),
    "SentenceSplitter(max_unit_tokens=None)": _parsed(SentenceSplitter(max_unit_tokens=None)),
    "TokenCounter": _COUNTER,
    "markdown.blocks": _parsed(markdown.blocks),
    "markdown.headings": _parsed(markdown.headings),
    "markdown.is_separator": markdown.is_separator,
    "markdown.heading_rows": lambda text: markdown.heading_rows(text.split("\n")),
    "StructuralPrefix": _context,
    "MarkdownSectionSplitter": _parsed(lambda text: MarkdownSectionSplitter().sections(Document(text))),
}


@pytest.mark.integration
@pytest.mark.parametrize("name", list(TEXT_FUNCTIONS))
def test_text_function_is_linear_on_adversarial_input(name: str) -> None:
    assert_linear(TEXT_FUNCTIONS[name])


def test_the_check_fails_on_a_quadratic_function() -> None:
    """The check itself: a function that backtracks over every split of a line is caught.

    On inputs long enough (8,000 and 32,000 chars) that the scheduler of a busy machine (load 8-9
    on 2 cores) cannot stretch one timing enough to hide a 16x growth, and in one of three runs
    at least; idle, every run catches it."""
    import re

    quadratic = re.compile(r"[^\n]*\w[^\n]*\n===")  # the shape of the heading check that was quadratic

    messages = []
    for _ in range(3):
        try:
            assert_linear(quadratic.fullmatch, sizes=((8_000, 32_000),))  # long enough to time on a busy machine
        except pytest.fail.Exception as failed:
            messages.append(str(failed))
            break
    assert messages, "the linearity check passed a quadratic function three times"
    assert "limit" in messages[0]
