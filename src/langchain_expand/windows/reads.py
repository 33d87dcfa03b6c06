"""One query's reads of sentences: held in memory, the cache, the local copies, else the store; each at its revision.

Wherever it comes from, a sentence is read as a copy (:class:`~langchain_expand.store.lexical.LocalSentence`)
at a revision (:class:`Read`): a local copy (:class:`~langchain_expand.store.lexical.BaseLexicalIndex`)
at the revision of its document's head read this query, a record of the store at its own, made
into a copy where it is read. Hits and windows are made from what is read (:meth:`Reads.sentences`,
:meth:`Reads.local_run`); heads stay records, for their metadata. The rule that keeps a cached
read current: :mod:`.cache`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

import numpy as np
from langchain_core.documents import Document

from langchain_expand.store.adapters import StoreAdapter, Vector
from langchain_expand.store.lexical import BaseLexicalIndex, LocalSentence, copy_of
from langchain_expand.store.records import record_cues, unit_id
from langchain_expand.store.similarity import cosines, relevances
from langchain_expand.text.cues import Cues, cues
from langchain_expand.text.tokens import count_many, counter_key
from langchain_expand.units import STORED_COUNT, STORED_DOC, STORED_GAP, STORED_INDEX, STORED_REV
from langchain_expand.windows.cache import SentenceCache, completed, own_vector
from langchain_expand.windows.columns import Columns, Scores, nearest
from langchain_expand.windows.regions import Lookup, Position
from langchain_expand.windows.views import Current

__all__ = ["EXACT_ROWS", "Read", "Reads", "Run", "not_ours", "position_of"]

EXACT_ROWS = 50_000
"""Past the snapshot's limit, a filter's sentences searched exactly in memory, at most (as the snapshot's limit)."""


_SENTENCE_KEYS = frozenset((STORED_DOC, STORED_INDEX, STORED_COUNT, STORED_REV, STORED_GAP))
"""What every sentence record this retriever writes carries (:func:`position_of`)."""


class Run(NamedTuple):
    """Consecutive sentences of one document, all at one revision: what a window is built from."""

    rev: str
    head: Document
    """The document's head record: its metadata is what every record of the document carries."""
    sentences: Sequence[LocalSentence]


class Read(NamedTuple):
    """A sentence as this query read it: its copy, at revision ``rev`` of a document of ``n`` sentences."""

    copy: LocalSentence
    rev: str
    n: int
    cues: Cues


class Reads:
    """One query's reads of sentences: what it read already, a copy (kept, or the local one), else the store's record.

    A copy is served at the revision of its document's head read this query (:meth:`heads`). With
    a snapshot, heads and copies come from it (each document at its last finished write).
    """

    def __init__(
        self,
        store: StoreAdapter,
        cache: SentenceCache,
        size: int,
        counter: Callable[[str], int],
        local: BaseLexicalIndex | None = None,
        current: Current | None = None,
    ) -> None:
        """Reads from ``store`` through ``cache`` (at most ``size`` copies) and ``local``; counts with ``counter``.

        ``current``: what the query found held at the store's change mark (:class:`Current`): the
        heads read at it, and sentences in arrays, each served at its head's revision (:meth:`held`).
        """
        self.store = store
        self.marked = None if current is None else current.heads
        self.columns = None if current is None else current.columns
        """What the query holds of its sentences in arrays (:mod:`.columns`), each document at its head's revision."""
        self.snapshot = self.columns if current is not None and current.whole else None
        """The columns where they hold every committed document with its text: none is read from elsewhere."""
        if self.snapshot is not None:  # it holds every record the cache and the copies could
            local, size = None, 0
        self.cache = cache
        self.size = size
        self.counter = counter
        self.local = local
        self._heads: dict[str, Document] = {}  # each document's head record (its vector is in its sentence's read)
        # Every sentence read, by position (growth's key: no id is built or parsed per sentence):
        self._read: dict[Position, Read] = {}
        self._asked: set[Position] = set()  # positions asked of the local copy
        self._counts: dict[Position, int] = {}  # token counts, by position
        self._key = counter_key(counter)
        self._scores: tuple[Sequence[float], Scores] | None = None
        self.documents = None if current is None else current.documents

    def saw(self, docs: Iterable[Document]) -> None:
        """Keep the records the store's search just returned: this query reads them no more."""
        self._learn((d, None) for d in docs if position_of(d) not in self._read)

    def heads(self, doc_ids: Iterable[str]) -> None:
        """Read the documents' heads (sentence 0, the commit marker) with their vectors, once a query.

        From the heads read at this query's change mark (``marked``: a build's are every
        one), else from the store (and kept there for the next query at the mark).
        """
        doc_ids = [d for d in dict.fromkeys(doc_ids) if d not in self._heads]
        if self.marked is not None:
            self._learn(self.marked.found([unit_id(d, 0) for d in doc_ids]))
        read = self.store.with_vectors([unit_id(d, 0) for d in doc_ids if d not in self._heads])
        if self.marked is not None:
            self.marked.keep(read)
        self._learn(read)

    def sentences(self, positions: Sequence[Position], *, vectors: bool = False) -> dict[Position, Read]:
        """The sentences at ``positions`` (with their vectors where ``vectors``): copied, read already, else read.

        A copy comes first (:meth:`read_copies`: with its token count); a record the store no
        longer holds, or another writer's, is left out. Heads come through :meth:`heads` (those
        held at the store's change mark first).
        """
        self.heads(doc_id for doc_id, i in positions if i == 0)
        self.read_copies(positions)
        reads = self._read

        def known(p: Position) -> bool:
            return p in reads and (not vectors or reads[p].copy.vector is not None)

        ids = [unit_id(*p) for p in positions if not known(p)]
        if ids:
            self._learn(self.store.with_vectors(ids) if vectors else [(d, None) for d in self.store.get_by_ids(ids)])
        return {p: reads[p] for p in positions if known(p)}

    def similar(
        self, positions: Sequence[Position], vector: Sequence[float]
    ) -> list[tuple[Position, int, float, Cues]]:
        """Each sentence's position, token count, similarity to ``vector`` and cues: what growth weighs of it, read.

        From its local copy at its head's revision, else its record (what memory holds, growth
        looks up itself: :meth:`held`). Sentences of other writers are left out.
        """
        found = self.sentences(positions, vectors=True)
        counts = self.sizes(list(found))
        kept = [p for p in found if p in counts]
        similarities = cosines([v for p in kept if (v := found[p].copy.vector) is not None], vector)
        return [(p, counts[p], c, found[p].cues) for p, c in zip(kept, similarities, strict=True)]

    def relevances(self, positions: Sequence[Position], vector: Sequence[float]) -> dict[Position, float]:
        """Each sentence's relevance to ``vector``, from its vector as the store measures it: one way everywhere.

        The store's search and the columns' each sum a distance their own way, so a sentence
        scored by one differs from the other in the last bits, and a fused ranking (which weighs
        a score's size) and the scores returned would depend on the memory setting. The vector
        comes from the columns where they hold the sentence at its document's revision, else
        from its read; a sentence gone is left out (:func:`~langchain_expand.store.similarity.relevances`).
        """
        columns, rows = self.columns, dict[Position, int]()
        if columns is not None and columns.width == len(vector):
            for position in positions:
                document = self.document(position[0])
                row = None if document is None else columns.row(position, document[1])
                if row is not None:
                    rows[position] = row
        found = self.sentences([p for p in positions if p not in rows], vectors=True)
        read = {p: v for p, r in found.items() if (v := r.copy.vector) is not None}
        vectors: list[Vector] = [*(columns.vectors(list(rows.values())) if columns is not None and rows else ())]
        scores = relevances([*vectors, *read.values()], vector, self.store.space, self.store.relevance)
        return dict(zip([*rows, *read], scores, strict=True))

    def held(self, vector: Sequence[float]) -> Lookup | None:
        """What growth knows of a sentence held in memory, against ``vector``: a lookup (None with nothing held).

        The lookup gives what :meth:`similar` would, for a sentence the columns hold at its
        document's revision (:meth:`document`), reading nothing; None for one not held at it.
        """
        columns, scores = self.columns, self._scores_for(vector)
        if columns is None or scores is None:
            return None

        def revision(doc_id: str) -> str | None:
            document = self.document(doc_id)
            return None if document is None else document[1]

        return columns.lookup(scores, self._key, revision, self._copy_tokens)

    def nearest(self, vector: Sequence[float], k: int) -> list[tuple[Position, float]] | None:
        """The ``k`` sentences nearest ``vector``, exactly, from memory; None where the store searches.

        From the snapshot (a filter's :attr:`documents` alone); past its limit, a filter's documents
        from the columns, each whole at its head's revision, at most ``EXACT_ROWS`` sentences.
        """
        scores, columns, space = self._scores_for(vector), self.columns, self.store.space
        if scores is None or columns is None or space is None or not scores.usable:
            return None
        rows = None if self.documents is None else self._rows_of(self.documents, columns)
        if self.documents is not None and rows is None:
            return None  # a filter's documents not all held whole: the store searches
        if self.snapshot is not None:
            dots, cosines = scores.every()
            squares = columns.squares
            scored = (dots, cosines, squares) if rows is None else (dots[rows], cosines[rows], squares[rows])
        elif rows is None:
            return None  # past the limit, unfiltered: the store searches
        else:
            scored = columns.among(rows, scores.query)
        return nearest(columns, rows, scored, scores.query, k, space, self.store.relevance)

    def _rows_of(self, doc_ids: frozenset[str], columns: Columns) -> np.ndarray | None:
        """The rows of ``doc_ids``' sentences, each document whole at its head's revision; else None."""
        self.heads(doc_ids)
        rows: list[int] = []
        for doc_id in sorted(doc_ids):
            committed = self.committed(doc_id)
            if committed is None:
                continue  # no head: none of it is found, as by the store's search
            if columns.document(doc_id) != (committed[1], committed[0].metadata.get(STORED_COUNT)):
                return None  # written since the columns were built: the store searches
            rows += columns.rows(doc_id)
            if len(rows) > EXACT_ROWS and self.snapshot is None:
                return None
        return None if min(rows, default=0) < 0 else np.asarray(rows, dtype=np.int64)

    def _scores_for(self, vector: Sequence[float]) -> Scores | None:
        """The columns' similarities to ``vector``, one :class:`Scores` a query; None without columns."""
        if self.columns is not None and (self._scores is None or self._scores[0] is not vector):
            self._scores = (vector, self.columns.scores(vector))
        return None if self._scores is None else self._scores[1]

    def sizes(self, positions: Sequence[Position]) -> dict[Position, int]:
        """Each sentence's token count, once a query: its copy's, else the columns' at its revision, else counted.

        A count kept is used where this query's counter made it; a sentence gone is left out.
        """
        found = self.sentences([p for p in positions if p not in self._counts])
        columns, key, todo = self.columns, self._key, []
        for position, read in found.items():
            n = read.copy.tokens if key is not None and read.copy.counter == key else None
            if n is None and columns is not None and (row := columns.row(position, read.rev)) is not None:
                n = columns.tokens(row, key)
            if n is None:
                todo.append(position)
            else:
                self._counts[position] = n
        self._counts.update(zip(todo, count_many(self.counter, [found[p].copy.text for p in todo]), strict=True))
        self._keep(todo)  # with their counts now
        return {p: self._counts[p] for p in positions if p in self._counts}

    def local_run(self, doc_id: str, first: int, last: int) -> Run | None:
        """Sentences ``first`` to ``last - 1`` as copied, at the head's revision: held, else read; None if any is not.

        A window is built from them, its count from theirs (:func:`~langchain_expand.windows.assembly.run_tokens`).
        The snapshot's are sliced from it; others must be read first (:meth:`read_copies`).
        """
        committed = self.committed(doc_id)
        if committed is None:
            return None
        head, rev = committed
        held = None if self.snapshot is None else self.snapshot.run(doc_id, rev, first, last)
        if held is not None:
            return Run(rev, head, held)
        sentences: list[LocalSentence] = []
        for i in range(first, last):
            read = self._read.get((doc_id, i))
            if read is None or read.rev != rev:
                return None
            sentences.append(read.copy)
        return Run(rev, head, sentences)

    def read_copies(self, positions: Sequence[Position]) -> None:
        """Read the copies at ``positions`` not read yet this query, each at its head's revision.

        From the snapshot, else the cache, else the local copies; the heads are read first (most are
        held at the store's change mark).
        """
        asked = self._asked
        positions = [p for p in positions if p not in asked]
        asked.update(positions)
        if not positions or not (self.local is not None or self.snapshot is not None or self.size):
            return
        wanted: dict[str, list[int]] = {}
        for doc_id, i in positions:
            wanted.setdefault(doc_id, []).append(i)
        self.heads(wanted)
        known: list[tuple[str, int, str, list[tuple[LocalSentence, Cues]]]] = []
        missing: dict[tuple[str, str], list[int]] = {}
        for doc_id, indices in wanted.items():
            committed = self.committed(doc_id)
            if committed is None:
                continue  # not committed: the store answers for it
            head, rev = committed
            held = self._held_copies(doc_id, rev, indices)
            known.append((doc_id, int(head.metadata[STORED_COUNT]), rev, held))
            # a record kept without its vector is read again from its local copy, as a query that had
            # not kept it would: the store hands a vector back a few bits off the copy's (a head's has none)
            unheld = set(indices) - {s.i for s, _ in held if s.vector is not None or s.i == 0}
            if unheld and self.local is not None:
                missing[(doc_id, rev)] = sorted(unheld)
        fetched = self.local.sentences_of(missing) if self.local is not None and missing else {}
        for doc_id, n, rev, held in known:
            read = [(s, cues(s.text, s.gap)) for s in fetched.get((doc_id, rev), ())]
            if self.size and read:
                self.cache.keep_copies(doc_id, rev, read, self.size)
            for sentence, cued in [*held, *read]:
                self._put((doc_id, sentence.i), Read(sentence, rev, n, cued))

    def _held_copies(self, doc_id: str, rev: str, indices: Sequence[int]) -> list[tuple[LocalSentence, Cues]]:
        """The copies of sentences ``indices`` at ``rev`` held in the snapshot, else in the cache."""
        if self.snapshot is not None:
            return self.snapshot.copies(doc_id, rev, indices)
        return self.cache.copies(doc_id, rev, indices) if self.size else []

    def committed(self, doc_id: str) -> tuple[Document, str] | None:
        """The document's head read this query and its revision; None where it has none (not committed)."""
        head = self._heads.get(doc_id)
        rev = None if head is None else head.metadata.get(STORED_REV)
        return (head, rev) if head is not None and isinstance(rev, str) else None

    def document(self, doc_id: str) -> tuple[int, str] | None:
        """The document's number of sentences and revision: the snapshot's, else its head's read this query."""
        held = None if self.snapshot is None else self.snapshot.document(doc_id)
        if held is not None:
            return held[1], held[0]
        committed = self.committed(doc_id)
        n = None if committed is None else committed[0].metadata.get(STORED_COUNT)
        return (n, committed[1]) if committed is not None and isinstance(n, int) else None

    def _copy_tokens(self, position: Position, sentence: LocalSentence) -> int:
        """A local copy's token count: as kept, when this query's counter made it; else counted now."""
        counted = self._counts.get(position)
        if counted is None:
            kept = sentence.tokens if self._key is not None and sentence.counter == self._key else None
            counted = self._counts[position] = kept if kept is not None else self.counter(sentence.text)
        return counted

    def _learn(self, read: Iterable[tuple[Document, Vector | None]]) -> None:
        """Records just read from the store: each one's sentence read as a copy, heads kept as records too; kept."""
        learned: list[Position] = []
        for doc, vector in read:
            position = position_of(doc)
            if position[1] == 0:
                self._heads[position[0]] = doc
            copy, meta = copy_of(doc)._replace(vector=vector), doc.metadata
            self._put(position, Read(copy, str(meta.get(STORED_REV)), int(meta[STORED_COUNT]), record_cues(doc)))
            learned.append(position)
        self._keep(learned)

    def _put(self, position: Position, read: Read) -> None:
        """Hold ``read``; a read at the revision of one held already keeps what that one knew (:func:`completed`)."""
        before = self._read.get(position)
        if before is not None and before.rev == read.rev:
            read = read._replace(copy=completed(read.copy, before.copy))
        self._read[position] = read

    def _keep(self, positions: Iterable[Position]) -> None:
        """Keep sentences read from the store between queries, with their vectors and counts where read.

        Heads are never kept: a query reads them from the store, for the version check.
        """
        if not self.size:
            return
        by_document: dict[tuple[str, str], list[tuple[LocalSentence, Cues]]] = {}
        for position in positions:
            if position[1] == 0:
                continue
            read = self._read[position]
            copy = read.copy._replace(vector=None if read.copy.vector is None else own_vector(read.copy.vector))
            n = self._counts.get(position)
            if n is not None and self._key is not None:
                copy = copy._replace(tokens=n, counter=self._key)
            by_document.setdefault((position[0], read.rev), []).append((copy, read.cues))
        for (doc_id, rev), copies in by_document.items():
            self.cache.keep_copies(doc_id, rev, copies, self.size)


def position_of(record: Document) -> Position:
    """Where a sentence record of this retriever stands; a record without sentence positions is an error naming it.

    Another writer's record (a text added to the collection by hand, a parent's child, whose id
    reads as a sentence's) lacks them.
    """
    meta = record.metadata
    if not meta.keys() >= _SENTENCE_KEYS:
        raise not_ours(record.id)
    return meta[STORED_DOC], int(meta[STORED_INDEX])


def not_ours(record_id: str | None) -> ValueError:
    """The error for a record in the collection that this retriever did not write."""
    return ValueError(
        f"The vector store returned a record without sentence positions ({record_id!r}). "
        "Give SentenceWindowRetriever a collection that only it writes to."
    )
