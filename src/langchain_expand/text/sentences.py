"""Sentence splitting into char offsets, Markdown-aware and bounded in tokens.

A window's size is (before + after + 1) x tokens per sentence, so the bound holds only
if sentences are real. The splitter returns ``(start, end)`` offsets into the text it
was given, so every unit the library returns maps back to its document, and it caps
every unit at ``max_unit_tokens`` so that logs, code and tables cannot produce unbounded
pseudo-sentences.
"""

from __future__ import annotations

import itertools
import re
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from langchain_expand.calls import deprecated
from langchain_expand.text import markdown
from langchain_expand.text.lines import (
    LINE,
    Span,
    attach_markup,
    lines_within,
    list_items,
    table_rows,
    trimmed,
    visible_at,
)
from langchain_expand.text.tokens import TokenCounter, count_many, count_spans

__all__ = ["SentenceSplitter", "Span", "Splitter"]

_UNSET: typing.Final = object()

Splitter = typing.Callable[[str], list[Span]]
Splitter.__doc__ = """Anything that turns a text into its units: ordered, non-overlapping ``(start, end)`` char spans.

The window retriever's ``splitter`` is one: :class:`SentenceSplitter` by default, or any
function of that shape (a spaCy or NLTK sentencizer that returns offsets). The spans must be
non-empty, inside the text, in order and without overlap (or the document is refused by
name); the text between them (whitespace, usually) is kept
and returned inside windows, so ``text[spans[0][0]:spans[-1][1]]`` is rebuilt exactly."""

ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st mt vs cf al fig figs eq no nos vol vols pp p ch sec
    approx dept est inc ltd co corp jan feb mar apr jun jul aug sep sept oct nov dec
    mon tue wed thu fri sat sun e.g i.e a.m p.m u.s u.k ph.d b.sc m.sc ca viz resp
    v para paras cl sch ss""".split()
)
"""Words that a period follows without ending the sentence (lower case, no final '.')."""

SPEAKER = re.compile(r"[^\W\d][\w .'()&-]{0,40}(?::\s|\uff1a\s*)")
"""A transcript line's speaker label (``Ross Geller: ``; ``张三：``, a full-width colon, needs no space after it)."""
_CLOSERS = "\"'\u201d\u2019)]\u300d\u300f\uff09"
"""What closes a sentence after its mark: quotes and brackets, the CJK corner brackets and parenthesis too."""
_CJK_MARKS = "\u3002\uff01\uff1f\uff61"
"""The Chinese and Japanese full stop, exclamation and question marks (``。！？｡``): no space follows them."""
_SCRIPT_MARKS = "\u0589\u061f\u06d4\u0964\u0965\u104b\u1362\u1367"
"""Other scripts' full stops and question marks, a space after them: Armenian ``։``, Arabic ``؟``,
Urdu U+06D4, Devanagari's dandas ``।`` ``॥``, Myanmar ``။``, Ethiopic ``።`` ``፧``. They mark no
abbreviation, so each ends a sentence, as ``!`` and ``?`` do."""
_ENDS = "!?" + _CJK_MARKS + _SCRIPT_MARKS
"""Marks that end a sentence wherever they close one: no abbreviation or number is read before them."""
_MARKS = ".\u2026" + _ENDS
_LINE_ENDS = ".:;\u2026\uff1a" + _ENDS
"""What a line ends in when it ends a sentence or a label; where few lines do (and few run on), each line is a unit."""
_TERMINATOR = re.compile(
    rf"(?<![{_MARKS}])(?:[{_MARKS}]++[{re.escape(_CLOSERS)}]*+(?=\s)|[{_CJK_MARKS}]++[{re.escape(_CLOSERS)}]*+)"
)
"""Sentence-ending punctuation and what closes it, then whitespace (none after a CJK mark). It
starts only at the first mark of a run and never backtracks, so a run of 100k dots is one linear
scan, not a quadratic one."""
_WORD = re.compile(r"\S+")
_NUMBER = r"\d{1,3}(?:\.\d{1,3})*"
"""A clause's number: ``1``, ``2.1``, ``1.01``."""
_ENUMERATOR = re.compile(rf"{_NUMBER}|[^\W\d_]|[ivxIVX]{{1,5}}")
"""A list item's or a clause's number before its period: ``1``, ``2.1``, ``a``, ``iv``."""
_LABEL = re.compile(r"(?:\u00a7|[A-Z][a-z]{1,11}|[A-Z]{2,12})[ \t]{1,3}")
"""A word that names what a number numbers, before it: ``Section 1.01.``, ``ARTICLE 5.``, ``Item 7.``, ``§ 2.``."""
_LABELLED = re.compile(rf"{_NUMBER}|[IVX]{{1,5}}")
"""A number after such a word: digits or a Roman numeral (``Part II.``); not a letter (``First a.``)."""
_NEXT_ITEM = re.compile(r"(?:[a-z]|[ivx]{1,4})[.)]\s++(?![a-z])")
"""A lower-case list item's marker and the start of its text, not in lower case (``b. Second``, ``ii) The``)."""


@dataclass(frozen=True)
class _Block:
    kind: Literal["prose", "atomic", "table", "heading"]
    start: int
    end: int


class SentenceSplitter:
    """Rule-based, Markdown-aware sentence splitter with a token cap on every unit.

    Rules: a sentence ends at ``.``, ``!``, ``?``, an ellipsis or another script's full stop or
    question mark (``।``, ``؟``) followed by whitespace. A period does not end one after
    an abbreviation (``Dr.``, ``e.g.``), an initial (``J.``) or a sentence's opening number
    (``1. Definitions.``, ``2.1.``, ``iv.``, ``Section 1.01.``), nor a period or an ellipsis
    before a word in lower case that is not a list item's marker (``b. Second``). Decimals
    never split. Closing quotes and brackets stay with their sentence. In Markdown, a fenced
    code block and a table are each one atomic unit and a heading is its own unit; with
    ``table_rows``, a table's column headings are one unit and each later row its own. In
    transcripts (``Speaker: text`` lines), every line is a boundary.

    The cap: any unit longer than ``max_unit_tokens`` is split at line breaks first (table
    rows, code lines, log lines), then at whitespace, then, for a single giant word,
    between characters. After splitting, no unit exceeds the cap. A line with no letter
    or digit (``////``, ``---``) is markup, not a sentence, and joins the unit before it.

    Example:
        .. code-block:: python

            from langchain_expand import SentenceSplitter

            text = "Dr. Smith paid $3.50. Then he left! Why?"
            splitter = SentenceSplitter()
            [text[s:e] for s, e in splitter(text)]
            # ['Dr. Smith paid $3.50.', 'Then he left!', 'Why?']
    """

    revision_names: typing.ClassVar[dict[str, str]] = {"max_unit_tokens": "max_tokens"}
    """Attributes under the name each document's stored revision knows them by
    (:func:`~langchain_expand.store.records.fingerprint`): renaming the cap re-embeds nothing."""

    def __init__(
        self,
        *,
        max_unit_tokens: int | None = 256,
        line_breaks: Literal["auto", "hard", "soft"] = "auto",
        markdown: bool = True,
        token_counter: TokenCounter | Callable[[str], int] | None = None,
        abbreviations: frozenset[str] = ABBREVIATIONS,
        table_rows: bool = False,
        max_tokens: int | object | None = _UNSET,
    ) -> None:
        """Build a splitter.

        Args:
            max_unit_tokens: The most tokens any unit may hold; ``None`` turns the cap off.
            line_breaks: ``"hard"`` makes every line a boundary (transcripts, logs),
                ``"soft"`` treats a single newline as a space (wrapped prose), and
                ``"auto"`` picks per document: hard for ``Speaker: text`` transcripts
                and for line-oriented text that wraps no sentences, else soft.
            markdown: Keep fenced code blocks and tables whole and headings apart.
            token_counter: Counts tokens for the cap; a ``TokenCounter`` by default.
            abbreviations: Lower-case words after which a period does not end a
                sentence.
            table_rows: Split a Markdown table into its column headings (the header row,
                the delimiter row and any sub-header rows: :func:`markdown.heading_rows`)
                and one unit per later row, so that a question about one row matches that
                row. Guided windows take a table's rows together (:func:`tied`).
            max_tokens: The old name of ``max_unit_tokens``, accepted with a
                ``DeprecationWarning``: ``max_tokens`` means the context budget everywhere else.

        Raises:
            ValueError: When ``max_unit_tokens`` is below 1 or ``line_breaks`` is unknown.
        """
        if max_tokens is not _UNSET:
            deprecated(
                "SentenceSplitter(max_tokens=...) is now max_unit_tokens=...: max_tokens means the context "
                "budget everywhere else. The old name will be removed."
            )
            max_unit_tokens = max_tokens  # type: ignore[assignment]
        if max_unit_tokens is not None and max_unit_tokens < 1:
            msg = f"`max_unit_tokens` must be >= 1 or None, got {max_unit_tokens}."
            raise ValueError(msg)
        if line_breaks not in ("auto", "hard", "soft"):
            msg = f"`line_breaks` must be 'auto', 'hard' or 'soft', got {line_breaks!r}."
            raise ValueError(msg)
        self.max_unit_tokens = max_unit_tokens
        self.line_breaks = line_breaks
        self.markdown = markdown
        self.abbreviations = abbreviations
        self.table_rows = table_rows
        if token_counter is None:
            token_counter = TokenCounter()
        self.token_counter = token_counter

    def __call__(self, text: str) -> list[Span]:
        """Split ``text`` into ordered, non-overlapping, whitespace-trimmed spans.

        Every non-whitespace character of ``text`` lies in exactly one span.
        """
        return self.counted(text)[0]

    def counted(self, text: str) -> tuple[list[Span], list[int | None]]:
        """The spans :meth:`__call__` gives, each with its count by ``token_counter`` where the cap took it.

        The cap counts every unit, and indexing counts every sentence too: it takes these
        counts instead of counting each sentence twice. None for a unit the cap split (its
        pieces are counted in groups) and for every unit when the cap is off.
        """
        spans = attach_markup(text, list(self._units(text)))
        if self.max_unit_tokens is None or not spans:
            return spans, [None] * len(spans)
        return self._cap(text, spans)

    def __repr__(self) -> str:
        rows = ", table_rows=True" if self.table_rows else ""
        return (
            f"SentenceSplitter(max_unit_tokens={self.max_unit_tokens}, "
            f"line_breaks={self.line_breaks!r}, markdown={self.markdown}{rows})"
        )

    @property
    def max_tokens(self) -> int | None:
        """The old name of :attr:`max_unit_tokens` (deprecated)."""
        deprecated("SentenceSplitter.max_tokens is now max_unit_tokens.")
        return self.max_unit_tokens

    # -- structure ---------------------------------------------------------------

    def _units(self, text: str) -> Iterator[Span]:
        lines = [(m.start(), m.end()) for m in LINE.finditer(text) if m.end() > m.start()]
        hard = self._hard_lines(text, lines)
        for block in self._blocks(text, lines):
            if block.kind == "table" and self.table_rows:
                yield from table_rows(text, block.start, block.end)
            elif block.kind != "prose":
                yield from trimmed(text, block.start, block.end)
            elif hard:
                for start, end in lines_within(text, block.start, block.end):
                    yield from self._sentences(text, start, end)
            else:
                for start, end in list_items(text, block.start, block.end):
                    yield from self._sentences(text, start, end)

    def _hard_lines(self, text: str, lines: list[Span]) -> bool:
        if self.line_breaks != "auto":
            return self.line_breaks == "hard"
        content = [text[s:e].strip() for s, e in lines]
        content = [c for c in content if c]
        if len(content) < 2:
            return False
        speakers = sum(1 for c in content if SPEAKER.match(c))
        if speakers >= 0.5 * len(content):
            return True
        ended = sum(1 for c in content if c[-1] in _LINE_ENDS)
        wrapped = sum(1 for a, b in itertools.pairwise(content) if a[-1].isalpha() and b[0].islower())
        return ended < 0.2 * len(content) and wrapped < 0.05 * len(content)

    def _blocks(self, text: str, lines: list[Span]) -> Iterator[_Block]:
        """Group lines into prose paragraphs, atomic code/table blocks and headings."""
        i, n = 0, len(lines)
        para_start: int | None = None
        para_end = 0

        def flush() -> Iterator[_Block]:
            nonlocal para_start
            if para_start is not None:
                yield _Block("prose", para_start, para_end)
                para_start = None

        structure = {b.first: b for b in markdown.blocks(text)} if self.markdown else {}
        while i < n:
            start, end = lines[i]
            line = text[start:end]
            if not line.strip():
                yield from flush()
                i += 1
                continue
            block = structure.get(i)
            if block is not None:
                yield from flush()
                last = min(block.last, n - 1)
                yield _Block(block.kind, start, lines[last][1])
                i = last + 1
                continue
            if para_start is None:
                para_start = start
            para_end = end
            i += 1
        yield from flush()

    # -- sentences -----------------------------------------------------------------

    def _sentences(self, text: str, start: int, end: int) -> Iterator[Span]:
        """Sentence spans inside ``text[start:end]``."""
        cut = start
        first = visible_at(text, cut, end)  # where the sentence being read starts
        for m in _TERMINATOR.finditer(text, start, end):
            if self._ends_sentence(text, m, end, first):
                yield from trimmed(text, cut, m.end())
                cut = m.end()
                first = visible_at(text, cut, end)
        yield from trimmed(text, cut, end)

    def _ends_sentence(self, text: str, m: re.Match[str], end: int, first: int) -> bool:
        """Whether the mark ``m`` ends the sentence that starts at ``first``.

        A list item's or a clause's number is no sentence: ``1. Definitions.`` is one (cut
        off, the number would be embedded and take a window's place), and a lower-case item
        after a sentence's end starts the next one (``first clause. b. Second``).
        """
        mark = m.group().rstrip(_CLOSERS)
        after = visible_at(text, m.end(), end)
        if after == end:
            return True
        if mark[-1] in _ENDS:
            return True
        if text[after].islower() and _NEXT_ITEM.match(text, after, end) is None:
            return False  # "e.g. the", "Well... maybe", "approx. five"
        if mark == ".":
            word_start = m.start()
            while word_start > 0 and not text[word_start - 1].isspace():
                word_start -= 1
            if word_start == first and _ENUMERATOR.fullmatch(text, word_start, m.start()):
                return False  # "1. Definitions.", "2.1. Scope.", "ii. The term"
            if _LABELLED.fullmatch(text, word_start, m.start()) and _LABEL.fullmatch(text, first, word_start):
                return False  # "Section 1.01. Terms", "Part II. Other" (the label: a few chars at most)
            word = text[word_start : m.start()].lstrip("([\"'\u201c\u2018").lower()
            if word in self.abbreviations:
                return False
            if len(word) == 1 and word.isalpha() and text[word_start].isupper():
                return False  # an initial: "J. R. R. Tolkien"
        return True

    # -- the token cap ---------------------------------------------------------------

    def _cap(self, text: str, spans: list[Span]) -> tuple[list[Span], list[int | None]]:
        """The spans with those over the cap split, and the count of each that was not."""
        cap = self.max_unit_tokens or 0
        out: list[Span] = []
        counts: list[int | None] = []
        for span, count in zip(spans, count_spans(self.token_counter, text, spans), strict=True):
            if count <= cap:
                out.append(span)
                counts.append(count)
            else:
                pieces = self._split_long(text, span[0], span[1], cap)
                out.extend(pieces)
                counts.extend([None] * len(pieces))
        return out, counts

    def _split_long(self, text: str, start: int, end: int, cap: int) -> list[Span]:
        """Split an over-cap unit at line breaks, then whitespace, then characters."""
        lines = [s for s in lines_within(text, start, end)]
        if len(lines) > 1:
            pieces = lines
        else:
            pieces = [(m.start(), m.end()) for m in _WORD.finditer(text, start, end)]
            if len(pieces) <= 1:
                return self._split_chars(text, start, end, cap)
        counts = count_many(self.token_counter, [text[s:e] for s, e in pieces])
        bounded: list[tuple[Span, int]] = []
        for piece, count in zip(pieces, counts, strict=False):
            if count <= cap:
                bounded.append((piece, count))
            else:
                bounded.extend((p, cap) for p in self._split_long(text, piece[0], piece[1], cap))
        return self._pack(text, bounded, cap)

    def _pack(self, text: str, pieces: list[tuple[Span, int]], cap: int) -> list[Span]:
        """Greedily join consecutive pieces into groups, each verified under the cap."""
        groups: list[list[Span]] = []
        total = cap + 1
        for piece, count in pieces:
            if total + count > cap:
                groups.append([])
                total = 0
            groups[-1].append(piece)
            total += count
        out: list[Span] = []
        stack = list(reversed(groups))
        while stack:
            group = stack.pop()
            span = (group[0][0], group[-1][1])
            if len(group) == 1 or self.token_counter(text[span[0] : span[1]]) <= cap:
                out.append(span)
            else:  # separators added tokens the estimate missed: halve and recheck
                half = len(group) // 2
                stack.extend([group[half:], group[:half]])
        return out

    def _split_chars(self, text: str, start: int, end: int, cap: int) -> list[Span]:
        out: list[Span] = []
        pos = start
        while pos < end:
            width = min(cap, end - pos)
            while width > 1 and self.token_counter(text[pos : pos + width]) > cap:
                width //= 2
            out.append((pos, pos + width))
            pos += width
        return out
