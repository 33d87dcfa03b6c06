"""What a lexical index is: BM25 over the same sentences (or children), and their local copies.

Dense sentence vectors miss exact terms: numbers, names, codes, rare words. A lexical index
ranks every indexed sentence by BM25; the window retriever fuses that ranking with the dense
one before expansion, each candidate by both scores (the parents retriever by reciprocal
rank). It is written by the retriever's own indexing protocol (a document's rows are replaced
in one transaction, before its head is committed), so it never holds a sentence the vector
store has not, and readers check versions exactly as they do for dense hits.

It keeps a local copy of each sentence record too: its position, the text between it and the
next, its token count and its vector. A guided query reads a few hundred neighbours; from a
local copy each costs about 10 us, from Chroma about 120 us. A copy is only ever served at the
revision the vector store's head holds for the document, so it never decides an answer the
store would not give.

:class:`BaseLexicalIndex` is the contract; :class:`~langchain_expand.store.sqlite.LexicalIndex`
keeps it in a SQLite file, :class:`~langchain_expand.store.pglexical.PostgresLexicalIndex` in
PostgreSQL.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
from langchain_core.documents import Document

from langchain_expand.store.records import sentence_span
from langchain_expand.units import STORED_GAP, STORED_INDEX

__all__ = [
    "BaseLexicalIndex",
    "LexicalHit",
    "LocalSentence",
    "Units",
    "Within",
    "copy_of",
    "copy_of_row",
]


@dataclass(frozen=True)
class LexicalHit:
    """A sentence the lexical ranking found: its document, position, version and BM25 score."""

    doc_id: str
    index: int
    rev: str
    score: float


@dataclass(frozen=True)
class Within:
    """A lexical index searched within some documents alone: a filtered query's (:meth:`BaseLexicalIndex.search`)."""

    index: BaseLexicalIndex
    doc_ids: frozenset[str]

    def search(self, query: str, k: int) -> list[LexicalHit]:
        """The ``k`` best of ``doc_ids``' sentences by BM25, best first."""
        return self.index.search(query, k, self.doc_ids)

    def scores(self, query: str, sentences: Collection[tuple[str, int, str]]) -> dict[tuple[str, int, str], float]:
        """See :meth:`BaseLexicalIndex.scores` (a score does not depend on the filter)."""
        return self.index.scores(query, sentences)


class LocalSentence(NamedTuple):
    """A sentence record's local copy: what a query needs to read it without the vector store.

    ``tokens`` were counted by the counter ``counter`` names (None: not counted), and so was
    ``joined``: this sentence, its gap and the next sentence as one text (None: the last
    sentence, or not counted); ``vector`` is the sentence's vector as float32 (None: not known):
    the one indexing wrote, or read back from the store where it may change vectors. A tuple: a
    query builds hundreds.
    """

    i: int
    text: str
    start: int
    end: int
    gap: str
    tokens: int | None = None
    counter: str | None = None
    vector: Sequence[float] | np.ndarray | None = None
    joined: int | None = None


def copy_of_row(row: Sequence[Any]) -> LocalSentence:
    """A local copy from a row of its columns in :class:`LocalSentence`'s order, the vector as float32 bytes."""
    i, text, start, end, gap, tokens, counter, blob, joined = row
    return LocalSentence(i, text, start, end, gap, tokens, counter, vector_of(blob), joined)


Units = Literal["sentences", "children"]
"""What a lexical index ranks: a window retriever's sentences, or a parents retriever's children."""
_OWNERS = {"sentences": "SentenceWindowRetriever", "children": "BudgetedParentDocumentRetriever"}


class BaseLexicalIndex(ABC):
    """What the window retriever asks of a lexical index: BM25 over its sentences and their local copies.

    :class:`LexicalIndex` keeps them in a SQLite file (one machine);
    :class:`~langchain_expand.store.pglexical.PostgresLexicalIndex` in PostgreSQL, shared by every
    process that reaches the database. Both rank as :class:`~langchain_expand.windows.bm25.Bm25` does.
    """

    def check_text(self, text: str, doc_id: str) -> None:  # noqa: B027  (optional: most indexes hold any text)
        """Refuse a document's text this index cannot hold, before anything of its batch is written."""

    def claim(self, units: Units | None) -> str | None:
        """Whose units the index holds (:data:`Units`), stored as ``units`` where none is yet; None: only read.

        An index that keeps no claim (this default) holds whatever it is given.
        """
        return units

    def check_units(self, units: Units, owner: str) -> None:
        """Refuse to serve ``owner``, a retriever of ``units``, from an index that holds the other retriever's.

        A window retriever's sentences (ranked, with local copies) and a parents retriever's
        children (ranked alone) in one table would overwrite each other's rows of a document of
        the same id, and rank each other's units as their own. An index claimed by neither yet
        is told by its rows: copies are sentences, rows without them children.
        """
        held = self.claim(None) or self.claim(
            "sentences" if self.count() else "children" if self.documents() else units
        )
        if held is not None and held != units:
            msg = (
                f"{owner} cannot use {self!r}: it holds a {_OWNERS.get(held, held)}'s {held}, and rows of both in one "
                f"table overwrite each other. Give each retriever a table of its own (table={units!r})."
            )
            raise ValueError(msg)

    @abstractmethod
    def replace(self, documents: Iterable[tuple[str, str, Iterable[str | LocalSentence]]]) -> None:
        """Make each ``(doc_id, rev, sentences)`` the whole of what is stored for its document.

        A sentence given as text is ranked only, at its position in the list; a
        :class:`LocalSentence` is ranked at its position ``i`` and also kept as the record's local copy.
        One transaction for the lot: a reader sees every document's old rows or its new ones.
        """

    @abstractmethod
    def delete(self, doc_ids: Iterable[str]) -> None:
        """Remove every row of these documents; unknown ids are ignored."""

    @abstractmethod
    def sentences(self, doc_id: str, rev: str, indices: Sequence[int]) -> list[LocalSentence]:
        """The local copies of sentences ``indices`` of the document at revision ``rev``.

        Sentences held at another revision, or not at all, are left out: the caller reads
        those from the vector store.
        """

    def sentences_of(
        self, wanted: Mapping[tuple[str, str], Sequence[int]]
    ) -> dict[tuple[str, str], list[LocalSentence]]:
        """:meth:`sentences` of many documents: for each ``(doc_id, rev)`` its copies held of ``indices``.

        A query past the snapshot's limit reads copies of a hundred documents or more at once;
        an index that can read them in one statement does (this default asks each document).
        Documents with none held are left out.
        """
        found = {key: self.sentences(*key, indices) for key, indices in wanted.items()}
        return {key: copies for key, copies in found.items() if copies}

    @abstractmethod
    def copies(self, doc_ids: Collection[str] | None = None) -> Iterator[tuple[str, str, LocalSentence]]:
        """Every local copy (of ``doc_ids`` only, when given) as ``(doc_id, rev, sentence)``, in the order written."""

    @abstractmethod
    def count(self) -> int:
        """How many local copies are kept."""

    @abstractmethod
    def documents(self, *, copied: bool = False, among: Collection[str] | None = None) -> set[str]:
        """The ids of every document with rows here; with ``copied``, of those with local copies too.

        With ``among``, only those of these ids: a lookup, not a scan of the whole index.
        """

    @abstractmethod
    def revisions(self, doc_ids: Collection[str], *, ranked: bool = False) -> dict[str, set[str]]:
        """The revisions the local copies of each of ``doc_ids`` are at (a document without copies is left out).

        With ``ranked``, the revisions its ranked rows are at, copied or not (a parents
        retriever's children have no copies). A document's rows and copies are replaced in one
        transaction, so one revision each, unless the index was written by a version of this
        library that did otherwise.
        """

    @abstractmethod
    def search(self, query: str, k: int, within: Collection[str] | None = None) -> list[LexicalHit]:
        """The ``k`` sentences that best match the query's words by BM25, best first, ties in the order written.

        So the best ``k`` are the first ``k`` of the best ``n > k`` (the parents ask BM25 once for
        a query whose budget asks ever more children).

        A sentence matches when it holds any of the query's words (:func:`words`); BM25 weighs
        rare terms up. With ``within`` (document ids: a filtered query's), only their sentences
        are returned, scored as without it (the idf of the whole index), as a store's filter
        narrows its search.
        """

    @abstractmethod
    def scores(self, query: str, sentences: Collection[tuple[str, int, str]]) -> dict[tuple[str, int, str], float]:
        """The BM25 score of each ``(doc_id, index, rev)`` held that holds a query word, as :meth:`search` scores it.

        Fusion weighs every candidate by both rankings' scores, not only those BM25 ranked
        among its best; a sentence left out scores 0.
        """


def vector_of(blob: bytes | None) -> np.ndarray | None:
    """A vector stored as float32 bytes, as an array over them (None stays None)."""
    return None if blob is None else np.frombuffer(blob, dtype=np.float32)


def copy_of(record: Document) -> LocalSentence:
    """A sentence record as its local copy holds it."""
    m = record.metadata
    start, end = sentence_span(record)
    return LocalSentence(int(m[STORED_INDEX]), record.page_content, start, end, m[STORED_GAP])
