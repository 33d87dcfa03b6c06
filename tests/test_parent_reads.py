"""What a parents query reads and counts once: token counts kept between calls (``parents/reads.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from langchain_expand import TokenCounter
from langchain_expand.parents import reads
from langchain_expand.parents.reads import COUNTS_REMEMBERED, CallReads, kept_count


class _Logged(TokenCounter):
    """A real tiktoken counter that notes each text it counts."""

    def __init__(self, encoding: str = "cl100k_base") -> None:
        super().__init__(encoding)
        self.counted: list[str] = []

    def __call__(self, text: str) -> int:
        self.counted.append(text)
        return super().__call__(text)


TEXTS = ["A parent of one sentence.", "Ein Abschnitt über Straße und Café. 第二句。", "x" * 5000]


@pytest.fixture(autouse=True)
def nothing_kept() -> Iterator[None]:
    """Each test starts with no count kept, as a new process does."""
    reads._kept.cache_clear()
    yield
    reads._kept.cache_clear()


def test_a_kept_count_is_the_count() -> None:
    counter = _Logged()
    first = [kept_count(counter, t) for t in TEXTS]
    again = [kept_count(counter, t) for t in TEXTS]
    assert first == again == [TokenCounter()(t) for t in TEXTS]
    assert counter.counted == TEXTS  # the second time, each count was the one kept


def test_counts_are_kept_by_encoding_and_text() -> None:
    """Another encoding counts the same text anew (o200k_base gives another count); another
    counter of the same encoding is given the count kept; a text one character longer is counted."""
    text = "Wireless PowerShare charges another device from the phone's battery: 🔋 ⚡ ×3."
    assert kept_count(_Logged(), text) == TokenCounter()(text)
    assert kept_count(_Logged("o200k_base"), text) == TokenCounter("o200k_base")(text) != TokenCounter()(text)
    other = _Logged()
    assert kept_count(other, text) == TokenCounter()(text)
    assert other.counted == []
    assert kept_count(other, text + "!") == TokenCounter()(text + "!")
    assert other.counted == [text + "!"]


class _Chat(TokenCounter):
    """Counts as a chat format does: each text's tokens and 4 of its own."""

    def __call__(self, text: str) -> int:
        return super().__call__(text) + 4


def test_a_counter_class_that_counts_otherwise_keeps_its_own_counts() -> None:
    """A subclass of ``TokenCounter`` on the same encoding is not given the counts of another class."""
    assert [kept_count(TokenCounter(), t) for t in TEXTS] == [TokenCounter()(t) for t in TEXTS]
    assert [kept_count(_Chat(), t) for t in TEXTS] == [TokenCounter()(t) + 4 for t in TEXTS]
    assert [kept_count(TokenCounter(), t) for t in TEXTS] == [TokenCounter()(t) for t in TEXTS]


def test_a_counter_without_a_key_counts_every_time() -> None:
    """Any counter other than a ``TokenCounter`` on an encoding has no name to keep its counts under."""
    counted: list[str] = []

    def words(text: str) -> int:
        counted.append(text)
        return len(text.split())

    assert [kept_count(words, t) for t in TEXTS * 2] == [len(t.split()) for t in TEXTS * 2]
    assert [kept_count(TokenCounter(count=words), t) for t in TEXTS] == [len(t.split()) for t in TEXTS]
    assert counted == TEXTS * 3


def test_the_least_recently_used_counts_go_past_the_limit() -> None:
    counter = _Logged()
    texts = [f"parent {i}" for i in range(COUNTS_REMEMBERED + 1)]
    kept_count(counter, texts[0])
    for text in texts[2:]:  # one short of the limit with the first
        kept_count(counter, text)
    kept_count(counter, texts[0])  # used again: now the most recent
    kept_count(counter, texts[1])  # one past the limit: the least recently used, texts[2], goes
    counter.counted.clear()
    for text in (texts[0], texts[1], texts[-1], texts[2]):
        kept_count(counter, text)
    assert counter.counted == [texts[2]]


def test_a_calls_reads_count_each_text_once_and_keep_it_for_the_next_call() -> None:
    counter = _Logged()
    first = CallReads({}, counter, str)  # type: ignore[arg-type]  # counting reads no docstore
    assert [first.count(t) for t in TEXTS * 2] == [TokenCounter()(t) for t in TEXTS * 2]
    second = CallReads({}, counter, str)  # type: ignore[arg-type]
    assert [second.count(t) for t in TEXTS] == [TokenCounter()(t) for t in TEXTS]
    assert counter.counted == TEXTS
