"""Sentence-window retrieval: match one sentence, return its neighbourhood.

Each sentence is embedded on its own. The window around a hit is computed at query
time from positions, so ``k``, ``before`` and ``after`` change per call with no
re-embedding. A window's size is fixed by configuration: (before + after + 1)
sentences, fewer only at the ends of a document.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from pydantic import Field, model_validator

from langchain_expand.budget import check_max_tokens, fit_to_budget
from langchain_expand.records import (
    PREFIX,
    decode_metadata,
    document_ids,
    encode_metadata,
    revision,
    unit_id,
)
from langchain_expand.sentences import SentenceSplitter, Span
from langchain_expand.tokens import TokenCounter

__all__ = ["SentenceWindowRetriever", "window_bounds"]

logger = logging.getLogger(__name__)

_PROBE = 64  # ids probed per step when looking for units left by an interrupted run


def window_bounds(hit: int, n: int, before: int, after: int) -> tuple[int, int]:
    """The ``[first, last + 1)`` sentence range of the window around ``hit``.

    Clamped at the ends of a document of ``n`` sentences.
    """
    return max(0, hit - before), min(n, hit + after + 1)


_CARRIED = ("rerank_score",)
"""Metadata a hit may gain between matching and expanding, kept on its unit."""


@dataclass(frozen=True)
class _Hit:
    doc_id: str
    index: int
    n: int
    rev: str | None  # None: take whatever version the document's head has
    score: float
    extra: dict[str, Any]


@dataclass
class _Unit:
    """A window: sentences ``[first, last)`` of one document, and the hits inside it."""

    doc_id: str
    first: int
    last: int
    n: int
    hits: list[_Hit]


@dataclass(frozen=True)
class _Plan:
    """One query's settings, and how they turn ranked hits into units."""

    k: int
    before: int
    after: int
    merge: bool
    merge_gap: int

    def units(self, hits: list[_Hit]) -> list[_Unit]:
        """One unit per hit, or, when merging, one per group of overlapping windows."""
        units: list[_Unit] = []
        for hit in hits:
            first, last = window_bounds(hit.index, hit.n, self.before, self.after)
            joined = [
                u
                for u in units
                if self.merge
                and u.doc_id == hit.doc_id
                and first <= u.last + self.merge_gap
                and u.first <= last + self.merge_gap
            ]
            if not joined:
                units.append(_Unit(hit.doc_id, first, last, hit.n, [hit]))
                continue
            keep = joined[0]  # the best-ranked unit absorbs the others
            keep.first = min([first] + [u.first for u in joined])
            keep.last = max([last] + [u.last for u in joined])
            keep.hits = sorted([*keep.hits, *(h for u in joined[1:] for h in u.hits), hit], key=lambda h: -h.score)
            units = [u for u in units if not any(u is j for j in joined[1:])]
        return units

    def first_fetch(self) -> int:
        """Hits asked of the first search; merging usually needs more than ``k``.

        Each further search embeds the query again, so asking twice as many up front is cheaper.
        """
        return 2 * self.k if self.merge else self.k

    def wants_more(self, units: list[_Unit], found: int, asked: int) -> bool:
        """Merging shrank the result below ``k`` and the store may hold more hits."""
        return len(units) < self.k and found == asked and asked < 16 * self.k


@dataclass(frozen=True)
class _Prepared:
    doc_id: str
    rev: str
    records: list[Document]


class SentenceWindowRetriever(BaseRetriever):
    """Embeds sentences, returns each hit with ``before``/``after`` sentences around it.

    Each returned ``Document`` is the window's text exactly as it stands in the source
    (``source[start_index:end_index]``), with the source's metadata plus ``doc_id``,
    ``hit`` (the matched sentence), ``hits`` (every hit inside, best first, more than one
    only when merging), ``span`` (``[first, last + 1)``), ``start_index``, ``end_index``,
    ``score`` (relevance of the best hit, higher is better), ``tokens``,
    ``n_sentences`` (of the document) and ``sentences`` (each sentence's char offsets,
    which ``FitToBudget`` uses to shrink a window from its edges).

    ``k``, ``before``, ``after``, ``expand``, ``merge``, ``filter`` and ``max_tokens`` also
    change per call, with no re-embedding: ``invoke(query, before=3, after=1, max_tokens=1500)``.

    Everything needed at query time lives in the vector store, so a new retriever over
    the same persisted store answers the same.

    Example:
        .. code-block:: python

            from langchain_core.documents import Document
            from langchain_expand import SentenceWindowRetriever, chroma_store

            store = chroma_store("demo", persist_directory=".langchain-expand/chroma")
            retriever = SentenceWindowRetriever(vectorstore=store, k=4)
            retriever.add_documents([Document("A first. A second. A third.", id="d1")])
            retriever.invoke("second", before=1, after=0)  # per-call window
    """

    vectorstore: VectorStore
    """Where sentences are embedded and stored; it must support ids and get_by_ids."""
    k: int = 4
    """The number of windows returned."""
    before: int = 2
    """Sentences included before the matched one."""
    after: int = 2
    """Sentences included after the matched one."""
    expand: bool = True
    """Return windows; False returns the matched sentences alone (match-only mode)."""
    merge: bool = False
    """Merge overlapping or adjacent windows of one document; ``k`` then counts merged units.

    Hits are read in rank order (2k at first, more while fewer than ``k`` units remain), and
    a lower-ranked hit whose window touches a unit already formed joins that unit."""
    merge_gap: int = 0
    """With ``merge``, also join windows this many sentences apart (the gap is filled in)."""
    max_tokens: int | None = None
    """Cap on the joined context of all returned windows (``"\\n\\n"`` between them), applied
    as :func:`fit_to_budget` does: the best windows first, the first that does not fit shrunk
    from its edges around its hit. For a formatter or a whole-prompt budget, pipe the
    retriever into ``FitToBudget`` instead."""
    filter: dict[str, Any] | None = None
    """A metadata filter in the vector store's own syntax, e.g. ``{"source": "a.md"}`` for Chroma."""
    splitter: Callable[[str], list[Span]] = Field(default=None)  # type: ignore[assignment]
    """Turns a text into sentence spans; a ``SentenceSplitter`` by default."""
    token_counter: Callable[[str], int] = Field(default_factory=TokenCounter)
    """Counts the ``tokens`` of each returned unit."""
    max_sentence_tokens: int | None = 2048
    """Refuse to index a sentence longer than this: the window bound would not hold."""
    batch_size: int = 4096
    """Sentences embedded and written per call to the vector store. Large on purpose:
    sentence-transformers sorts each call's texts by length before batching, so big calls
    pad less (measured: 512 ran at 0.65x the raw-encode floor, 4096+ at ~0.95x). Keep it
    under the store's own limit (Chroma: ``client.get_max_batch_size()``, about 5,000)."""

    @model_validator(mode="after")
    def _validate(self) -> SentenceWindowRetriever:
        if self.splitter is None:
            self.splitter = SentenceSplitter(token_counter=self.token_counter)
        _check_query_params(self.k, self.before, self.after)
        if self.merge_gap < 0:
            msg = f"`merge_gap` must be >= 0, got {self.merge_gap}."
            raise ValueError(msg)
        if self.batch_size < 1:
            msg = f"`batch_size` must be >= 1, got {self.batch_size}."
            raise ValueError(msg)
        check_max_tokens(self.max_tokens)
        if self.max_sentence_tokens is not None and self.max_sentence_tokens < 1:
            msg = f"`max_sentence_tokens` must be >= 1 or None, got {self.max_sentence_tokens}."
            raise ValueError(msg)
        return self

    # -- indexing -------------------------------------------------------------------

    def add_documents(self, documents: Sequence[Document], ids: Sequence[str] | None = None) -> list[str]:
        """Split, embed and store documents; re-adding an id replaces its sentences.

        Args:
            documents: The source documents.
            ids: One id per document; else ``Document.id``; else a hash of the text.

        Returns:
            The document ids, in input order.

        Raises:
            ValueError: For an empty document, duplicate ids, unusable metadata or an
                over-long sentence. Nothing is written when any document is bad.
        """
        prepared = self._prepare(documents, ids)
        heads = _fetch(self.vectorstore, [unit_id(p.doc_id, 0) for p in prepared])
        todo = _changed(prepared, heads)
        for batch, batch_ids in self._body_batches(todo):
            self.vectorstore.add_documents(batch, ids=batch_ids)
        stale = self._stale_ids(todo, heads)
        if stale:
            self.vectorstore.delete(stale)
        for batch, batch_ids in self._head_batches(todo):  # heads last: each commits its document
            self.vectorstore.add_documents(batch, ids=batch_ids)
        return [p.doc_id for p in prepared]

    async def aadd_documents(self, documents: Sequence[Document], ids: Sequence[str] | None = None) -> list[str]:
        """Async twin of :meth:`add_documents`."""
        prepared = self._prepare(documents, ids)
        heads = await _afetch(self.vectorstore, [unit_id(p.doc_id, 0) for p in prepared])
        todo = _changed(prepared, heads)
        for batch, batch_ids in self._body_batches(todo):
            await self.vectorstore.aadd_documents(batch, ids=batch_ids)
        stale = await self._astale_ids(todo, heads)
        if stale:
            await self.vectorstore.adelete(stale)
        for batch, batch_ids in self._head_batches(todo):
            await self.vectorstore.aadd_documents(batch, ids=batch_ids)
        return [p.doc_id for p in prepared]

    def delete(self, ids: Sequence[str]) -> None:
        """Remove every sentence of the documents ``ids``; unknown ids are ignored."""
        heads = _fetch(self.vectorstore, [unit_id(d, 0) for d in ids])
        known = _head_sizes(heads)
        stale = [unit_id(d, i) for d in ids for i in range(known.get(d, 0))]
        stale += self._probe(list(ids), known)
        if stale:
            self.vectorstore.delete(stale)

    async def adelete(self, ids: Sequence[str]) -> None:
        """Async twin of :meth:`delete`."""
        heads = await _afetch(self.vectorstore, [unit_id(d, 0) for d in ids])
        known = _head_sizes(heads)
        stale = [unit_id(d, i) for d in ids for i in range(known.get(d, 0))]
        stale += await self._aprobe(list(ids), known)
        if stale:
            await self.vectorstore.adelete(stale)

    def _prepare(self, documents: Sequence[Document], ids: Sequence[str] | None) -> list[_Prepared]:
        """Validate every document and build its records, before anything is written."""
        doc_ids = document_ids(documents, ids)
        return [self._records(doc, doc_id) for doc, doc_id in zip(documents, doc_ids, strict=False)]

    def _records(self, doc: Document, doc_id: str) -> _Prepared:
        text = doc.page_content
        if not isinstance(text, str) or not text.strip():
            msg = f"Document {doc_id!r} has no text to index (empty or whitespace only). Remove it or give it text."
            raise ValueError(msg)
        spans = _checked_spans(self.splitter(text), len(text), doc_id)
        if self.max_sentence_tokens is not None:
            self._check_sentence_sizes(text, spans, doc_id)
        rev = revision(text, self.splitter)
        base = encode_metadata(doc.metadata, doc_id)
        n = len(spans)
        records = []
        for i, (start, end) in enumerate(spans):
            gap_end = spans[i + 1][0] if i + 1 < n else end
            meta = {
                **base,
                PREFIX + "doc": doc_id,
                PREFIX + "i": i,
                PREFIX + "n": n,
                PREFIX + "start": start,
                PREFIX + "end": end,
                PREFIX + "gap": text[end:gap_end],
                PREFIX + "rev": rev,
            }
            records.append(Document(page_content=text[start:end], metadata=meta))
        return _Prepared(doc_id, rev, records)

    def _check_sentence_sizes(self, text: str, spans: list[Span], doc_id: str) -> None:
        limit = self.max_sentence_tokens
        assert limit is not None
        counts = _count_many(self.token_counter, [text[s:e] for s, e in spans])
        for i, count in enumerate(counts):
            if count > limit:
                msg = (
                    f"Document {doc_id!r}: sentence {i} (chars {spans[i][0]}-{spans[i][1]}) is "
                    f"{count} tokens, over `max_sentence_tokens`={limit}, so its windows would "
                    "not be bounded. Use a splitter with a cap, e.g. SentenceSplitter(max_tokens=256)."
                )
                raise ValueError(msg)

    def _body_batches(self, todo: list[_Prepared]) -> Iterable[tuple[list[Document], list[str]]]:
        """Every sentence but each document's first, in write batches."""
        return self._batches([(p.doc_id, i, r) for p in todo for i, r in enumerate(p.records) if i > 0])

    def _head_batches(self, todo: list[_Prepared]) -> Iterable[tuple[list[Document], list[str]]]:
        """Each document's first sentence, its commit marker, in write batches."""
        return self._batches([(p.doc_id, 0, p.records[0]) for p in todo])

    def _batches(self, units: list[tuple[str, int, Document]]) -> Iterable[tuple[list[Document], list[str]]]:
        for at in range(0, len(units), self.batch_size):
            chunk = units[at : at + self.batch_size]
            yield [r for _, _, r in chunk], [unit_id(d, i) for d, i, _ in chunk]

    def _stale_ids(self, todo: list[_Prepared], heads: list[Document]) -> list[str]:
        known = _head_sizes(heads)
        stale = [unit_id(p.doc_id, i) for p in todo for i in range(len(p.records), known.get(p.doc_id, 0))]
        floor = {p.doc_id: max(len(p.records), known.get(p.doc_id, 0)) for p in todo}
        return stale + self._probe(list(floor), floor)

    async def _astale_ids(self, todo: list[_Prepared], heads: list[Document]) -> list[str]:
        known = _head_sizes(heads)
        stale = [unit_id(p.doc_id, i) for p in todo for i in range(len(p.records), known.get(p.doc_id, 0))]
        floor = {p.doc_id: max(len(p.records), known.get(p.doc_id, 0)) for p in todo}
        return stale + await self._aprobe(list(floor), floor)

    def _probe(self, doc_ids: list[str], start: dict[str, int]) -> list[str]:
        """Ids past each document's known end that an interrupted run left behind."""
        found: list[str] = []
        pending = {d: start.get(d, 0) for d in doc_ids}
        while pending:
            asked = [unit_id(d, i) for d, at in pending.items() for i in range(at, at + _PROBE)]
            hits = {doc.id for doc in _fetch(self.vectorstore, asked) if doc.id}
            found += [i for i in asked if i in hits]
            pending = _still_pending(pending, hits)
        return found

    async def _aprobe(self, doc_ids: list[str], start: dict[str, int]) -> list[str]:
        found: list[str] = []
        pending = {d: start.get(d, 0) for d in doc_ids}
        while pending:
            asked = [unit_id(d, i) for d, at in pending.items() for i in range(at, at + _PROBE)]
            hits = {doc.id for doc in await _afetch(self.vectorstore, asked) if doc.id}
            found += [i for i in asked if i in hits]
            pending = _still_pending(pending, hits)
        return found

    # -- querying ---------------------------------------------------------------------

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        before: int | None = None,
        after: int | None = None,
        expand: bool | None = None,
        merge: bool | None = None,
        filter: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> list[Document]:
        check_query(query)
        check_max_tokens(max_tokens)
        plan = self._resolve(k, before, after, expand, merge)
        where = _where(filter if filter is not None else self.filter)
        fetch_k = plan.first_fetch()
        while True:
            scored = self.vectorstore.similarity_search_with_relevance_scores(query, k=fetch_k, **where)
            units = plan.units([_to_hit(doc, score) for doc, score in scored])
            if not plan.wants_more(units, len(scored), fetch_k):
                break
            fetch_k *= 2
        units = units[: plan.k]
        records = _gather(self.vectorstore, _needed_ids(units), [doc for doc, _ in scored])
        return self._budgeted(self._assemble(units, records), max_tokens)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        before: int | None = None,
        after: int | None = None,
        expand: bool | None = None,
        merge: bool | None = None,
        filter: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> list[Document]:
        check_query(query)
        check_max_tokens(max_tokens)
        plan = self._resolve(k, before, after, expand, merge)
        where = _where(filter if filter is not None else self.filter)
        fetch_k = plan.first_fetch()
        while True:
            scored = await self.vectorstore.asimilarity_search_with_relevance_scores(query, k=fetch_k, **where)
            units = plan.units([_to_hit(doc, score) for doc, score in scored])
            if not plan.wants_more(units, len(scored), fetch_k):
                break
            fetch_k *= 2
        units = units[: plan.k]
        records = await _agather(self.vectorstore, _needed_ids(units), [doc for doc, _ in scored])
        return self._budgeted(self._assemble(units, records), max_tokens)

    def expand_hits(
        self,
        hits: Sequence[Document],
        *,
        before: int | None = None,
        after: int | None = None,
        merge: bool | None = None,
        max_tokens: int | None = None,
    ) -> list[Document]:
        """Turn matched sentences (``expand=False`` results) into windows, keeping their order.

        This is the second half of rerank-then-expand: match, rerank the sentences,
        then expand. Metadata the hits gained on the way (``rerank_score``) is kept.
        ``max_tokens`` (else the instance's) bounds the joined windows, as in retrieval.
        """
        check_max_tokens(max_tokens)
        plan = self._resolve(len(hits) or 1, before, after, True, merge)
        units = plan.units([_from_match(doc) for doc in hits])
        records = _fetch(self.vectorstore, _needed_ids(units))
        return self._budgeted(self._assemble(units, records), max_tokens)

    async def aexpand_hits(
        self,
        hits: Sequence[Document],
        *,
        before: int | None = None,
        after: int | None = None,
        merge: bool | None = None,
        max_tokens: int | None = None,
    ) -> list[Document]:
        """Async twin of :meth:`expand_hits`."""
        check_max_tokens(max_tokens)
        plan = self._resolve(len(hits) or 1, before, after, True, merge)
        units = plan.units([_from_match(doc) for doc in hits])
        records = await _afetch(self.vectorstore, _needed_ids(units))
        return self._budgeted(self._assemble(units, records), max_tokens)

    def source_text(self, doc_id: str) -> str:
        """A document's text rebuilt from the store, at the offsets the units carry.

        Whitespace before the first sentence is not stored and comes back as spaces.
        Use it as ``MergeOverlaps(gap=..., source=retriever.source_text)``.
        """
        heads = _fetch(self.vectorstore, [unit_id(doc_id, 0)])
        if not heads:
            msg = f"Document {doc_id!r} is not in the store; add it first."
            raise KeyError(msg)
        n = int(heads[0].metadata[PREFIX + "n"])
        records = _fetch(self.vectorstore, [unit_id(doc_id, i) for i in range(n)])
        ordered = sorted(records, key=lambda r: int(r.metadata[PREFIX + "i"]))
        return " " * int(ordered[0].metadata[PREFIX + "start"]) + _joined(ordered)

    def _resolve(
        self, k: int | None, before: int | None, after: int | None, expand: bool | None, merge: bool | None
    ) -> _Plan:
        """This call's settings, validated; the instance's fields fill what the call leaves out."""
        plan = _Plan(
            k=self.k if k is None else k,
            before=self.before if before is None else before,
            after=self.after if after is None else after,
            merge=self.merge if merge is None else merge,
            merge_gap=self.merge_gap,
        )
        _check_query_params(plan.k, plan.before, plan.after)
        if not (self.expand if expand is None else expand):
            return _Plan(k=plan.k, before=0, after=0, merge=False, merge_gap=0)
        return plan

    def _budgeted(self, windows: list[Document], max_tokens: int | None) -> list[Document]:
        """The windows that fit this call's budget, or the instance's, if either is set."""
        limit = self.max_tokens if max_tokens is None else max_tokens
        if limit is None:
            return windows
        kept, _ = fit_to_budget(windows, limit, token_counter=self.token_counter)
        return kept

    def _assemble(self, units: list[_Unit], records: list[Document]) -> list[Document]:
        """Build each unit's text from the fetched records; skip uncommitted documents."""
        by_id = {r.id: r for r in records if r.id is not None}
        out: list[Document] = []
        for unit in units:
            head = by_id.get(unit_id(unit.doc_id, 0))
            parts = [by_id.get(unit_id(unit.doc_id, i)) for i in range(unit.first, unit.last)]
            rev = head.metadata.get(PREFIX + "rev") if head is not None else None
            present = [p for p in parts if p is not None and p.metadata.get(PREFIX + "rev") == rev]
            if rev is None or len(present) != len(parts) or any(h.rev not in (None, rev) for h in unit.hits):
                logger.warning(
                    "Skipping a hit in document %r: the store holds an incomplete or "
                    "superseded version of it (an interrupted or running add_documents). "
                    "Re-run add_documents for it.",
                    unit.doc_id,
                )
                continue
            out.append(_window(unit, present))
        texts = [d.page_content for d in out]
        for doc, tokens in zip(out, _count_many(self.token_counter, texts), strict=True):
            doc.metadata["tokens"] = tokens
        return out


def _where(metadata_filter: dict[str, Any] | None) -> dict[str, Any]:
    return {} if metadata_filter is None else {"filter": metadata_filter}


def _fetch(store: VectorStore, ids: list[str]) -> list[Document]:
    """``get_by_ids``, skipping the call when there is nothing to ask (Chroma refuses [])."""
    return store.get_by_ids(ids) if ids else []


async def _afetch(store: VectorStore, ids: list[str]) -> list[Document]:
    return await store.aget_by_ids(ids) if ids else []


def _known(ids: list[str], found: list[Document]) -> tuple[list[Document], list[str]]:
    """The records among ``ids`` the search already returned, and the ids still to fetch."""
    wanted = set(ids)
    have = {d.id: d for d in found if d.id in wanted}
    return list(have.values()), [i for i in ids if i not in have]


def _gather(store: VectorStore, ids: list[str], found: list[Document]) -> list[Document]:
    """The records ``ids`` name, fetching only those the search did not return."""
    have, missing = _known(ids, found)
    return have + _fetch(store, missing)


async def _agather(store: VectorStore, ids: list[str], found: list[Document]) -> list[Document]:
    have, missing = _known(ids, found)
    return have + await _afetch(store, missing)


def check_query(query: str) -> None:
    """An empty query matches nothing meaningfully: say so instead of returning noise.

    A very long query is accepted; the embedding model reads its beginning (MiniLM: the
    first 256 word pieces).
    """
    if not isinstance(query, str) or not query.strip():
        msg = f"The query is empty ({query!r}); pass the question text."
        raise ValueError(msg)


def _check_query_params(k: int, before: int, after: int) -> None:
    if not isinstance(k, int) or k <= 0:
        msg = f"`k` must be a positive integer, got {k!r}."
        raise ValueError(msg)
    for name, value in (("before", before), ("after", after)):
        if not isinstance(value, int) or value < 0:
            msg = f"`{name}` must be an integer >= 0, got {value!r}."
            raise ValueError(msg)


def _checked_spans(spans: list[Span], length: int, doc_id: str) -> list[Span]:
    """Reject what a custom splitter got wrong, naming the document."""
    end = 0
    for i, (s, e) in enumerate(spans):
        if not (end <= s < e <= length):
            msg = (
                f"Document {doc_id!r}: the splitter returned span {i} = ({s}, {e}), which is "
                "empty, out of order, overlapping or outside the text. A splitter must return "
                "ordered, non-overlapping (start, end) offsets into the text."
            )
            raise ValueError(msg)
        end = e
    if not spans:
        msg = f"Document {doc_id!r}: the splitter found no sentences. Check the splitter or the text."
        raise ValueError(msg)
    return spans


def _count_many(counter: Callable[[str], int], texts: list[str]) -> list[int]:
    if isinstance(counter, TokenCounter):
        return counter.count_many(texts)
    return [counter(t) for t in texts]


def _head_sizes(heads: list[Document]) -> dict[str, int]:
    return {h.metadata[PREFIX + "doc"]: int(h.metadata[PREFIX + "n"]) for h in heads if PREFIX + "doc" in h.metadata}


def _changed(prepared: list[_Prepared], heads: list[Document]) -> list[_Prepared]:
    """Documents whose stored version differs (unchanged ones are not re-embedded)."""
    stored = {
        h.metadata.get(PREFIX + "doc"): (h.metadata.get(PREFIX + "rev"), h.metadata.get(PREFIX + "n")) for h in heads
    }
    return [p for p in prepared if stored.get(p.doc_id) != (p.rev, len(p.records))]


def _still_pending(pending: dict[str, int], hits: set[str]) -> dict[str, int]:
    return {d: at + _PROBE for d, at in pending.items() if any(unit_id(d, i) in hits for i in range(at, at + _PROBE))}


def _to_hit(doc: Document, score: float) -> _Hit:
    meta = doc.metadata
    try:
        return _Hit(
            meta[PREFIX + "doc"], int(meta[PREFIX + "i"]), int(meta[PREFIX + "n"]), meta[PREFIX + "rev"], score, {}
        )
    except KeyError:
        msg = (
            f"The vector store returned a record without sentence positions ({doc.id!r}). "
            "Give SentenceWindowRetriever a collection that only it writes to."
        )
        raise ValueError(msg) from None


def _from_match(doc: Document) -> _Hit:
    """A hit rebuilt from a match-only result (or any unit with the same metadata)."""
    m = doc.metadata
    try:
        extra = {key: m[key] for key in _CARRIED if key in m}
        return _Hit(m["doc_id"], int(m["hit"]), int(m["n_sentences"]), None, float(m["score"]), extra)
    except KeyError as exc:
        msg = (
            f"expand_hits needs the metadata of a match-only result (doc_id, hit, n_sentences, "
            f"score); document {doc.id!r} lacks {exc}. Retrieve it with expand=False."
        )
        raise ValueError(msg) from None


def _needed_ids(units: list[_Unit]) -> list[str]:
    """Every id the units need, plus each document's head, for one batched fetch."""
    ids: dict[str, None] = {}
    for unit in units:
        ids[unit_id(unit.doc_id, 0)] = None
        for i in range(unit.first, unit.last):
            ids[unit_id(unit.doc_id, i)] = None
    return list(ids)


def _joined(records: list[Document]) -> str:
    """Consecutive sentence records as they stand in the source, gaps included."""
    parts = []
    for r in records[:-1]:
        parts += [r.page_content, r.metadata[PREFIX + "gap"]]
    parts.append(records[-1].page_content)
    return "".join(parts)


def _window(unit: _Unit, records: list[Document]) -> Document:
    best = unit.hits[0]
    metadata: dict[str, Any] = {
        **decode_metadata(records[0].metadata),
        **best.extra,
        "doc_id": unit.doc_id,
        "hit": best.index,
        "hits": [h.index for h in unit.hits],
        "span": [unit.first, unit.last],
        "start_index": records[0].metadata[PREFIX + "start"],
        "end_index": records[-1].metadata[PREFIX + "end"],
        "score": best.score,
        "n_sentences": unit.n,
        "sentences": [[r.metadata[PREFIX + "start"], r.metadata[PREFIX + "end"]] for r in records],
    }
    return Document(page_content=_joined(records), metadata=metadata, id=f"{unit.doc_id}::{unit.first}-{unit.last}")
