"""How the window retriever stores a document: one vector-store record per sentence, the head last.

A record holds its sentence's text and the metadata a window needs (the document, the
sentence's index and offsets, the gap to the next one, the revision); sentence 0 is the head,
written after the others, so a document counts as committed once its head holds the new
revision. With a lexical index, each sentence's local copy (text, offsets, vector, counts) is
written before the heads too.
"""

from __future__ import annotations

import functools
from array import array
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document

from langchain_expand.store import commit
from langchain_expand.store.adapters import StoreAdapter, Vector
from langchain_expand.store.commit import Prepared, Stored
from langchain_expand.store.lexical import BaseLexicalIndex, LocalSentence
from langchain_expand.store.records import UnitIds, same_embedded_text, unit_id
from langchain_expand.text.sentences import Span
from langchain_expand.units import (
    STORED_COUNT,
    STORED_DOC,
    STORED_END,
    STORED_GAP,
    STORED_INDEX,
    STORED_REV,
    STORED_START,
)

__all__ = ["SentenceLayout", "SentenceRecords"]

_PROBE = 64  # ids probed per step when looking for units left by an interrupted run
_RECORD_KEYS = frozenset((STORED_DOC, STORED_INDEX, STORED_COUNT, STORED_START, STORED_END, STORED_GAP, STORED_REV))
"""What :meth:`SentenceRecords.record` adds to a document's metadata."""
_DELETE_BATCH = 5_000  # ids per delete call


class SentenceRecords:
    """One document's sentence records, kept as offsets and built one at a time when written (not all held at once)."""

    def __init__(
        self,
        doc_id: str,
        text: str,
        spans: list[Span],
        metadata: dict[str, Any],
        rev: str,
        counts: tuple[array[int], array[int]] | None,
        prefixes: list[str] | None = None,
        revised: Callable[[str], str] | None = None,
    ) -> None:
        """``counts``: each sentence's token count, and each one's joined with the next (for the local copies).

        ``prefixes``: what is embedded before each sentence (its prefix; see
        :mod:`langchain_expand.text.prefixes`), None for nothing. ``revised``: this text's
        revision with another metadata fingerprint (:meth:`embedded_as`).
        """
        self.doc_id = doc_id
        self.text = text
        self.starts = array("q", (s for s, _ in spans))
        self.ends = array("q", (e for _, e in spans))
        self.metadata = metadata
        self.rev = rev
        self.counts = counts
        self.prefixes = prefixes
        self.revised = revised

    @property
    def n(self) -> int:
        """The number of sentences."""
        return len(self.starts)

    def place(self, i: int) -> tuple[int, int, str]:
        """Sentence ``i``'s start and end offsets, and the text between it and the next one."""
        start, end = self.starts[i], self.ends[i]
        gap_end = self.starts[i + 1] if i + 1 < self.n else end
        return start, end, self.text[end:gap_end]

    def record(self, i: int) -> Document:
        """Sentence ``i`` as stored: its text, position, the gap to the next one, the version."""
        start, end, gap = self.place(i)
        meta = {
            **self.metadata,
            STORED_DOC: self.doc_id,
            STORED_INDEX: i,
            STORED_COUNT: self.n,
            STORED_START: start,  # its end is its text's length later (records.sentence_span)
            STORED_GAP: gap,
            STORED_REV: self.rev,
        }
        return Document(page_content=self.text[start:end], metadata=meta)

    def embedded_as(self, head: Document) -> bool:
        """Whether the stored ``head`` commits this text, split and prefixed as here (:func:`same_embedded_text`)."""
        meta = head.metadata
        if meta.get(STORED_COUNT) != self.n or self.revised is None:
            return False
        return same_embedded_text(self.revised, meta, _RECORD_KEYS, STORED_REV)

    def embedded(self, i: int) -> str:
        """What is embedded for sentence ``i``: its prefix, then its text."""
        start, end = self.starts[i], self.ends[i]
        return (self.prefixes[i] if self.prefixes is not None else "") + self.text[start:end]

    def local(self, vector_of: Callable[[int], Vector | None], counter: str | None) -> Iterator[LocalSentence]:
        """Every sentence as the lexical index keeps it, with the vector the store holds (``vector_of(i)``)."""
        for i in range(self.n):
            start, end, gap = self.place(i)
            tokens = joined = None
            if self.counts is not None and counter is not None:
                tokens, joined = self.counts[0][i], self.counts[1][i] if i + 1 < self.n else None
            vector = vector_of(i) if i else None  # the head is not written yet
            yield LocalSentence(i, self.text[start:end], start, end, gap, tokens, counter, vector, joined)


@dataclass(eq=False)
class SentenceLayout:
    """Windows' storage: one vector-store record per sentence; sentence 0 is the head."""

    store: StoreAdapter
    batch_size: int
    lexical: BaseLexicalIndex | None
    counter: str | None
    _read: dict[str, Document] = field(default_factory=dict, init=False, repr=False)
    """The heads :meth:`heads` read, by document: what :meth:`write_body` keeps vectors by."""
    _heads_kept: dict[str, Vector] = field(default_factory=dict, init=False, repr=False)
    """The vectors :meth:`write_body` kept for heads (:meth:`_kept`), which :meth:`write_heads` writes."""

    def heads(self, doc_ids: list[str]) -> dict[str, Hashable]:
        """Each committed document's head: its revision and sentence count (documents without one left out)."""
        found = self.store.get_by_ids([unit_id(d, 0) for d in doc_ids])
        self._read.update((str(h.metadata[STORED_DOC]), h) for h in found if STORED_DOC in h.metadata)
        return {
            h.metadata[STORED_DOC]: (h.metadata.get(STORED_REV), int(h.metadata[STORED_COUNT]))
            for h in found
            if STORED_DOC in h.metadata
        }

    def stored(self, doc_ids: list[str], heads: dict[str, Hashable]) -> dict[str, Stored]:
        """The ids each document's sentences take in the store, those an interrupted run left past its end too."""
        known = {d: int(head[1]) for d, head in heads.items() if isinstance(head, tuple)}
        left = self._probe(doc_ids, known)
        committed = {d: UnitIds(d, known.get(d, 0)) for d in doc_ids}
        # Units left past the end exist only after an interrupted run: listing them all is fine then.
        return {d: Stored(vector_ids=[*committed[d], *left[d]] if d in left else committed[d]) for d in doc_ids}

    def unsettled(self, doc_ids: list[str], heads: dict[str, Hashable]) -> set[str]:
        """Documents with a sentence missing, of another version than their head, or past its count.

        Reads the sentences' metadata, in batches; embeds nothing.
        """
        committed: dict[str, tuple[object, int]] = {}
        for d in doc_ids:
            head = heads.get(d)
            if isinstance(head, tuple):
                committed[d] = (head[0], int(head[1]))
        ids = ((d, unit_id(d, i)) for d, (_, n) in committed.items() for i in range(1, n))
        bad: set[str] = set()
        for chunk in commit.batched(ids, self.batch_size):
            revs = {r.id: r.metadata.get(STORED_REV) for r in self.store.get_by_ids([i for _, i in chunk])}
            bad.update(d for d, i in chunk if revs.get(i) != committed[d][0])
        rest = [d for d in committed if d not in bad]
        return bad | set(self._probe(rest, {d: committed[d][1] for d in rest}))

    def _probe(self, doc_ids: list[str], start: dict[str, int]) -> dict[str, list[str]]:
        """Per document, the ids past its committed end that an interrupted run left behind."""

        def lookup(asked: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
            ids = {unit_id(d, i): (d, i) for d, i in asked}
            return {ids[doc.id]: doc.id for doc in self.store.get_by_ids(list(ids)) if doc.id in ids}

        left: dict[str, list[str]] = {}
        for (d, _), found in commit.probe_past({d: start.get(d, 0) for d in doc_ids}, lookup, _PROBE).items():
            left.setdefault(d, []).append(found)
        return left

    def write_body(self, todo: list[Prepared]) -> None:
        """Every sentence but the heads, built and written one batch at a time, then their local copies.

        The copies (before the heads: the lexical index never holds a version not yet written)
        take the vectors the store was just given, where it keeps them as given (Chroma), else
        read them back; ``_HELD`` sentences at a time. A batch of a long document that an
        interrupted run already stored at this revision is not embedded again, nor is a
        sentence of a document whose metadata alone changed (:meth:`_kept`).
        """
        for part in _parts(todo, _HELD):
            bodies = ((p.doc_id, i, p.payload) for p in part for i in range(1, p.payload.n))
            kept = self._kept(part)
            self._heads_kept.update((i, kept[i]) for p in part if (i := unit_id(p.doc_id, 0)) in kept)
            written = self._write(bodies, keep_vectors=self.lexical is not None, resume=True, kept=kept)
            if self.lexical is not None:
                self.lexical.replace(self.local_rows(part, written))

    def _kept(self, part: list[Prepared]) -> dict[str, Vector]:
        """The vectors of sentences whose embedded text is unchanged (new metadata alone), by id.

        Of a document of at most ``_HELD`` sentences whose stored head commits its text split and
        prefixed as now (:meth:`SentenceRecords.embedded_as`): each sentence's vector at that
        head's revision (the head's too, which :meth:`write_heads` writes), from the lexical
        index's copy (the vector first written; a head's copy holds none), else from the record
        the store holds at that revision (:meth:`StoreAdapter.vectors_at`). A record of another
        revision (an interrupted write's) is embedded, as is a longer document (its vectors are
        not held), and every sentence where the store embeds whatever it is given.
        """
        wanted = {
            (p.doc_id, str(head.metadata[STORED_REV])): list(range(p.payload.n))  # embedded_as: the same count
            for p in part
            if p.payload.n <= _HELD and (head := self._read.get(p.doc_id)) is not None and p.payload.embedded_as(head)
        }
        kept: dict[str, Vector] = {}
        if not wanted or not self.store.takes_vectors():
            return kept
        revs = dict(wanted.keys())  # each document: its head's revision
        copies = self.lexical.sentences_of(wanted) if self.lexical is not None else {}
        for (doc_id, _), found in copies.items():
            kept.update((unit_id(doc_id, c.i), c.vector) for c in found if c.vector is not None)
        rest = [unit_id(d, i) for (d, _), indices in wanted.items() for i in indices if unit_id(d, i) not in kept]
        for chunk in commit.batched(rest, self.batch_size):
            kept.update(self.store.vectors_at(chunk, revs))
        return kept

    def local_rows(
        self, todo: list[Prepared], written: dict[str, Vector] | None = None
    ) -> Iterator[tuple[str, str, Iterator[LocalSentence]]]:
        """The documents' rows for the lexical index, with the vectors their body has in the store.

        Vectors not in ``written`` (those just written) are read back a batch of documents at a
        time; a document longer than ``_HELD`` sentences, a batch of its sentences at a time.
        """
        written = written or {}
        for group in _parts(todo, self.batch_size):
            ids = [unit_id(q.doc_id, i) for q in group if q.payload.n <= _HELD for i in range(1, q.payload.n)]
            vectors = {i: written[i] for i in ids if i in written}
            for chunk in commit.batched([i for i in ids if i not in vectors], self.batch_size):
                vectors.update(self.store.vectors(chunk))
            for q in group:
                if q.payload.n > _HELD:
                    vector_of = self._read_back(q.doc_id, q.payload.n)
                else:
                    vector_of = functools.partial(_vector_of, vectors, q.doc_id)
                yield q.doc_id, q.payload.rev, q.payload.local(vector_of, self.counter)

    def _read_back(self, doc_id: str, n: int) -> Callable[[int], Vector | None]:
        """Sentence ``i``'s stored vector, asked in order: read ``batch_size`` at a time, the last batch alone held."""
        held: dict[str, Vector] = {}
        loaded = range(0)

        def vector_of(i: int) -> Vector | None:
            nonlocal loaded
            if i not in loaded:
                loaded = range(i, min(n, i + self.batch_size))
                held.clear()
                held.update(self.store.vectors([unit_id(doc_id, j) for j in loaded]))
            return held.get(unit_id(doc_id, i))

        return vector_of

    def write_heads(self, todo: list[Prepared]) -> None:
        """The heads, last: each commits its document's new revision."""
        self._write(((p.doc_id, 0, p.payload) for p in todo), keep_vectors=False, kept=self._heads_kept)

    def _write(
        self,
        units: Iterable[tuple[str, int, SentenceRecords]],
        *,
        keep_vectors: bool,
        resume: bool = False,
        kept: dict[str, Vector] | None = None,
    ) -> dict[str, Vector]:
        """Write ``units`` a batch at a time; with ``keep_vectors``, the vectors the store keeps as given, by id.

        Vectors are kept only of documents of at most ``_HELD`` sentences. With ``resume``, a
        batch's sentences of a document longer than a batch that are stored at its revision
        already (an interrupted run's) are left as they are. A unit in ``kept`` is written with
        that vector, not embedded again, where the store can take one.
        """
        written: dict[str, Vector] = {}
        for batch in commit.batched(units, self.batch_size):
            chunk = self._unwritten(batch) if resume else batch
            if not chunk:
                continue
            ids = [unit_id(d, i) for d, i, _ in chunk]
            got = self.store.add_documents(
                [body.record(i) for _, i, body in chunk],
                ids=ids,
                embedded=[body.embedded(i) for _, i, body in chunk],
                vectors=kept,
                keep_vectors=keep_vectors,
            )
            written.update(
                (i, got[i]) for i, (_, _, body) in zip(ids, chunk, strict=True) if i in got and body.n <= _HELD
            )
        return written

    def _unwritten(self, chunk: list[tuple[str, int, SentenceRecords]]) -> list[tuple[str, int, SentenceRecords]]:
        """``chunk`` less the sentences of long documents (over a batch) already stored at their revision."""
        revisions = {unit_id(d, i): body.rev for d, i, body in chunk if body.n > self.batch_size}
        if not revisions:
            return chunk
        done = self.store.holding(revisions)
        return [(d, i, body) for d, i, body in chunk if unit_id(d, i) not in done]

    def remove(self, stale: Iterable[Stored]) -> None:
        """Delete the records ``stale`` names, in batches."""
        ids = (i for s in stale for i in s.vector_ids)
        for chunk in commit.batched(ids, _DELETE_BATCH):
            self.store.delete(chunk)


_HELD = 16_384
"""Sentences written before their local copies, at most (but a document's whole); a longer
document's vectors are not held: its copies read them back."""


def _vector_of(vectors: dict[str, Vector], doc_id: str, i: int) -> Vector | None:
    return vectors.get(unit_id(doc_id, i))


def _parts(todo: list[Prepared], size: int) -> Iterator[list[Prepared]]:
    """``todo`` in runs of whole documents, each closed once its bodies reach ``size`` sentences."""
    part: list[Prepared] = []
    held = 0
    for p in todo:
        part.append(p)
        held += p.payload.n - 1
        if held >= size:
            yield part
            part, held = [], 0
    if part:
        yield part
