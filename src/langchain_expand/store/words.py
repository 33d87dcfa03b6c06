"""What BM25 counts and how it adds it up: a text's words, and FTS5's score, alike in every lexical index and in memory.

SQLite's FTS5, PostgreSQL and the BM25 in memory (:mod:`langchain_expand.windows.bm25`) must
find the same sentences and add up the same scores; they agree because each counts the words
:func:`words` gives, stored and read back as :func:`fts_text` and :func:`fts_words` write them,
and scores them as FTS5's ``bm25()`` does (:data:`K1`, :data:`B`, :func:`idf`, :func:`bm25`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence

__all__ = ["K1", "WORDS", "B", "bm25", "fts_text", "fts_words", "idf", "words"]

K1 = 1.2
B = 0.75
"""FTS5's ``bm25()`` constants: how a term's count saturates, and how much a row's length weighs."""

WORDS = 2
"""How :func:`words` splits a text, as a lexical index notes it: 2 folds NFKC and pairs Han, kana and Hangul.

An index written under an earlier way holds other words, and splits them again when opened.
"""

_DROPPED = frozenset({"Mn", "Me"})
"""Unicode categories :func:`words` drops from a word: non-spacing and enclosing marks."""


def _marks() -> str:
    """Every combining mark as ranges of a regular expression's character class (a word holds them)."""
    ranges: list[list[int]] = []
    for c in range(0x300, 0xE01F0):  # the first mark is U+0300, the last U+E01EF
        if unicodedata.category(chr(c)).startswith("M"):
            if ranges and ranges[-1][1] == c - 1:
                ranges[-1][1] = c
            else:
                ranges.append([c, c])
    return "".join(f"{re.escape(chr(low))}-{re.escape(chr(high))}" for low, high in ranges)


_TOKEN = re.compile(f"[\\w{_marks()}]+")
"""A word: letters, digits and combining marks (``_`` is made a space first)."""
_ASCII_TOKEN = re.compile("[a-z0-9]+")
"""A word of a case-folded ASCII text."""
_UNSPACED = re.compile(
    "[\u3005-\u3007\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]+"
)
"""A run of Han, kana or Hangul: scripts written without spaces between words, counted in pairs (:func:`words`)."""


def words(text: str) -> list[str]:
    """The text's words: what BM25 counts, in every lexical index and in memory alike.

    A word is a run of letters, digits and combining marks (so a Devanagari, Tamil or Hebrew
    word is not cut at its vowel signs), in its compatibility form (NFKC: full-width letters
    and digits are ASCII ones, a ligature its letters, half-width kana full), case-folded
    (``Straße`` is ``strasse``, a final sigma a sigma), with its non-spacing marks dropped
    (``café`` is ``cafe``, ``Σίσυφος`` ``σισυφος``, ``İstanbul`` ``istanbul``) and recomposed
    (Hangul stays in syllables). Chinese and Japanese put no space between words, and Korean
    joins its particles to them, so a run of Han, kana or Hangul (:data:`_UNSPACED`) is
    counted as its overlapping pairs of characters, as Lucene's CJK analyzer does
    (``北京烤鸭`` is ``北京 京烤 烤鸭``; a lone character is itself): a query's ``烤鸭``
    finds it. The words of a text's words joined by spaces are those words again, so they
    can be stored and read back (:func:`fts_text`).
    """
    folded = text.casefold()
    if folded.isascii():
        return _ASCII_TOKEN.findall(folded)
    folded = unicodedata.normalize("NFKC", folded).casefold()
    if folded.isascii():
        return _ASCII_TOKEN.findall(folded)
    found: list[str] = []
    for token in _TOKEN.findall(folded.replace("_", " ")):
        if not token.isascii():
            bare = "".join(c for c in unicodedata.normalize("NFD", token) if unicodedata.category(c) not in _DROPPED)
            token = unicodedata.normalize("NFC", bare)
            if not token:  # marks alone
                continue
            if _UNSPACED.search(token):
                found.extend(_pairs(token))
                continue
        found.append(token)
    return found


def _pairs(token: str) -> list[str]:
    """``token`` with each run of :data:`_UNSPACED` characters cut into its overlapping pairs."""
    found: list[str] = []
    at = 0
    for run in _UNSPACED.finditer(token):
        if run.start() > at:
            found.append(token[at : run.start()])
        chars = run.group()
        found.extend(chars[i : i + 2] for i in range(max(len(chars) - 1, 1)))
        at = run.end()
    if at < len(token):
        found.append(token[at:])
    return found


def fts_text(terms: Iterable[str]) -> str:
    """Words as FTS5 is handed them: each one ``unicode61`` token, kept exactly, whatever its script.

    FTS5's tokenizer folds case and marks its own way, which differs from :func:`words`
    outside Latin (it keeps Greek accents and Hangul syllables' parts apart from ours, cuts
    Devanagari at its marks), so BM25 found other sentences there than in memory. An ASCII
    word is handed over as it is (the tokenizer keeps ASCII letters and digits as they are);
    any other as :data:`_ENCODED` and its UTF-8 in hex, which it keeps too (a private-use
    character is a letter to it and to nobody's text here: :func:`words` makes none). So no
    two words are stored alike, and :func:`fts_words` reads them back.
    """
    return " ".join(t if t.isascii() else _ENCODED + t.encode().hex() for t in terms)


def fts_words(stored: str) -> list[str]:
    """The words :func:`fts_text` stored."""
    return [bytes.fromhex(t[1:]).decode() if t.startswith(_ENCODED) else t for t in stored.split()]


_ENCODED = "\ue000"
"""What starts a word that :func:`fts_text` hands FTS5 as hex: the first private-use character."""


def idf(rows: int, holding: int) -> float:
    """FTS5's idf of a term that ``holding`` of ``rows`` rows hold: ``log((N - n + 0.5) / (n + 0.5))``.

    1e-6 where that is not positive (a term in half the rows or more), as FTS5's ``bm25()`` takes
    it; with :func:`math.log`, as SQLite takes it (numpy's may differ in the last bit).
    """
    found = math.log((rows - holding + 0.5) / (holding + 0.5))
    return found if found > 0 else 1e-6


def bm25(terms: Sequence[str], idfs: Sequence[float], row: Sequence[str], average: float) -> float:
    """The BM25 score of the row whose words are ``row``, for ``terms`` (sorted; ``idfs[j]`` is term ``j``'s idf).

    0 where it holds none of them. FTS5's ``bm25()`` to the last bit: the same operations in the
    same order, each term's share added in the order the terms are given (sorted, as every
    lexical index asks for them).
    ``average``: the rows' mean length in words.
    """
    counts: dict[str, int] = {}
    for word in row:
        counts[word] = counts.get(word, 0) + 1
    score = 0.0
    for term, weight in zip(terms, idfs, strict=True):
        count = float(counts.get(term, 0))
        if count:
            score += weight * ((count * (K1 + 1.0)) / (count + K1 * (1 - B + B * len(row) / average)))
    return score
