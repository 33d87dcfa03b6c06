r"""Markdown structure from a real parser (``markdown-it-py``, CommonMark plus tables).

Line-based rules miss what nesting hides: a fenced code block inside a blockquote (``> ```py``)
or indented under a list item is code all the same, and a ``#`` line inside it is not a
heading. The parser knows; its line maps give each block's first and last line, which the
splitters turn into char offsets with their own line table.

Lines are counted as the parser counts them: ``\\r\\n``, ``\\r`` and ``\\n`` each end one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from markdown_it import MarkdownIt

__all__ = [
    "BOM",
    "HEADING_ROWS",
    "Block",
    "Heading",
    "blocks",
    "first_cell",
    "heading_rows",
    "headings",
    "is_separator",
    "tables",
]

_MAYBE = re.compile(r"`{3,}|~{3,}|\||^\ufeff? {0,3}#", re.MULTILINE)
"""Text without any of these has no fence, table or heading: the parser is skipped."""
BOM = "\ufeff"
"""The byte-order mark a file saved on Windows may start with: not text (a heading after it is still one)."""
HEADING_ROWS = 3
"""A table's column headings are at most this many rows (the header row and sub-header rows)."""
_SEPARATOR = re.compile(r"\s*+\|?+(?:\s*+:?+-++:?+\s*+\|)++\s*+:?+-*+:?+\s*+\|?+\s*+")
"""Possessive throughout: no backtracking, so a check is linear in the row (a run of spaces was quadratic)."""


@dataclass(frozen=True)
class Block:
    """A block the splitters keep whole (code, table) or apart (heading), by line numbers."""

    kind: Literal["atomic", "table", "heading"]
    first: int
    last: int
    """Inclusive."""


@dataclass(frozen=True)
class Heading:
    """A top-level heading: its line, level (``#`` is 1) and text."""

    line: int
    level: int
    title: str


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # Block structure only: inline markup (emphasis, links) is never read here, and parsing it
    # costs most of a parse (seconds on 200k chars of a table or of ``[`` runs).
    return MarkdownIt("commonmark").enable("table").disable("inline")


@lru_cache(maxsize=2)  # the splitters of one document share a parse
def _tokens(text: str) -> tuple:  # type: ignore[type-arg]
    # A byte-order mark read as a space: the same lines, and a first line's heading parses as one.
    return tuple(_parser().parse(" " + text[1:] if text.startswith(BOM) else text))


def blocks(text: str) -> list[Block]:
    """Fenced code blocks (``atomic``; at any nesting: in blockquotes, list items), tables and headings.

    Indented code blocks are left to prose: indentation alone is too common in plain text
    to mean code. Sorted by first line; nested blocks are not listed twice.
    """
    if not _MAYBE.search(text):
        return []
    out: list[Block] = []
    for token in _tokens(text):
        if token.map is None:
            continue
        first, end = token.map
        if token.type == "fence":
            out.append(Block("atomic", first, end - 1))
        elif token.type == "table_open":
            out.append(Block("table", first, end - 1))
        elif token.type == "heading_open":
            out.append(Block("heading", first, end - 1))
    out.sort(key=lambda b: b.first)
    kept: list[Block] = []
    for block in out:
        if not kept or block.first > kept[-1].last:
            kept.append(block)
    return kept


def tables(text: str) -> list[Block]:
    """Tables (at any nesting), sorted by first line."""
    if not _MAYBE.search(text):
        return []
    return [Block("table", t.map[0], t.map[1] - 1) for t in _tokens(text) if t.type == "table_open" and t.map]


def headings(text: str, max_level: int = 6) -> list[Heading]:
    """Top-level headings of level ``max_level`` or above (not those quoted or in list items)."""
    if not _MAYBE.search(text):
        return []
    tokens = _tokens(text)
    out = []
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0 and token.map is not None:
            level = int(token.tag[1])
            if level <= max_level:
                title = tokens[i + 1].content.strip() if i + 1 < len(tokens) else ""
                out.append(Heading(token.map[0], level, title))
    return out


def is_separator(row: str) -> bool:
    """Whether a table line is its delimiter row (``|---|:--:|``)."""
    return _SEPARATOR.fullmatch(row) is not None


def first_cell(row: str) -> str:
    """A table row's first cell, stripped ("" when it is empty).

    Found without cutting the row into all its cells: on one row of 400k characters that
    made 100k strings, and took 6-7x as long as a row a quarter its length.
    """
    text = row.lstrip()
    start = 1 if text.startswith("|") else 0
    end = text.find("|", start)
    return text[start : end if end >= 0 else len(text)].strip()


def heading_rows(rows: Sequence[str]) -> int:
    """How many of a table's first lines are its column headings, the delimiter row included.

    The headings are the header row and the rows after it whose first cell is empty (a year
    or unit row under a header: ``|  | 2019 | 2018 |``), at most ``HEADING_ROWS`` of them.
    """
    taken = 0
    line = 0
    while line < len(rows) and taken < HEADING_ROWS:
        row = rows[line]
        if is_separator(row):
            line += 1
            continue
        if taken and first_cell(row):
            break
        taken += 1
        line += 1
    return line
