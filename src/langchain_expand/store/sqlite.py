"""The lexical index in a SQLite file: BM25 in an FTS5 table, the local copies beside it, persistent.

What a lexical index is, and why it keeps copies: :mod:`langchain_expand.store.lexical`.
"""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from langchain_expand.store import fts5
from langchain_expand.store.commit import batched
from langchain_expand.store.lexical import BaseLexicalIndex, LexicalHit, LocalSentence, Units, copy_of_row
from langchain_expand.store.words import WORDS, bm25, fts_text, words

__all__ = ["LexicalIndex"]


_RECORD_COLUMNS = "doc_id, i, rev, start, end, gap, text, tokens, counter, vector, joined"
_RECORD_SLOTS = ", ".join("?" * len(_RECORD_COLUMNS.split(",")))
_COPY_COLUMNS = "i, text, start, end, gap, tokens, counter, vector, joined"
"""A local copy's columns, in :class:`LocalSentence`'s order."""
_JOINED_COLUMNS = ", ".join(f"r.{column.strip()}" for column in _COPY_COLUMNS.split(","))


class LexicalIndex(BaseLexicalIndex):
    """BM25 over sentences in a SQLite FTS5 table; a file survives a restart, ``None`` is in memory.

    Example:
        .. code-block:: python

            from langchain_expand import LexicalIndex, SentenceWindowRetriever, chroma_store

            retriever = SentenceWindowRetriever(
                vectorstore=chroma_store("docs", persist_directory="index/chroma"),
                lexical=LexicalIndex("index/lexical.sqlite"),
            )
    """

    def __init__(self, path: str | Path | None = None, *, table: str = "sentences", timeout: float = 600.0) -> None:
        """Open (or create) the index.

        A file is kept in SQLite's write-ahead-log mode, so queries read while a writer writes;
        writers (threads or processes) take turns, each waiting up to ``timeout`` seconds for
        the one before (a document of 20,000 sentences takes seconds to replace).

        Args:
            path: The SQLite file; None keeps the index in memory (for tests and one-off runs).
            table: The FTS5 table's name, so several indexes can share one file.
            timeout: Seconds a write waits for another writer's to finish before it gives up
                with an error that says so.

        Raises:
            ValueError: When ``table`` is not a plain identifier, or ``path`` is not a SQLite file.
        """
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", table):
            msg = f"`table` must be a plain identifier (letters, digits, _), got {table!r}."
            raise ValueError(msg)
        self.path = None if path is None else Path(path)
        self.table = table
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.timeout = timeout
        try:
            self._db = sqlite3.connect(
                ":memory:" if self.path is None else str(self.path), timeout=timeout, check_same_thread=False
            )
            if self.path is not None:
                self._db.execute("PRAGMA journal_mode=WAL")  # kept in the file: set once, by whoever opens it first
        except sqlite3.DatabaseError as exc:  # a folder, a file of another kind
            msg = f"LexicalIndex cannot open {self.path} as a SQLite file ({exc}): give it a new file or its own."
            raise ValueError(msg) from exc
        with self._lock, self._writing(), self._db:
            self._db.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {table} "
                "USING fts5(doc_id UNINDEXED, i UNINDEXED, rev UNINDEXED, text, tokenize='unicode61')"
            )
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {table}_records (doc_id TEXT NOT NULL, i INTEGER NOT NULL, "
                "rev TEXT NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL, gap TEXT NOT NULL, "
                "text TEXT NOT NULL, tokens INTEGER, counter TEXT, vector BLOB, joined INTEGER, "
                "PRIMARY KEY (doc_id, i))"
            )
            self._db.execute(
                f"CREATE TABLE IF NOT EXISTS {table}_units (one INTEGER PRIMARY KEY CHECK (one = 1), "
                "units TEXT NOT NULL)"
            )
            fts5.open_vocabulary(self._db, table)
            columns = {row[1] for row in self._db.execute(f"PRAGMA table_info({table}_records)")}
            if "joined" not in columns:  # an index written before joined counts were kept: its rows have none
                self._db.execute(f"ALTER TABLE {table}_records ADD COLUMN joined INTEGER")
        with self._writing():
            self._map_rows()
            self._once(lambda: fts5.words_format(self._db, table) >= WORDS, lambda: fts5.store_words(self._db, table))

    def _map_rows(self) -> None:
        """Create the table that maps each document to its FTS5 rows, filled from them once.

        FTS5 keeps ``doc_id`` unindexed, so deleting or finding a document's rows by it scans
        the whole table: a re-add would cost time in proportion to the corpus. ``{table}_rows``
        finds them by key. A file written before the table existed gets it on first open, in
        one scan, under SQLite's write lock so that two processes opening at once fill it once.
        """
        rows = f"{self.table}_rows"

        def fill() -> None:
            self._db.execute(
                f"CREATE TABLE {rows} (doc_id TEXT NOT NULL, row INTEGER NOT NULL, "
                "PRIMARY KEY (doc_id, row)) WITHOUT ROWID"
            )
            self._db.execute(f"INSERT INTO {rows} (doc_id, row) SELECT doc_id, rowid FROM {self.table}")

        self._once(lambda: self._has_table(rows), fill)

    def _once(self, done: Callable[[], bool], make: Callable[[], None]) -> None:
        """Run ``make`` unless ``done()``, in one transaction under the write lock.

        ``done()`` is asked again once the lock is held: of two processes opening at once, one makes it.
        """
        if done():
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            if not done():
                make()
            self._db.commit()
        except BaseException:
            self._db.rollback()
            raise

    def _has_table(self, name: str) -> bool:
        query = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
        return self._db.execute(query, (name,)).fetchone() is not None

    def __repr__(self) -> str:
        return f"LexicalIndex({str(self.path) if self.path else None!r}, table={self.table!r})"

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A write; SQLite's "database is locked" after ``timeout`` becomes an error that names the fix."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            msg = (
                f"The lexical index {str(self.path)!r} stayed locked by another writer for {self.timeout:g} s. "
                "SQLite takes one writer at a time: run fewer writers at once, give LexicalIndex a longer "
                "`timeout`, or use PostgresLexicalIndex for many concurrent writers. Nothing of this call "
                "was written; run it again."
            )
            raise RuntimeError(msg) from exc

    def claim(self, units: Units | None) -> str | None:
        """See :meth:`BaseLexicalIndex.claim`: ``{table}_units``, one row."""
        with self._lock, self._writing(), self._db:
            if units is not None:
                self._db.execute(f"INSERT OR IGNORE INTO {self.table}_units (one, units) VALUES (1, ?)", (units,))
            held = self._db.execute(f"SELECT units FROM {self.table}_units").fetchone()
        return None if held is None else str(held[0])

    def replace(self, documents: Iterable[tuple[str, str, Iterable[str | LocalSentence]]]) -> None:
        """See :meth:`BaseLexicalIndex.replace`. A document's rows are built and inserted ``_ROWS`` at a time."""
        with self._lock, self._writing(), self._db:
            for doc_id, rev, sentences in documents:
                self._delete(doc_id)
                # Rows are numbered here, after the last one (the delete above holds the write
                # lock), so that the map to them is written without reading them back.
                last = self._db.execute(f"SELECT rowid FROM {self.table} ORDER BY rowid DESC LIMIT 1").fetchone()
                row = 1 if last is None else last[0] + 1
                for chunk in batched(enumerate(sentences), _ROWS):
                    ranked, kept = _rows(doc_id, rev, chunk)
                    self._db.executemany(
                        f"INSERT INTO {self.table} (rowid, doc_id, i, rev, text) VALUES (?, ?, ?, ?, ?)",
                        ((row + n, *ranked_row) for n, ranked_row in enumerate(ranked)),
                    )
                    self._db.executemany(
                        f"INSERT INTO {self.table}_rows (doc_id, row) VALUES (?, ?)",
                        ((doc_id, row + n) for n in range(len(ranked))),
                    )
                    self._db.executemany(
                        f"INSERT INTO {self.table}_records ({_RECORD_COLUMNS}) VALUES ({_RECORD_SLOTS})", kept
                    )
                    row += len(ranked)

    def delete(self, doc_ids: Iterable[str]) -> None:
        """Remove every row of these documents; unknown ids are ignored."""
        with self._lock, self._writing(), self._db:
            for doc_id in doc_ids:
                self._delete(doc_id)

    def _delete(self, doc_id: str) -> None:
        rows = f"{self.table}_rows"
        self._db.execute(
            f"DELETE FROM {self.table} WHERE rowid IN (SELECT row FROM {rows} WHERE doc_id = ?)", (doc_id,)
        )
        self._db.execute(f"DELETE FROM {rows} WHERE doc_id = ?", (doc_id,))
        self._db.execute(f"DELETE FROM {self.table}_records WHERE doc_id = ?", (doc_id,))

    def sentences(self, doc_id: str, rev: str, indices: Sequence[int]) -> list[LocalSentence]:
        """See :meth:`BaseLexicalIndex.sentences`."""
        return self.sentences_of({(doc_id, rev): indices}).get((doc_id, rev), [])

    def sentences_of(
        self, wanted: Mapping[tuple[str, str], Sequence[int]]
    ) -> dict[tuple[str, str], list[LocalSentence]]:
        """See :meth:`BaseLexicalIndex.sentences_of`: one statement for a few hundred sentences.

        At a million sentences a query read its copies in about 140 statements, one a
        document (a third of the time it spent reading them); the sentences asked are joined
        to the records by key instead.
        """
        asked = list(dict.fromkeys((doc_id, rev, i) for (doc_id, rev), indices in wanted.items() for i in indices))
        found: dict[tuple[str, str], list[LocalSentence]] = {}
        step = _MAX_VARIABLES // 3
        with self._lock:
            for at in range(0, len(asked), step):
                chunk = asked[at : at + step]
                rows = self._db.execute(
                    f"SELECT r.doc_id, r.rev, {_JOINED_COLUMNS} FROM (VALUES {', '.join(['(?, ?, ?)'] * len(chunk))}) "
                    f"AS w JOIN {self.table}_records AS r ON r.doc_id = w.column1 AND r.i = w.column3 "
                    "AND r.rev = w.column2",
                    [value for triple in chunk for value in triple],
                ).fetchall()
                for doc_id, rev, *copy in rows:
                    found.setdefault((doc_id, rev), []).append(copy_of_row(copy))
        return found

    def copies(self, doc_ids: Collection[str] | None = None) -> Iterator[tuple[str, str, LocalSentence]]:
        """Every local copy (of ``doc_ids`` only, when given) as ``(doc_id, rev, sentence)``, in the order written."""
        columns = f"rowid, doc_id, rev, {_COPY_COLUMNS}"
        if doc_ids is None:  # every copy: what a build beside the queries reads
            rows: Iterable[Any] = self._whole(f"SELECT {columns} FROM {self.table}_records ORDER BY rowid")
        else:
            with self._lock:
                rows = sorted(self._among(f"SELECT {columns} FROM {self.table}_records", doc_ids))
        for _, doc_id, rev, *copy in rows:
            yield doc_id, rev, copy_of_row(copy)

    def _whole(self, query: str) -> Iterator[Any]:
        """The rows of ``query``, over the whole index: what the builds beside the queries read.

        A file is read on a connection of its own, in one statement (one consistent read that
        holds no lock of this object's, so queries go on meanwhile); an index in memory is read
        on the index's connection, under its lock.
        """
        if self.path is None:
            with self._lock:
                rows = self._db.execute(query).fetchall()
            return iter(rows)
        return _rows_of(str(self.path), query)

    def count(self) -> int:
        """How many local copies are kept."""
        with self._lock:
            return int(self._db.execute(f"SELECT COUNT(*) FROM {self.table}_records").fetchone()[0])

    def documents(self, *, copied: bool = False, among: Collection[str] | None = None) -> set[str]:
        """See :meth:`BaseLexicalIndex.documents`."""
        table = f"{self.table}_records" if copied else f"{self.table}_rows"
        with self._lock:
            if among is None:
                return {row[0] for row in self._db.execute(f"SELECT DISTINCT doc_id FROM {table}")}
            return {row[0] for row in self._among(f"SELECT DISTINCT doc_id FROM {table}", among)}

    def revisions(self, doc_ids: Collection[str], *, ranked: bool = False) -> dict[str, set[str]]:
        """See :meth:`BaseLexicalIndex.revisions`."""
        t, held = self.table, dict[str, set[str]]()
        rows = f"(SELECT m.doc_id AS doc_id, f.rev AS rev FROM {t}_rows AS m JOIN {t} AS f ON f.rowid = m.row)"
        with self._lock:
            for doc_id, rev in self._among(
                f"SELECT DISTINCT doc_id, rev FROM {rows if ranked else t + '_records'}", doc_ids
            ):
                held.setdefault(doc_id, set()).add(rev)
        return held

    def _among(self, select: str, doc_ids: Collection[str]) -> list[tuple[Any, ...]]:
        """The rows of ``select`` for these documents, asked ``_MAX_VARIABLES`` ids a statement (the lock held)."""
        wanted, rows = list(doc_ids), []
        for at in range(0, len(wanted), _MAX_VARIABLES):
            chunk = wanted[at : at + _MAX_VARIABLES]
            rows += self._db.execute(f"{select} WHERE doc_id IN ({', '.join('?' * len(chunk))})", chunk).fetchall()
        return rows

    def search(self, query: str, k: int, within: Collection[str] | None = None) -> list[LexicalHit]:
        """See :meth:`BaseLexicalIndex.search`.

        Every word of the query is a term, stored as :func:`fts_text` stores the sentences'
        words, so FTS5 syntax in the query is just text.
        """
        terms = sorted(set(words(query)))
        if not terms or k < 1:
            return []
        expression = " OR ".join(f'"{fts_text([term])}"' for term in terms)  # letters and digits, quoted
        scoped = "" if within is None else " AND doc_id IN (SELECT value FROM json_each(?))"
        arguments = (expression, k) if within is None else (expression, json.dumps(list(within)), k)
        with self._lock:
            rows = self._db.execute(
                f"SELECT doc_id, i, rev, -bm25({self.table}) FROM {self.table} WHERE {self.table} MATCH ?{scoped} "
                f"ORDER BY bm25({self.table}), rowid LIMIT ?",  # ties in the order written, as in memory
                arguments,
            ).fetchall()
        return [LexicalHit(str(d), int(i), str(rev), float(score)) for d, i, rev, score in rows]

    def scores(self, query: str, sentences: Collection[tuple[str, int, str]]) -> dict[tuple[str, int, str], float]:
        """See :meth:`BaseLexicalIndex.scores`: FTS5's ``bm25()`` of each sentence, from its words and FTS5's counts.

        Each sentence's words are read from its local copy, else (an index without copies: the
        parents' children) from its document's rows; the row count, their total length and each
        term's rows are FTS5's own (:mod:`~langchain_expand.store.fts5`). So each score is the one
        :meth:`search` gives, to the last bit (:func:`~langchain_expand.store.words.bm25`), without
        matching the query again: a match scores every row of the documents that holds a query
        word (most of a long document) to keep a few.
        """
        terms, wanted = sorted(set(words(query))), set(sentences)
        if not terms or not wanted:
            return {}
        with self._lock:
            self._db.execute("BEGIN")  # one read of the file for the statements below, as one match would be
            try:
                counts = fts5.counts(self._db, self.table, terms)
                rows = fts5.words_of(self._db, self.table, wanted) if counts is not None else []
            finally:
                self._db.commit()
        if counts is None:
            return {}
        average, idfs = counts
        scored = ((key, bm25(terms, idfs, row, average)) for key, row in rows)
        return {key: score for key, score in scored if score > 0}


_ROWS = 4096
"""A document's rows built and inserted at a time: a long document's rows are never held whole."""


def _rows(
    doc_id: str, rev: str, sentences: Iterable[tuple[int, str | LocalSentence]]
) -> tuple[list[tuple[str, int, str, str]], list[tuple[object, ...]]]:
    """Rows of the ranking (document, position, revision, words) and of the local copies, for ``sentences``.

    A sentence given as a str is ranked at its place in the document and has no copy.
    """
    ranked: list[tuple[str, int, str, str]] = []
    kept: list[tuple[object, ...]] = []
    for position, sentence in sentences:
        if isinstance(sentence, str):
            ranked.append((doc_id, position, rev, fts_text(words(sentence))))
            continue
        ranked.append((doc_id, sentence.i, rev, fts_text(words(sentence.text))))
        vector = None if sentence.vector is None else np.asarray(sentence.vector, np.float32).tobytes()
        i, text, start, end, gap, tokens, counter, _, joined = sentence
        kept.append((doc_id, i, rev, start, end, gap, text, tokens, counter, vector, joined))
    return ranked, kept


def _rows_of(path: str, query: str) -> Iterator[Any]:
    """The rows of ``query`` on a connection to ``path`` of their own, a batch at a time."""
    db = sqlite3.connect(path)
    try:
        cursor = db.execute(query)
        while batch := cursor.fetchmany(10_000):
            yield from batch
    finally:
        db.close()


_MAX_VARIABLES = 900
"""Sentences asked per statement: under SQLite's oldest limit on bound variables (999)."""
