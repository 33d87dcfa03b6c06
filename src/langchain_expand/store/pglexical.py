"""The lexical index in PostgreSQL: BM25 and local copies that every process shares.

:class:`~langchain_expand.store.sqlite.LexicalIndex` is a SQLite file, so with a Chroma server and
several indexing workers on other machines only one machine would see it. A
:class:`PostgresLexicalIndex` keeps the same rows in a PostgreSQL database (the one that holds
the parents' :class:`~langchain_expand.store.docstore.SQLDocStore`, say), so every worker writes it
and every reader ranks it.

It ranks as FTS5's ``bm25()`` does, in SQL: each sentence's words
(:func:`~langchain_expand.store.words.words`) are kept with their counts, and a query sums, over
its words, ``idf x tf x (k1 + 1) / (tf + k1 x (1 - b + b x length / average length))`` with
k1 = 1.2, b = 0.75 and ``idf = log((N - n + 0.5) / (n + 0.5))`` (1e-6 where not positive).
A query's words are summed in the order FTS5 sums them, so even tied sentences come in the same
order: the hybrid ranking is the one measured in ``benchmarks/``, and equals the in-memory
snapshot's (:class:`~langchain_expand.windows.bm25.Bm25`). PostgreSQL's own ``ts_rank`` is not
BM25 and stems words, which lost on TAT-QA (benchmarks/README.md, Porter stemming).

A search costs 2.3-3.1x FTS5's (``benchmarks/lexical.py``), paid only where no snapshot serves:
within ``snapshot_limit`` a query ranks BM25 in memory from the local copies kept here.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import sqlalchemy as sa

from langchain_expand.store.docstore import engine_for, forget_connections_after_fork
from langchain_expand.store.lexical import BaseLexicalIndex, LexicalHit, LocalSentence, Units, copy_of_row
from langchain_expand.store.words import K1, WORDS, B, words

__all__ = ["PostgresLexicalIndex"]

_COPY_COLUMNS = 'i, text, start, "end", gap, tokens, counter, vector, joined'
"""A local copy's columns, in :class:`~langchain_expand.store.lexical.LocalSentence`'s order."""
_CREATE_LOCK = 0x6C6578  # one advisory lock for every table's creation: workers that start at once wait in turn


class PostgresLexicalIndex(BaseLexicalIndex):
    """BM25 over sentences in PostgreSQL, shared by every process that reaches the database.

    Three tables and a sequence named after ``table``: the ranked sentences (position, revision,
    length, place in the order written), their words with counts, and the local copies of the
    sentence records. A document's rows are
    replaced in one transaction, under a lock on the document, so two writers of one document
    wait in turn and a reader sees either version whole.

    Example:
        .. code-block:: python

            import chromadb
            from langchain_expand import PostgresLexicalIndex, SentenceWindowRetriever, chroma_store

            retriever = SentenceWindowRetriever(
                vectorstore=chroma_store("docs", client=chromadb.HttpClient("chroma", 8000)),
                lexical=PostgresLexicalIndex("postgresql+psycopg://user:pass@db/search"),
            )
    """

    def __init__(self, url: str | sa.Engine, *, table: str = "langchain_expand_sentences") -> None:
        """Open (and create if needed) the tables.

        Args:
            url: A SQLAlchemy URL of a PostgreSQL database (``postgresql+psycopg://...``,
                ``pip install 'langchain-expand[postgres]'``), or an engine on one.
            table: The name the three tables start with, so several indexes can share a database.

        Raises:
            ValueError: When the URL is not PostgreSQL's (use :class:`~langchain_expand.store.sqlite.LexicalIndex`
                for a SQLite file) or ``table`` is not a plain identifier.
        """
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,40}", table):
            msg = f"`table` must be a plain identifier of at most 41 characters (letters, digits, _), got {table!r}."
            raise ValueError(msg)
        engine = forget_connections_after_fork(url) if isinstance(url, sa.Engine) else engine_for(url)
        if engine.dialect.name != "postgresql":
            msg = (
                f"PostgresLexicalIndex needs a PostgreSQL database, got a {engine.dialect.name} URL. "
                "For a SQLite file use LexicalIndex(path)."
            )
            raise ValueError(msg)
        self._engine = engine
        self.table = table
        with engine.begin() as conn:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _CREATE_LOCK})
            for statement in (
                f"CREATE SEQUENCE IF NOT EXISTS {table}_order",
                f"CREATE TABLE IF NOT EXISTS {table} (seq BIGINT NOT NULL, doc_id TEXT NOT NULL, i INTEGER NOT NULL, "
                "rev TEXT NOT NULL, length INTEGER NOT NULL, PRIMARY KEY (doc_id, i))",
                f"CREATE TABLE IF NOT EXISTS {table}_words (term TEXT NOT NULL, doc_id TEXT NOT NULL, "
                "i INTEGER NOT NULL, rev TEXT NOT NULL, seq BIGINT NOT NULL, length INTEGER NOT NULL, "
                "tf INTEGER NOT NULL, PRIMARY KEY (term, doc_id, i))",
                f"CREATE INDEX IF NOT EXISTS {table}_words_doc ON {table}_words (doc_id)",
                f"CREATE TABLE IF NOT EXISTS {table}_units (one INTEGER PRIMARY KEY CHECK (one = 1), "
                "units TEXT NOT NULL)",
                f"CREATE TABLE IF NOT EXISTS {table}_records (seq BIGSERIAL, doc_id TEXT NOT NULL, "
                'i INTEGER NOT NULL, rev TEXT NOT NULL, start INTEGER NOT NULL, "end" INTEGER NOT NULL, '
                "gap TEXT NOT NULL, text TEXT NOT NULL, tokens INTEGER, counter TEXT, vector BYTEA, "
                "joined INTEGER, PRIMARY KEY (doc_id, i))",
            ):
                conn.execute(sa.text(statement))
            held = 0
            if conn.execute(sa.text(f"SELECT to_regclass('{table}_format')")).scalar_one():
                held = conn.execute(sa.text(f"SELECT format FROM {table}_format")).scalar_one()
            if held < WORDS:
                self._store_words(conn, held)

    def _store_words(self, conn: sa.Connection, held: int) -> None:
        """Count each sentence's words as :func:`words` makes them now, once, in tables written before.

        :func:`words` once cut words at combining marks and kept some of them (tables without
        ``{table}_format``): a copied sentence with other characters than ASCII is counted again
        from its text. Format 1 kept a run of Han, kana or Hangul whole and full-width forms
        unfolded: each such word is split as :func:`words` splits it now, in every sentence,
        copied or not. ``{table}_format`` holds the format (:data:`WORDS`); it is changed in the
        transaction that recounts them, under the lock every opening takes.
        """
        t = self.table
        found: dict[tuple[str, int, str, int], Counter[str]] = {}
        if not held:
            stale = f"SELECT r.doc_id, r.i, r.rev, s.seq, r.text FROM {t}_records AS r JOIN {t} AS s "
            stale += "ON s.doc_id = r.doc_id AND s.i = r.i AND s.rev = r.rev WHERE r.text ~ '[^\\x01-\\x7f]'"
            found = {
                (doc_id, i, rev, seq): Counter(words(text))
                for doc_id, i, rev, seq, text in conn.execute(sa.text(stale))
            }
        rows = f"SELECT doc_id, i, rev, seq, term, tf FROM {t}_words WHERE (doc_id, i) IN "
        rows += f"(SELECT doc_id, i FROM {t}_words WHERE term ~ '[^\\x01-\\x7f]')"
        split: dict[tuple[str, int, str, int], Counter[str]] = {}
        changed = set()
        for doc_id, i, rev, seq, term, tf in conn.execute(sa.text(rows)):
            now, terms = words(term), split.setdefault((doc_id, i, rev, seq), Counter())
            for word in now:
                terms[word] += tf
            if now != [term]:
                changed.add((doc_id, i, rev, seq))
        # a copied sentence counted from its text just now is not split again
        for (doc_id, i, rev, seq), terms in {**{row: split[row] for row in changed}, **found}.items():
            key = {"doc": doc_id, "i": i, "rev": rev, "seq": seq, "length": terms.total()}
            conn.execute(sa.text(f"DELETE FROM {t}_words WHERE doc_id = :doc AND i = :i"), key)
            conn.execute(sa.text(f"UPDATE {t} SET length = :length WHERE doc_id = :doc AND i = :i"), key)
            if terms:
                conn.execute(
                    sa.text(
                        f"INSERT INTO {t}_words (term, doc_id, i, rev, seq, length, tf) "
                        "VALUES (:term, :doc, :i, :rev, :seq, :length, :tf)"
                    ),
                    [{**key, "term": term, "tf": n} for term, n in terms.items()],
                )
        conn.execute(sa.text(f"DROP TABLE IF EXISTS {t}_format"))
        conn.execute(sa.text(f"CREATE TABLE {t}_format (format INTEGER NOT NULL)"))
        conn.execute(sa.text(f"INSERT INTO {t}_format (format) VALUES ({WORDS})"))

    def __repr__(self) -> str:
        url = self._engine.url.render_as_string(hide_password=True)
        return f"PostgresLexicalIndex({url!r}, table={self.table!r})"

    def claim(self, units: Units | None) -> str | None:
        """See :meth:`BaseLexicalIndex.claim`: ``{table}_units``, one row."""
        with self._engine.begin() as conn:
            if units is not None:
                insert = f"INSERT INTO {self.table}_units (one, units) VALUES (1, :units) ON CONFLICT DO NOTHING"
                conn.execute(sa.text(insert), {"units": units})
            held = conn.execute(sa.text(f"SELECT units FROM {self.table}_units")).scalar_one_or_none()
        return None if held is None else str(held)

    def check_text(self, text: str, doc_id: str) -> None:
        """Refuse a NUL character: PostgreSQL's text cannot hold one."""
        at = text.find("\x00")
        if at >= 0:
            msg = (
                f"Document {doc_id!r}: its text holds a NUL character at char {at}, which PostgreSQL cannot "
                "store. Remove it (e.g. text.replace('\\x00', '')), or use LexicalIndex (SQLite)."
            )
            raise ValueError(msg)

    def replace(self, documents: Iterable[tuple[str, str, Iterable[str | LocalSentence]]]) -> None:
        """See :meth:`BaseLexicalIndex.replace`. Documents are locked in id order, so writers never deadlock."""
        ranked: list[tuple[str, int, str, Counter[str]]] = []  # document, position, revision, words
        kept: list[tuple[object, ...]] = []  # the local copies' rows
        ids: list[str] = []
        for doc_id, rev, sentences in documents:
            ids.append(doc_id)
            for position, sentence in enumerate(sentences):
                i, text = (position, sentence) if isinstance(sentence, str) else (sentence.i, sentence.text)
                ranked.append((doc_id, i, rev, Counter(words(text))))
                if not isinstance(sentence, str):
                    vector = None if sentence.vector is None else np.asarray(sentence.vector, np.float32).tobytes()
                    _, _, start, end, gap, tokens, counter, _, joined = sentence
                    kept.append((doc_id, i, rev, start, end, gap, text, tokens, counter, vector, joined))
        if not ids:
            return
        t = self.table
        with self._engine.begin() as conn:
            self._lock_and_delete(conn, ids)
            # each sentence's place in the order written, the ranking's tiebreak (as FTS5's rowid):
            # one nextval a sentence, so writers at once never share a number
            places = conn.execute(
                sa.text(f"SELECT nextval('{t}_order') FROM generate_series(1, :n)"), {"n": len(ranked)}
            ).scalars()
            ordered = [(int(seq), *sentence) for seq, sentence in zip(places.all(), ranked, strict=True)]
            driver = conn.connection.driver_connection  # psycopg's own, for COPY (benchmarks/README.md)
            assert driver is not None
            with driver.cursor() as cursor:
                with cursor.copy(f"COPY {t} (seq, doc_id, i, rev, length) FROM STDIN") as copy:
                    for seq, doc_id, i, rev, terms in ordered:
                        copy.write_row((seq, doc_id, i, rev, terms.total()))
                with cursor.copy(f"COPY {t}_words (term, doc_id, i, rev, seq, length, tf) FROM STDIN") as copy:
                    for seq, doc_id, i, rev, terms in ordered:
                        length = terms.total()
                        for term, n in terms.items():
                            copy.write_row((term, doc_id, i, rev, seq, length, n))
                with cursor.copy(
                    f'COPY {t}_records (doc_id, i, rev, start, "end", gap, text, tokens, counter, vector, joined) '
                    "FROM STDIN"
                ) as copy:
                    for row in kept:
                        copy.write_row(row)

    def delete(self, doc_ids: Iterable[str]) -> None:
        """Remove every row of these documents; unknown ids are ignored."""
        ids = list(doc_ids)
        if ids:
            with self._engine.begin() as conn:
                self._lock_and_delete(conn, ids)

    def _lock_and_delete(self, conn: sa.Connection, ids: list[str]) -> None:
        """Lock these documents (in id order, for the rest of the transaction) and remove their rows."""
        for doc_id in sorted(set(ids)):
            conn.execute(
                sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"), {"key": f"{self.table}/{doc_id}"}
            )
        for table in (self.table, f"{self.table}_words", f"{self.table}_records"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE doc_id = ANY(:ids)"), {"ids": ids})

    def sentences(self, doc_id: str, rev: str, indices: Sequence[int]) -> list[LocalSentence]:
        """See :meth:`BaseLexicalIndex.sentences`."""
        if not indices:
            return []
        with self._engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    f"SELECT {_COPY_COLUMNS} FROM {self.table}_records "
                    "WHERE doc_id = :doc AND rev = :rev AND i = ANY(:indices)"
                ),
                {"doc": doc_id, "rev": rev, "indices": list(indices)},
            ).all()
        return [copy_of_row(row) for row in rows]

    def copies(self, doc_ids: Collection[str] | None = None) -> Iterator[tuple[str, str, LocalSentence]]:
        """Every local copy (of ``doc_ids`` only, when given) as ``(doc_id, rev, sentence)``, in the order written."""
        where, params = ("", {}) if doc_ids is None else ("WHERE doc_id = ANY(:ids) ", {"ids": list(doc_ids)})
        with self._engine.connect() as conn:
            rows = conn.execute(
                sa.text(f"SELECT doc_id, rev, {_COPY_COLUMNS} FROM {self.table}_records {where}ORDER BY seq"), params
            ).all()
        for doc_id, rev, *copy in rows:
            yield doc_id, rev, copy_of_row(copy)

    def count(self) -> int:
        """How many local copies are kept."""
        with self._engine.connect() as conn:
            return int(conn.execute(sa.text(f"SELECT COUNT(*) FROM {self.table}_records")).scalar_one())

    def documents(self, *, copied: bool = False, among: Collection[str] | None = None) -> set[str]:
        """See :meth:`BaseLexicalIndex.documents`."""
        table = f"{self.table}_records" if copied else self.table
        where, params = ("", {}) if among is None else (" WHERE doc_id = ANY(:ids)", {"ids": list(among)})
        with self._engine.connect() as conn:
            return set(conn.execute(sa.text(f"SELECT DISTINCT doc_id FROM {table}{where}"), params).scalars())

    def revisions(self, doc_ids: Collection[str], *, ranked: bool = False) -> dict[str, set[str]]:
        """See :meth:`BaseLexicalIndex.revisions`."""
        table = self.table if ranked else f"{self.table}_records"
        statement = sa.text(f"SELECT DISTINCT doc_id, rev FROM {table} WHERE doc_id = ANY(:ids)")
        held: dict[str, set[str]] = {}
        with self._engine.connect() as conn:
            for doc_id, rev in conn.execute(statement, {"ids": list(doc_ids)}):
                held.setdefault(doc_id, set()).add(rev)
        return held

    def search(self, query: str, k: int, within: Collection[str] | None = None) -> list[LexicalHit]:
        """See :meth:`BaseLexicalIndex.search`. One statement: the counts, the idfs and the sums."""
        terms = sorted(set(words(query)))
        if not terms or k < 1:
            return []
        where, narrowed = ("", {}) if within is None else ("WHERE h.doc_id = ANY(:within) ", {"within": list(within)})
        rows = self._scored(terms, where, "ORDER BY score DESC, h.seq LIMIT :k", k=k, **narrowed)
        return [LexicalHit(str(d), int(i), str(rev), float(score)) for d, i, rev, score in rows]

    def scores(self, query: str, sentences: Collection[tuple[str, int, str]]) -> dict[tuple[str, int, str], float]:
        """See :meth:`BaseLexicalIndex.scores`: the sentences' own rows summed (the counts are the whole table's)."""
        terms, wanted = sorted(set(words(query))), sorted(set(sentences))
        if not terms or not wanted:
            return {}
        named = (
            "WHERE (h.doc_id, h.i, h.rev) IN "
            "(SELECT * FROM unnest(CAST(:docs AS text[]), CAST(:indices AS integer[]), CAST(:revs AS text[]))) "
        )
        docs, indices, revs = (list(column) for column in zip(*wanted, strict=True))
        rows = self._scored(terms, named, "", docs=docs, indices=indices, revs=revs)
        return {(str(d), int(i), str(rev)): float(score) for d, i, rev, score in rows}

    def _scored(self, terms: list[str], where: str, order: str, **arguments: Any) -> list[Any]:
        """Each row holding one of ``terms`` (``where`` narrows them), with its BM25 score, as FTS5 sums it."""
        t = self.table
        statement = sa.text(
            f"WITH stats AS (SELECT COUNT(*)::float8 AS n, COALESCE(AVG(length), 0)::float8 AS average FROM {t}), "
            f"hits AS (SELECT term, doc_id, i, rev, seq, length, tf FROM {t}_words WHERE term = ANY(:terms)), "
            "idf AS (SELECT term, LN((MIN(stats.n) - COUNT(*) + 0.5) / (COUNT(*) + 0.5)) AS w "
            "FROM hits CROSS JOIN stats GROUP BY term) "
            "SELECT h.doc_id, h.i, h.rev, "
            "SUM(CASE WHEN idf.w > 0 THEN idf.w ELSE 1e-6 END * (h.tf * (:k1 + 1.0) / (h.tf + :k1 * "
            "(1.0 - :b + :b * h.length / CASE WHEN stats.average > 0 THEN stats.average ELSE 1.0 END))) "
            # each term's share as FTS5 takes it (idf times the rest), summed in the query's word
            # order, as FTS5 and the snapshot sum: the same score to the last bit
            'ORDER BY h.term COLLATE "C") AS score '
            f"FROM hits AS h JOIN idf ON idf.term = h.term CROSS JOIN stats {where}"
            f"GROUP BY h.doc_id, h.i, h.rev, h.seq {order}"
        )
        with self._engine.connect() as conn:
            return list(conn.execute(statement, {"terms": terms, "k1": K1, "b": B, **arguments}).all())
