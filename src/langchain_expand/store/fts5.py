"""What SQLite's FTS5 keeps that a BM25 score reads: the rows and their length, each term's rows, a row's words.

FTS5's ``bm25()`` takes the row count and the total length from its averages record, and each
term's rows from its doclist. Read here, a few sentences are scored as a match would score them
(:func:`~langchain_expand.store.words.bm25`) without matching every row of their documents that
holds a query word (:meth:`~langchain_expand.store.sqlite.LexicalIndex.scores`). And the words a
row holds, written again where an older file holds other words (:func:`store_words`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Sequence

from langchain_expand.store.words import WORDS, fts_text, fts_words, idf, words

__all__ = ["counts", "open_vocabulary", "store_words", "words_format", "words_of"]


def open_vocabulary(db: sqlite3.Connection, table: str) -> None:
    """FTS5's count of each term's rows (``fts5vocab``), for this connection alone: nothing is written to the file."""
    db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{table}_vocab USING fts5vocab(main, {table}, row)")


def counts(db: sqlite3.Connection, table: str, terms: Sequence[str]) -> tuple[float, list[float]] | None:
    """The rows' mean length and each term's idf, as FTS5's ``bm25()`` reads them; None for an empty table.

    The row count and the columns' total lengths are FTS5's averages record (row 1 of its
    ``_data`` table, varints); each term's rows, its vocabulary's count (:func:`open_vocabulary`).
    """
    block = db.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
    n, *lengths = _varints(block[0]) if block is not None and block[0] else [0]  # empty until a row is written
    if n == 0:
        return None
    stored = [fts_text([term]) for term in terms]
    held = dict(
        db.execute(
            f"SELECT term, doc FROM temp.{table}_vocab WHERE term IN (SELECT value FROM json_each(?))",
            (json.dumps(stored),),
        ).fetchall()
    )
    return sum(lengths) / n, [idf(n, held.get(term, 0)) for term in stored]


def words_of(
    db: sqlite3.Connection, table: str, sentences: Collection[tuple[str, int, str]]
) -> list[tuple[tuple[str, int, str], list[str]]]:
    """The words of the sentences' rows, each named ``(doc_id, index, rev)`` (a row at another revision is left out).

    From the local copies, in one join; for a document without them (its rows are ranked alone, as
    the parents' children), from its rows, all read and the sentences' kept. A document's rows have
    copies all or none.
    """
    places = json.dumps([[doc_id, i] for doc_id, i, _ in sentences])
    copied = db.execute(
        f"SELECT r.doc_id, r.i, r.rev, r.text FROM json_each(?) AS j JOIN {table}_records AS r "
        "ON r.doc_id = json_extract(j.value, '$[0]') AND r.i = json_extract(j.value, '$[1]')",
        (places,),
    ).fetchall()
    bare = sorted({doc_id for doc_id, _, _ in sentences} - {doc_id for doc_id, *_ in copied})
    ranked = []
    if bare:
        ranked = db.execute(
            f"SELECT f.doc_id, f.i, f.rev, f.text FROM {table}_rows AS m JOIN {table} AS f "
            "ON f.rowid = m.row WHERE m.doc_id IN (SELECT value FROM json_each(?))",
            (json.dumps(bare),),
        ).fetchall()
    wanted = set(sentences)
    found = [(key, words(text)) for d, i, rev, text in copied if (key := (d, int(i), str(rev))) in wanted]
    # a row holds fts_text's words; an ASCII one may hold its sentence's own text (a file written before
    # rows held words), whose words are the same
    stored = [(key, text) for d, i, rev, text in ranked if (key := (str(d), int(i), str(rev))) in wanted]
    return found + [(key, words(text) if text.isascii() else fts_words(text)) for key, text in stored]


def words_format(db: sqlite3.Connection, table: str) -> int:
    """How the words in ``table``'s rows were made (:data:`~langchain_expand.store.words.WORDS`); 0: texts."""
    marker = f"{table}_words"
    if not db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (marker,)).fetchone():
        return 0
    found = db.execute(f"SELECT format FROM {marker}").fetchone()
    return found[0] if found else 0


def store_words(db: sqlite3.Connection, table: str) -> None:
    """Hand FTS5 the words of each row as :func:`words` makes them now, in a file written before (one transaction).

    A file written before rows held words holds each sentence's own text, which FTS5
    tokenized its own way (the same words as :func:`words` makes for ASCII text, others for
    the rest); one of format 1 holds words with each run of Han, kana or Hangul whole and
    full-width forms unfolded. So rows with other characters than ASCII are rewritten, from
    their text or from the words they hold. The table ``{table}_words`` holds the format; the
    caller changes it in the transaction that rewrites the rows, under SQLite's write lock, so
    two processes opening at once rewrite them once.
    """
    old = words_format(db, table)
    rows = db.execute(f"SELECT rowid, text FROM {table}").fetchall()
    db.executemany(
        f"UPDATE {table} SET text = ? WHERE rowid = ?",
        (
            (new, row)
            for row, text in rows
            if not text.isascii() and (new := fts_text(words(" ".join(fts_words(text)) if old else text))) != text
        ),
    )
    db.execute(f"DROP TABLE IF EXISTS {table}_words")
    db.execute(f"CREATE TABLE {table}_words (format INTEGER NOT NULL)")
    db.execute(f"INSERT INTO {table}_words (format) VALUES ({WORDS})")


def _varints(blob: bytes) -> list[int]:
    """The integers of ``blob``, SQLite varints one after another (7 bits a byte, the ninth byte 8)."""
    found: list[int] = []
    at = 0
    while at < len(blob):
        value = 0
        for place in range(9):
            byte = blob[at]
            at += 1
            if place == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if byte < 0x80:
                break
        found.append(value)
    return found
