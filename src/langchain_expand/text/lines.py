"""The spans a text's lines make: lines, list items, a table's rows, markup joined to its unit; trimmed.

What :class:`~langchain_expand.text.sentences.SentenceSplitter` cuts a block into before its
sentences, and what the section splitters read a text's lines with.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from langchain_expand.text import markdown

__all__ = [
    "LINE",
    "LIST_ITEM",
    "Span",
    "attach_markup",
    "lines_within",
    "list_items",
    "stripped",
    "table_rows",
    "trimmed",
    "visible_at",
]

Span = tuple[int, int]
"""A half-open ``[start, end)`` range of char offsets."""

LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n|$)")
"""One line with its line break (the last may have none); an empty match ends the text."""
_BULLETS = "\u2022\u2023\u2043\u00b7\u25a0\u25a1\u25aa\u25b8\u25ba\u25cb\u25cf\u25e6\u27a2\u27a4\uf0a7\uf0b7"
"""A bullet that marks a list item with or without a space after it: ``•``, ``‣``, ``▪``, ``●``, ``◦``, ``➢``, and
the private-use ones of a Symbol or Wingdings font that a PDF's text keeps."""
LIST_ITEM = re.compile(rf"\s*(?:[{_BULLETS}]|(?:[-*+\u2013\u2014]|\d{{1,3}}[.)])\s)")
"""A list item's marker at the start of a line: Markdown's (``-``, ``*``, ``+``, ``1.``, ``1)``), a dash, a bullet."""
ADMONITION = re.compile(r"(?:/{3,}|:{3,}|!{3}|\?{3})[ \t]*\w")
"""An admonition's opener (``/// note``, ``::: tip``, ``!!! warning``)."""


def attach_markup(text: str, spans: list[Span]) -> list[Span]:
    """Join markup lines to a neighbouring unit instead of counting them as sentences.

    A unit without a letter or digit ("////", "---", "...") joins the unit before it; an
    admonition opener ("/// note", "::: tip", "!!! warning") joins the unit after it.
    As units of their own they would count as sentences of one or two tokens and make a
    window of n sentences hold less text than n sentences.
    """
    out: list[Span] = []
    opener: Span | None = None  # an admonition opener waiting for its first sentence
    for start, end in spans:
        unit = text[start:end]
        if out and opener is None and not any(ch.isalnum() for ch in unit):
            out[-1] = (out[-1][0], end)
            continue
        if ADMONITION.match(unit) and "\n" not in unit:
            if opener is not None:
                out.append(opener)
            opener = (start, end)
            continue
        out.append((start if opener is None else opener[0], end))
        opener = None
    if opener is not None:
        out.append(opener)
    if len(out) > 1 and not any(ch.isalnum() for ch in text[out[0][0] : out[0][1]]):
        out[:2] = [(out[0][0], out[1][1])]
    return out


def table_rows(text: str, start: int, end: int) -> Iterator[Span]:
    """A table's column headings as one unit, then each later row."""
    rows = list(lines_within(text, start, end))
    head = markdown.heading_rows([text[a:b] for a, b in rows])
    if head:
        yield (rows[0][0], rows[head - 1][1])
    yield from rows[head:]


def lines_within(text: str, start: int, end: int) -> Iterator[Span]:
    """Each non-blank line of ``text[start:end]``, trimmed."""
    for m in LINE.finditer(text, start, end):
        if m.end() > m.start():
            yield from trimmed(text, m.start(), m.end())


def list_items(text: str, start: int, end: int) -> Iterator[Span]:
    """Split a soft-wrapped paragraph before each list item (:data:`LIST_ITEM`)."""
    cut = start
    for m in LINE.finditer(text, start, end):
        if m.start() > cut and LIST_ITEM.match(text, m.start(), m.end()):
            yield (cut, m.start())
            cut = m.start()
    if cut < end:
        yield (cut, end)


def stripped(text: str, start: int, end: int) -> Span | None:
    """``text[start:end]`` without its leading and trailing whitespace, as offsets; None if nothing is left."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


def trimmed(text: str, start: int, end: int) -> Iterator[Span]:
    """:func:`stripped`, as a span to yield, or none."""
    span = stripped(text, start, end)
    if span is not None:
        yield span


def visible_at(text: str, pos: int, end: int) -> int:
    """Where the first character from ``pos`` that is not whitespace stands; ``end`` if none is before it."""
    while pos < end and text[pos].isspace():
        pos += 1
    return pos
