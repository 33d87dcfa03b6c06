"""A lexical ranking over the same sentences: BM25 in SQLite FTS5, persistent, no embedding.

Dense sentence vectors miss exact terms: numbers, names, codes, rare words. A
:class:`LexicalIndex` keeps every indexed sentence in an FTS5 table and ranks them by BM25;
the window retriever fuses that ranking with the dense one (reciprocal rank fusion) before
expansion. It is written by the retriever's own indexing protocol (a document's rows are
replaced in one transaction, before its head is committed), so it never holds a sentence
the vector store has not, and readers check versions exactly as they do for dense hits.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LexicalHit", "LexicalIndex", "fuse"]

_WORD = re.compile(r"\w+", re.UNICODE)
RRF_K = 60
"""The constant of reciprocal rank fusion (Cormack et al., 2009): 1 / (60 + rank)."""


@dataclass(frozen=True)
class LexicalHit:
    """A sentence the lexical ranking found: its document, position, version and BM25 rank."""

    doc_id: str
    index: int
    rev: str
    rank: int


class LexicalIndex:
    """BM25 over sentences in a SQLite FTS5 table; a file survives a restart, ``None`` is in memory.

    Example:
        .. code-block:: python

            from langchain_expand import LexicalIndex, SentenceWindowRetriever, chroma_store

            retriever = SentenceWindowRetriever(
                vectorstore=chroma_store("docs", persist_directory="index/chroma"),
                lexical=LexicalIndex("index/lexical.sqlite"),
            )
    """

    def __init__(self, path: str | Path | None = None, *, table: str = "sentences") -> None:
        """Open (or create) the index.

        Args:
            path: The SQLite file; None keeps the index in memory (for tests and one-off runs).
            table: The FTS5 table's name, so several indexes can share one file.

        Raises:
            ValueError: When ``table`` is not a plain identifier.
        """
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", table):
            msg = f"`table` must be a plain identifier (letters, digits, _), got {table!r}."
            raise ValueError(msg)
        self.path = None if path is None else Path(path)
        self.table = table
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:" if self.path is None else str(self.path), check_same_thread=False)
        with self._lock, self._db:
            self._db.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} "
                "USING fts5(doc_id UNINDEXED, i UNINDEXED, rev UNINDEXED, text, tokenize='unicode61')"
            )

    def __repr__(self) -> str:
        return f"LexicalIndex({str(self.path) if self.path else None!r}, table={self.table!r})"

    def replace(self, documents: Iterable[tuple[str, str, Iterable[str]]]) -> None:
        """Make each ``(doc_id, rev, sentences)`` the whole of what is stored for its document.

        One transaction for the lot: a reader sees every document's old rows or its new ones.
        """
        with self._lock, self._db:
            for doc_id, rev, sentences in documents:
                self._db.execute(f"DELETE FROM {self.table} WHERE doc_id = ?", (doc_id,))
                self._db.executemany(
                    f"INSERT INTO {self.table} (doc_id, i, rev, text) VALUES (?, ?, ?, ?)",
                    ((doc_id, i, rev, text) for i, text in enumerate(sentences)),
                )

    def delete(self, doc_ids: Iterable[str]) -> None:
        """Remove every row of these documents; unknown ids are ignored."""
        with self._lock, self._db:
            self._db.executemany(f"DELETE FROM {self.table} WHERE doc_id = ?", [(d,) for d in doc_ids])

    def documents(self) -> set[str]:
        """The ids of every document with rows here."""
        with self._lock:
            return {row[0] for row in self._db.execute(f"SELECT DISTINCT doc_id FROM {self.table}")}

    def search(self, query: str, k: int) -> list[LexicalHit]:
        """The ``k`` sentences that best match the query's words by BM25, best first.

        Every word of the query is a term (quoted, so FTS5 syntax in the query is just text);
        a sentence matches when it holds any of them, and BM25 weighs rare terms up.
        """
        terms = sorted({w.lower() for w in _WORD.findall(query)})
        if not terms or k < 1:
            return []
        expression = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        with self._lock:
            rows = self._db.execute(
                f"SELECT doc_id, i, rev FROM {self.table} WHERE {self.table} MATCH ? "
                f"ORDER BY bm25({self.table}) LIMIT ?",
                (expression, k),
            ).fetchall()
        return [LexicalHit(str(d), int(i), str(rev), rank) for rank, (d, i, rev) in enumerate(rows)]


def fuse(*rankings: Sequence[tuple[str, int]]) -> list[tuple[str, int]]:
    """Reciprocal rank fusion: items by ``sum(1 / (RRF_K + rank))`` over the rankings they are in.

    Ties keep the order of first appearance (the dense ranking first, when it is given first).
    """
    scores: dict[tuple[str, int], float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking):
            scores[item] = scores.get(item, 0.0) + 1.0 / (RRF_K + rank + 1)
    return sorted(scores, key=lambda item: -scores[item])
