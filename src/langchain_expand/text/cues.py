"""A unit's cues about the text beside it: a table row goes on into the next, a heading starts a section.

Guided growth takes a table's rows together and does not grow up past a heading; both are read
from a unit's own text and the gap after it, once, and kept as one of four :class:`Cues`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from langchain_expand.text.lines import LIST_ITEM
from langchain_expand.text.markdown import BOM

__all__ = ["EVERY_CUES", "NO_CUES", "Cues", "cues", "cues_code", "heading", "tied"]

_ONE_LINE_BREAK = re.compile(r"[ \t]*(?:\r\n|\r|\n)[ \t]*")
_ATX_HEADING = re.compile(r"\ufeff?#{1,6}(?:[ \t]|$)")  # after a file's byte-order mark (BOM) too
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_UNDERLINE = re.compile(r" {0,3}(?:={3,}|-{3,})[ \t]*")
_WORD_CHAR = re.compile(r"\w")
_ROW_STARTS = ("|", BOM + "|")  # a table's first row after a file's byte-order mark too
_ATX_STARTS = ("#", BOM + "#")
"""How an ATX heading starts (:data:`_ATX_HEADING`): a unit that does not, on one line, is no heading."""


def tied(text: str, gap: str) -> bool:
    """Whether a unit and the next are rows of one Markdown table: growth takes them together.

    ``text`` is the unit's text and ``gap`` what lies between it and the next unit. A table
    row starts and ends with ``|`` and the table goes on after a single line break (a blank
    line ends it). A table written without its outer pipes is not recognised: its rows
    grow one at a time, as sentences do.
    """
    return text.startswith(_ROW_STARTS) and text[-1:] == "|" and _ONE_LINE_BREAK.fullmatch(gap) is not None


def heading(text: str) -> bool:
    """Whether a unit is a heading: a section starts with it.

    Markdown's ``#`` to ``######`` on one line (a unit of several lines that starts with ``#``,
    a comment in unfenced code, is not one), or a line underlined with ``===`` or ``---`` (a
    setext heading; reStructuredText's titles too). The splitter makes the underlined line a unit
    of its own where a blank line follows it (reStructuredText requires one) or the document is
    parsed as Markdown. Guided windows do not grow up past a heading.
    """
    if not text.startswith(_ATX_STARTS) and "\n" not in text and "\r" not in text:
        return False  # most units: read a few hundred times a query, with no regular expression
    if _ATX_HEADING.match(text) is not None:
        return "\n" not in text and "\r" not in text
    # Two lines, read in one pass each (a regular expression over both backtracked over every
    # split of a long line: quadratic in a unit's length, on the query path).
    brk = _LINE_BREAK.search(text)
    if brk is None or _UNDERLINE.fullmatch(text, brk.end()) is None:
        return False
    if _WORD_CHAR.search(text, 0, brk.start()) is None:
        return False
    return LIST_ITEM.match(text) is None and not text.lstrip().startswith((">", "|"))


class Cues(NamedTuple):
    """What a unit says of the text beside it, read from its own text and the gap after it."""

    tied: bool = False
    """It and the next unit are rows of one table (:func:`tied`)."""
    heading: bool = False
    """It is a heading (:func:`heading`)."""


NO_CUES = Cues()
"""A unit that is neither a table row nor a heading."""

EVERY_CUES = tuple(Cues(tied, heading) for tied in (False, True) for heading in (False, True))
"""The four cues a unit can have, one object each, at ``2 * tied + heading`` (:func:`cues_code`)."""


def cues_code(found: Cues) -> int:
    """``found``'s place in :data:`EVERY_CUES`: a small int to keep where a tuple of cues would be an object."""
    return 2 * found.tied + found.heading


def cues(text: str, gap: str) -> Cues:
    """A unit's :class:`Cues`, from its text and what lies between it and the next unit.

    One of the four objects of :data:`EVERY_CUES`, so a list of many units' cues costs a pointer each.
    """
    return EVERY_CUES[2 * tied(text, gap) + heading(text)]
