"""What a sentence means where it stands: the text embedded with it, never returned.

A sentence alone often lacks the words a question uses. The second sentence of a turn
("She could be giving birth in the cab .") does not name its speaker; a manual's "Press and
hold the button" does not name the feature its section is about; the later rows of a long
table do not carry its column headings. :class:`StructuralPrefix` reads the document's
structure and gives each sentence a short prefix that is embedded with it (the stored text,
offsets and windows are the sentence's own):

- **headings**: the title of the Markdown heading above the sentence's line;
- **tables**: a table row's column headings (the header row, and the rows after it whose
  first cell is empty: headings over a column of row labels), when the sentence does not
  hold them;
- **labels**: a ``Speaker: text`` line's label, for the sentences of the line after the first
  (the first holds it).

Structure, not neighbouring sentences: a table row's neighbours are other rows, and its
headings are what it lacks.
"""

from __future__ import annotations

import bisect
import re
import typing
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_expand.text import markdown
from langchain_expand.text.sentences import SPEAKER, Span

__all__ = ["EmbeddingPrefix", "StructuralPrefix"]

EmbeddingPrefix = typing.Callable[[str, Sequence[Span]], list[str]]
EmbeddingPrefix.__doc__ = """What is embedded before each sentence (or child), and never returned.

Called as ``prefix(text, spans)`` with a document's whole text and its units' ``(start, end)``
char spans, it returns one prefix per span, ``""`` for none; the retriever embeds
``prefix + text[start:end]``, so a unit is matched with what it needs to be understood (the
heading above it, its table's column names, its line's speaker). :class:`StructuralPrefix` is
the default; any function of that shape will do, and a change re-embeds a document when it is
next added. One string per span, or the document is refused by name before anything is written."""

_LABEL_WORDS = 5  # "Ross Geller", "PhD F", "Chair (Mark Reckless)"
_TERMINATOR = re.compile(r"[.!?]\s")
_NEWLINE = re.compile(r"\r\n|\r|\n")  # line ends as the Markdown parser counts them


@dataclass(frozen=True)
class StructuralPrefix:
    r"""Each sentence's heading, table headings and speaker label, as a prefix to embed with it.

    Example:
        .. code-block:: python

            from langchain_expand import StructuralPrefix

            text = "# Setup\nAnna: Plug it in. Then wait.\n"
            prefix = StructuralPrefix()
            prefix(text, [(8, 25), (26, 36)])  # ['Setup\n', 'Setup\nAnna: ']
    """

    revision_type: typing.ClassVar[str] = "langchain_expand.text.context.StructuralContext"
    """The name each document's stored revision knows this class by (its name before it was
    renamed; :func:`~langchain_expand.store.records.fingerprint`): the rename re-embeds nothing."""

    headings: bool = True
    """Prefix the title of the Markdown heading above the sentence."""
    tables: bool = True
    """Prefix a table row's column headings."""
    labels: bool = True
    """Prefix a ``Label: text`` line's label to the line's later sentences."""
    max_chars: int = 200
    """Each part is cut to this many characters (a wide table's headings, a long title)."""

    def __post_init__(self) -> None:
        if isinstance(self.max_chars, bool) or not isinstance(self.max_chars, int) or self.max_chars < 1:
            msg = f"`max_chars` must be an int >= 1, got {self.max_chars!r}."
            raise ValueError(msg)

    def __call__(self, text: str, spans: Sequence[Span]) -> list[str]:
        """The prefix of each sentence ``text[start:end]`` of ``spans`` ("" where it has none).

        Equal prefixes are one string object, so a long document's list costs a pointer a sentence.
        """
        lines = array("q", [0])  # each line's first offset: 8 bytes a line, for a long log too
        lines.extend(m.end() for m in _NEWLINE.finditer(text))
        headings = markdown.headings(text) if self.headings else []
        heading_lines = [h.line for h in headings]
        above = _parents(headings)
        tables = _Tables(text, lines) if self.tables else None
        shared: dict[str, str] = {}
        out: list[str] = []
        for start, _ in spans:
            line = bisect.bisect_right(lines, start) - 1
            parts: list[str] = []
            at = bisect.bisect_right(heading_lines, line) - 1  # the last heading at or above this line
            if at >= 0 and heading_lines[at] == line:  # a heading's own prefix is the heading it is under
                at = above[at]
            if at >= 0:
                parts.append(_title(headings[at].title)[: self.max_chars] + "\n")
            header = tables.header(line) if tables is not None else None
            if header is not None:
                if header:
                    parts.append(header[: self.max_chars] + "\n")
            elif self.labels:
                label = _label(text, lines[line], start)
                if label:
                    parts.append(label[: self.max_chars] + " ")
            prefix = "".join(parts)
            out.append(shared.setdefault(prefix, prefix))
        return out


def checked_prefixes(
    prefix: EmbeddingPrefix, text: str, spans: Sequence[Span], doc_id: str, *, setting: str, unit: str
) -> list[str] | None:
    """``prefix``'s string for each of ``spans``, checked; None where none has one.

    ``setting`` and ``unit`` name the retriever's setting and what a span is, for the error.

    Raises:
        ValueError: Naming the document, when ``prefix`` does not return one string per span.
    """
    prefixes = prefix(text, spans)
    if not isinstance(prefixes, list) or len(prefixes) != len(spans) or not all(isinstance(p, str) for p in prefixes):
        got = f"{len(prefixes)} items" if isinstance(prefixes, list) else type(prefixes).__name__
        msg = (
            f"Document {doc_id!r}: `{setting}` must return a list of {len(spans)} strings "
            f"(one per {unit}), got {got}. Fix the callable, or pass {setting}=None."
        )
        raise ValueError(msg)
    return prefixes if any(prefixes) else None


class _Tables:
    """The Markdown tables of one text, and the column headings each of their rows lacks."""

    def __init__(self, text: str, lines: array[int]) -> None:
        self._text = text
        self._lines = lines
        self._tables = markdown.tables(text)
        self._firsts = [t.first for t in self._tables]
        self._headers: dict[int, tuple[int, str]] = {}  # a table's first line -> (its heading rows' end, them)

    def header(self, line: int) -> str | None:
        """None outside a table; else the headings a row at ``line`` lacks ("" on a heading row)."""
        at = bisect.bisect_right(self._firsts, line) - 1
        if at < 0 or line > self._tables[at].last:
            return None
        table = self._tables[at]
        if table.first not in self._headers:
            self._headers[table.first] = self._headings(table.first, table.last)
        end, header = self._headers[table.first]
        return "" if line < end else header

    def _headings(self, first: int, last: int) -> tuple[int, str]:
        """The table's column headings (:func:`markdown.heading_rows`): (the line after them, their text)."""
        lines = [self._line(line) for line in range(first, min(last, first + 2 * markdown.HEADING_ROWS) + 1)]
        end = markdown.heading_rows(lines)
        return first + end, "\n".join(row.strip() for row in lines[:end] if not markdown.is_separator(row))

    def _line(self, line: int) -> str:
        end = self._lines[line + 1] if line + 1 < len(self._lines) else len(self._text)
        return self._text[self._lines[line] : end]


def _title(title: str) -> str:
    """A heading's words, without an attribute list (``Quotes { #quotes }``: MkDocs, Pandoc)."""
    bare = title.rstrip()
    opening = bare.rfind("{") if bare.endswith("}") else -1
    if opening < 0 or "}" in bare[opening + 1 : -1]:
        return title
    return bare[:opening].rstrip() or title


def _label(text: str, line: int, start: int) -> str:
    """The ``Label:`` that starts the line at ``line``, where it ends before ``start``; else ""."""
    found = SPEAKER.match(text, line, start)
    if found is None:
        return ""
    label = text[found.start() : found.end()].rstrip()
    if len(label.split()) > _LABEL_WORDS or _TERMINATOR.search(label):
        return ""  # a sentence that ends in a colon, not a label
    return label


def _parents(headings: Sequence[markdown.Heading]) -> list[int]:
    """For each heading, the index of the closest one above it of a higher level (-1: none)."""
    out: list[int] = []
    stack: list[int] = []
    for i, heading in enumerate(headings):
        while stack and headings[stack[-1]].level >= heading.level:
            stack.pop()
        out.append(stack[-1] if stack else -1)
        stack.append(i)
    return out
