"""Sentence-window retrieval: match one sentence, return its neighbourhood, inside a budget.

Each sentence is embedded on its own (after its prefix: heading, speaker), and windows are
computed at query time from positions, so ``k``, ``before``, ``after`` and the budget change
per call with no re-embedding. With a budget (``max_tokens``) windows are *guided*: each grows
from its hit toward the neighbours most like the query until the budget is spent
(:mod:`.guided`, :mod:`.growth`). Without one, or with ``window="fixed"``, a window is
``before`` + 1 + ``after`` sentences, fewer at the ends of a document. Either way, with
``merge`` windows that overlap are joined, and windows are fitted to the budget exactly
(:mod:`langchain_expand.budget`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import LangSmithRetrieverParams
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from langchain_expand import calls
from langchain_expand.budget import fit_counted
from langchain_expand.calls import AsyncByThread, check_query
from langchain_expand.policy import BudgetPolicy
from langchain_expand.store import commit
from langchain_expand.store.adapters import StoreAdapter, adapt
from langchain_expand.store.adapters.base import matched
from langchain_expand.store.commit import Indexed, Prepared
from langchain_expand.store.defaults import FromTexts
from langchain_expand.store.indexing import DocumentIndexed
from langchain_expand.store.lexical import BaseLexicalIndex
from langchain_expand.store.records import decode_metadata, document_ids, unit_id
from langchain_expand.store.search import VectorSearch, overfetch
from langchain_expand.text.prefixes import EmbeddingPrefix, StructuralPrefix
from langchain_expand.text.ranges import window_bounds
from langchain_expand.text.sentences import SentenceSplitter, Span
from langchain_expand.text.tokens import TokenCounter, counter_key
from langchain_expand.units import (
    DOC_ID,
    HIT,
    SPAN,
    STORED_COUNT,
    STORED_DOC,
    STORED_INDEX,
    STORED_START,
)
from langchain_expand.windows import scope
from langchain_expand.windows.assembly import (
    assemble,
    by_sections,
    copy_of,
    joined_text,
    needed_ids,
    record_runs,
    runs_of,
)
from langchain_expand.windows.cache import Reads, SentenceCache
from langchain_expand.windows.growth import MAX_RADIUS, Growth, decay_for
from langchain_expand.windows.guided import Growing
from langchain_expand.windows.hits import (
    DenseSearch,
    FiguresHits,
    Hits,
    HybridSearch,
    RecordHits,
    Search,
    SnapshotHits,
    SnapshotSearch,
    from_match,
    to_hit,
)
from langchain_expand.windows.layout import SentenceLayout, prepare
from langchain_expand.windows.plan import (
    RULES,
    Plan,
    Unit,
    absorb,
    check_window,
    covers,
    hits_for,
    plan_call,
    seeds_of,
)
from langchain_expand.windows.views import Current, StoreViews

__all__ = ["SentenceWindowRetriever", "window_bounds"]

logger = logging.getLogger(__name__)
_SHORT = (
    "%d of k=%d windows: the store's index matched %d records that are no longer stored (deleted by another "
    "process; an embedded Chroma's index catches up when this process reopens it)."
)


_REFILLS = 2
"""Times a call answers again, passing over documents it found half-written (a writer at work)."""


_SEARCH_KWARGS = {"k": "k", "filter": "filter", "score_threshold": "score_threshold"}
"""LangChain's ``search_kwargs`` keys, and the field each one sets."""
_CALL_ARGUMENTS = (
    "k",
    "before",
    "after",
    "expand",
    "merge",
    "filter",
    "max_tokens",
    "window",
    "score_threshold",
    "relative_score_threshold",
)
"""What ``invoke`` takes besides the query."""


class SentenceWindowRetriever(calls.Portable, calls.CheckedAssignment, FromTexts, AsyncByThread, DocumentIndexed):
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

    Each sentence is embedded after a prefix (the heading above it, its table's column
    headings, its line's speaker label: ``sentence_prefix``), so a question that names what a
    sentence leaves implicit still finds it; what is stored and returned is the source text.

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
    """Where sentences are embedded and stored: Chroma, FAISS, Qdrant, ``InMemoryVectorStore``,
    or any store that implements ``get_by_ids`` and ``delete`` (see :mod:`langchain_expand.store.adapters`
    for how each store's scores become relevance in [0, 1])."""
    k: int | None = None
    """The most windows returned. None (the default): as many as ``max_tokens`` holds, taking
    hits in rank order until the budget is full or the relevance floor stops them; without a
    budget, 4. With a budget, ``k`` only caps."""
    before: int = 2
    """Sentences included before the matched one."""
    after: int = 2
    """Sentences included after the matched one."""
    expand: bool = True
    """Return windows; False returns the matched sentences alone (match-only mode)."""
    merge: bool = True
    """Merge overlapping or adjacent windows of one document, so no text is sent twice (sent
    twice, it reads as corroboration); ``k`` then counts merged units. False returns one window
    a hit, overlaps included.

    Hits are read in rank order (2k at first, more while fewer than ``k`` units remain), and
    a lower-ranked hit whose window touches a unit already formed joins that unit."""
    merge_gap: int = 0
    """With ``merge``, also join windows this many sentences apart (the gap is filled in)."""
    window: Literal["guided", "fixed"] | None = None
    """The windows' shape. ``"fixed"``: ``before`` and ``after`` sentences around every hit,
    the predictable shape. ``"guided"`` (needs a budget): each hit starts as its own sentence
    and the budget is spent one sentence at a time where evidence is most likely, next to a
    strong hit or similar to the query, up to ``max_radius`` each side (see
    :mod:`langchain_expand.windows.growth`); a weak hit may get its sentence alone, a table's rows
    are taken together where they fit (``splitter``), and a window does not grow up past its
    section's Markdown heading (the text above is another section) nor ends on the next
    section's (a heading comes with the sentence below it, or not at all). Where the fitted
    windows leave more than 5% of the budget free, growth goes on from them into that room.
    None (the default):
    guided when the call has a budget and neither ``before`` nor ``after`` was given (here or
    per call), fixed otherwise (guided holds more of the gold evidence in the same budget:
    ``benchmarks/README.md``)."""
    max_radius: int = MAX_RADIUS
    """Guided windows grow at most this many sentences on each side of their hit."""
    max_tokens: int | None = None
    """Cap on the joined context of all returned windows (``"\\n\\n"`` between them), applied
    as :func:`fit_to_budget` does: the best windows first, the first that does not fit shrunk
    from its edges around its hit. For a formatter or a whole-prompt budget, pipe the
    retriever into ``FitToBudget`` instead."""
    lexical: BaseLexicalIndex | None = None
    """A BM25 ranking over the same sentences, fused with the dense one (reciprocal rank fusion)
    before expansion: exact terms (numbers, names, codes) that dense vectors miss. A
    :class:`~langchain_expand.store.lexical.LexicalIndex` (a SQLite file) on one machine, a
    :class:`~langchain_expand.store.pglexical.PostgresLexicalIndex` where several share a store. Written by
    ``add_documents`` under the same commit protocol; no extra embedding. Queries read neighbours
    from its local copies of the sentence records (faster than the store), at the revision of
    each document's head, or from their snapshot in memory (``snapshot_limit``)."""
    snapshot_limit: int = 50_000
    """With a lexical index on Chroma, queries run on a snapshot of every sentence's local copy in
    memory while the copies number at most this many: an exact dense search (Chroma's HNSW is
    approximate), BM25 and every neighbour read without a store call, for about 3 KB a sentence
    with MiniLM (150 MB at the limit). The first query after a writer has finished brings it up
    to date, reading only the documents written since (:mod:`langchain_expand.windows.snapshot`).
    Past the limit, a SQLite lexical index's BM25 is still ranked in memory
    (:class:`~langchain_expand.windows.snapshot.LexicalRanking`, about 200 bytes a sentence), and
    what guided growth weighs of each sentence is held with it
    (:class:`~langchain_expand.windows.figures.Figures`: token count, marks and vector, no text;
    about 1.5 KB a sentence with MiniLM, 1.5 GB at a million), both built beside the queries
    after each write, then every document's head read ahead (up to ``cache_size``); only the
    text of the sentences sent is read. 0: no snapshot, every query takes that path.
    ``in_memory=False`` holds none of it. Costs: ``benchmarks/README.md``."""
    in_memory: bool = True
    """Hold what queries search and weigh in memory: the snapshot up to ``snapshot_limit``, BM25
    and growth's figures past it. False holds none of it, for a process that cannot spare the
    memory (about 1.7 GB a million sentences past the limit): the store and the lexical index
    answer every query, growth reads the neighbours it weighs, and only the sentence cache
    (``cache_size``) and the heads read at the store's change mark are kept. Queries cost more
    (``benchmarks/README.md``, "Query latency", "store alone")."""
    score_threshold: float | None = None
    """No hit whose relevance (in [0, 1]) is below this is returned or grows a window: the
    evidence has run out, and what is left would be sent as noise. Also per call:
    ``invoke(query, max_tokens=500, score_threshold=0.4)``."""
    relative_score_threshold: float | None = None
    """No hit scoring below this fraction of the best hit's relevance is returned. Also per call."""
    filter: dict[str, Any] | None = None
    """A metadata filter in the vector store's own syntax, e.g. ``{"source": "a.md"}`` for Chroma."""
    splitter: Callable[[str], list[Span]] = Field(default=None)  # type: ignore[assignment]
    """Turns a text into sentence spans. By default a ``SentenceSplitter`` with ``table_rows``: a
    Markdown table's column headings are one sentence and each later row another, so a question
    about one row matches that row, and guided growth takes the rows of a table together where
    they fit. Text without tables splits as it would without ``table_rows``."""
    sentence_prefix: EmbeddingPrefix | None = Field(default_factory=StructuralPrefix)
    """What is embedded before each sentence, never returned: by default its heading, its table's
    column headings and its line's speaker label (:class:`StructuralPrefix`); None embeds each
    sentence alone. Changing it re-embeds a document when it is next added."""
    token_counter: Callable[[str], int] = Field(default_factory=TokenCounter)
    """Counts the ``tokens`` of each returned unit."""
    max_sentence_tokens: int | None = 2048
    """Refuse to index a sentence longer than this: the window bound would not hold."""
    batch_size: int = 4096
    """Sentences embedded and written per call to the vector store. Large on purpose:
    sentence-transformers sorts each call's texts by length before batching, so big calls
    pad less. Keep it
    under the store's own limit (Chroma: ``client.get_max_batch_size()``, about 5,000)."""
    cache_size: int = 20_000
    """Sentence records kept in memory between queries (text, metadata, vector, token count:
    about 3.3 KB each with MiniLM's 384 dimensions, so 65 MB when full), and as many of the
    lexical index's local copies (about 2 KB each, 40 MB), so the next queries over the same
    documents read fewer from the store and from SQLite. Each is served only at the revision
    the query finds in the store for its document, so a re-added or deleted document is never
    answered from memory (see :mod:`langchain_expand.windows.cache`). 0 turns both off."""
    budget_policy: BudgetPolicy = Field(default_factory=BudgetPolicy)
    """How far a budget reaches: how many hits a first search asks for, how much is gathered
    before the exact fit, when guided windows grow on into room left
    (:class:`~langchain_expand.policy.BudgetPolicy`; each default measured)."""

    sentence_context = calls.renamed_attribute("SentenceWindowRetriever", "sentence_context", "sentence_prefix")

    _vectors: StoreAdapter = PrivateAttr()
    _cache: SentenceCache = PrivateAttr(default_factory=SentenceCache)
    _views: StoreViews = PrivateAttr(default_factory=StoreViews)
    _wired: tuple[VectorStore, BaseLexicalIndex | None] | None = PrivateAttr(default=None)

    # an assigned field is checked and takes effect; help() and the schema show each field's docstring
    model_config = ConfigDict(validate_assignment=True, use_attribute_docstrings=True)

    @model_validator(mode="before")
    @classmethod
    def _known_arguments(cls, data: Any) -> Any:
        """Unknown arguments are errors; LangChain's ``search_kwargs`` maps onto the fields."""
        if not isinstance(data, dict):
            return data
        data = calls.renamed(cls.__name__, data, {"sentence_context": "sentence_prefix"})
        data = calls.from_search_kwargs(cls.__name__, data, _SEARCH_KWARGS)
        calls.reject_unknown(cls.__name__, data, [*cls.model_fields, "callbacks"])
        return data

    @model_validator(mode="after")
    def _validate(self) -> SentenceWindowRetriever:
        if self.splitter is None:  # set in place: an assignment here would validate again
            self.__dict__["splitter"] = SentenceSplitter(token_counter=self.token_counter, table_rows=True)
        for name, rule in RULES.items():
            rule(name, getattr(self, name))
        check_window(self.window)
        self._wire()
        return self

    def _wire(self) -> None:
        """The store's adapter, and what queries keep from the store and the lexical index.

        Built at construction and again when ``vectorstore`` or ``lexical`` is assigned
        another: the sentence cache, the snapshot, BM25 in memory and the heads read are
        dropped with the store they came from.
        """
        wired = self._wired
        if wired is not None and wired[0] is self.vectorstore and wired[1] is self.lexical:
            return
        self._vectors = adapt(self.vectorstore, type(self).__name__)
        if wired is not None:
            self._cache = SentenceCache()
            self._views = StoreViews()
        self._wired = (self.vectorstore, self.lexical)

    def _get_ls_params(self, **kwargs: Any) -> LangSmithRetrieverParams:
        """LangSmith's retriever parameters, with the store, the embedding and this call's ``k`` and budget."""
        return calls.traced(super()._get_ls_params(**kwargs), self.vectorstore, kwargs, self)

    def _derive(self) -> None:
        """After a copy or an unpickle: the adapter and empty caches over the same stores."""
        self._wire()

    # -- indexing -------------------------------------------------------------------

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
        *,
        persist_directory: str | Path,
        embeddings: Embeddings | None = None,
        ids: Sequence[str] | None = None,
        **fields: Any,
    ) -> SentenceWindowRetriever:
        """A retriever on the embedded defaults in ``persist_directory``, with ``documents`` added.

        The setup the benchmarks measure: the bundled MiniLM model (unless ``embeddings``), a
        Chroma collection ``sentences`` in ``persist_directory/chroma`` and, unless ``lexical``
        is given (None for dense only), BM25 in ``persist_directory/lexical.sqlite``: the
        command line's layout, so ``persist_directory=".langchain-expand"`` opens its index.
        Called again on the same folder it opens the same index, and documents already there
        unchanged are not embedded again. ``fields`` are the retriever's own (``max_tokens``, ...).
        """
        from langchain_expand.store.defaults import chroma_store, refuse_own_fields
        from langchain_expand.store.lexical import LexicalIndex

        refuse_own_fields(cls.__name__, fields, ["vectorstore"])
        folder = Path(persist_directory)
        if "lexical" not in fields:
            fields["lexical"] = LexicalIndex(folder / "lexical.sqlite")
        store = chroma_store("sentences", persist_directory=folder / "chroma", embeddings=embeddings)
        retriever = cls(vectorstore=store, **fields)
        retriever.add_documents(documents, ids)
        return retriever

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
        return self.index_documents(documents, ids).ids

    def index_documents(self, documents: Sequence[Document], ids: Sequence[str] | None = None) -> Indexed:
        """:meth:`add_documents`, saying which documents were written and which were unchanged."""
        doc_ids = document_ids(documents, ids)
        prepared = [self._prepare(doc, doc_id) for doc, doc_id in zip(documents, doc_ids, strict=True)]
        layout = self._layout()
        writer = self._vectors.begin()  # readers trust nothing they hold until the mark below
        try:
            done = commit.index(layout, prepared)
            if self.lexical is not None:
                # Copies at another revision than the head's: written before the lexical index (or
                # its copies) existed, or by an update killed between the index's write and the head's
                # (a one-sentence version has no body to write first) and then reverted.
                held = self.lexical.revisions([p.doc_id for p in prepared])
                self.lexical.replace(layout.local_rows([p for p in prepared if held.get(p.doc_id) != {p.payload.rev}]))
        finally:
            self._vectors.mark(writer)  # finished, or stopped: readers' snapshots of the store are out of date
        return done

    def embedded_units(self, document: Document) -> int:
        """How many sentences indexing ``document`` embeds: what a progress bar counts."""
        return len(self.splitter(document.page_content))

    def _delete_documents(self, ids: list[str]) -> list[str]:
        """Remove every sentence of the documents ``ids`` (:meth:`delete`); those that had any."""
        writer = self._vectors.begin()
        try:
            deleted = commit.delete(self._layout(), ids)
            if self.lexical is not None:
                self.lexical.delete(ids)
        finally:
            self._vectors.mark(writer)
        return deleted

    def _layout(self) -> SentenceLayout:
        return SentenceLayout(self._vectors, self.batch_size, self.lexical, counter_key(self.token_counter))

    def _prepare(self, doc: Document, doc_id: str) -> Prepared:
        """Validate one document and build its records, before anything is written."""
        if self.lexical is not None:
            self.lexical.check_text(doc.page_content, doc_id)
        return prepare(
            doc,
            doc_id,
            splitter=self.splitter,
            token_counter=self.token_counter,
            sentence_prefix=self.sentence_prefix,
            max_sentence_tokens=self.max_sentence_tokens,
            keep_counts=self.lexical is not None and counter_key(self.token_counter) is not None,
            check_metadata=self._vectors.check_metadata,
        )

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
        window: Literal["guided", "fixed"] | None = None,
        score_threshold: float | None = None,
        relative_score_threshold: float | None = None,
        **unknown: Any,
    ) -> list[Document]:
        calls.reject_unknown(f"{type(self).__name__}.invoke", unknown, _CALL_ARGUMENTS)
        check_query(query)
        plan = self._plan(
            k=k,
            before=before,
            after=after,
            expand=expand,
            merge=merge,
            max_tokens=max_tokens,
            window=window,
            score_threshold=score_threshold,
            relative_score_threshold=relative_score_threshold,
        )
        where = filter if filter is not None else self.filter
        dense = VectorSearch(self._vectors, query, None if where is None else {"filter": where})
        ahead = plan.shape == "guided"  # DenseSearch asks for ids first
        current, lexical, rows = self._searched(where, dense, plan.first_fetch(), ahead)
        held, ranked, marked, figures = (None, None, None, None) if current is None else current
        reads = Reads(
            self._vectors, self._cache, self.cache_size, self.token_counter, self.lexical, held, marked, figures
        )
        reads.within = rows
        stored = DenseSearch(dense, reads, ids_first=ahead)
        search: Search = stored
        seeds: Hits | None = None
        if held is not None and ranked is not None:
            search = HybridSearch(SnapshotSearch(dense, reads), dense, ranked, reads, self._views.beside)
            seeds = SnapshotHits(dense, ranked, reads)
        elif lexical is not None:  # past the snapshot's limit, BM25 in memory where it is current
            search = HybridSearch(stored, dense, lexical if ranked is None else ranked, reads, self._views.beside)
            if ranked is not None and figures is not None and ahead:  # guided
                seeds = FiguresHits(dense, ranked, reads, RecordHits(search, reads))
        found = self._answer(plan, search, dense, reads, seeds)
        for _ in range(_REFILLS):  # a document being written meanwhile: answer again without it
            if not plan.skipped:
                break
            plan = dataclasses.replace(plan, excluded=plan.excluded | plan.skipped, skipped=set())
            found = self._answer(plan, search, dense, reads, seeds)
        return found

    def clear_cache(self) -> None:
        """Forget the sentence records and heads kept between queries (``cache_size``); never needed for correctness.

        The snapshot (``snapshot_limit``) stays: like the store's own index, it is what queries search.
        """
        self._cache.clear()
        self._views.forget_heads()

    def _searched(self, where: Any, dense: VectorSearch, k: int, ahead: bool) -> scope.Scoped:
        """Besides the store, what the query searches: the views at its mark, the lexical index; narrowed by a filter.

        Nothing besides the store without a lexical index, or for a filter only the store applies
        (:meth:`StoreAdapter.whole_documents`).
        """
        if self.lexical is None or (where is not None and not self._vectors.whole_documents(where)):
            return scope.Scoped(None, None, None)
        current = self._current_snapshot(self.lexical, dense, k, ahead, whole=where is None)
        if where is None:
            return scope.Scoped(current, self.lexical, None)
        return scope.narrowed(self._vectors, self.lexical, where, current, dense.query, k)

    def _current_snapshot(
        self, lexical: BaseLexicalIndex, dense: VectorSearch, k: int, ids_ahead: bool = False, *, whole: bool = True
    ) -> Current | None:
        """What queries keep of the store, at its current mark (:meth:`StoreViews.current`); ``whole``: unfiltered."""
        limit = self.snapshot_limit if self.in_memory else None
        return self._views.current(
            self._vectors, lexical, dense, k, limit, self.cache_size, ids_ahead=ids_ahead, searches_ahead=whole
        )

    def _answer(
        self, plan: Plan, search: Search, dense: VectorSearch, reads: Reads, seeds: Hits | None = None
    ) -> list[Document]:
        """The call's windows by its plan: guided (from ``seeds``, else ``search``'s), budget-driven or ``k`` fixed."""
        if plan.shape == "guided":
            return self._grown(RecordHits(search, reads) if seeds is None else seeds, dense, plan, reads)
        if plan.budget_decides:
            return self._budgeted(self._fill(search, plan, reads), plan.max_tokens)
        assert plan.k is not None
        units: list[Unit] = []
        dropped = 0
        for scored in overfetch(search, plan.first_fetch(), plan.k):
            hits = [to_hit(doc, score) for doc, score in scored]
            units = plan.units(plan.taken(hits))
            dropped = matched(scored) - len(scored)
            if len(units) >= plan.k:
                break
        if len(units) < plan.k and dropped:
            logger.warning(_SHORT, len(units), plan.k, dropped)
        units = units[: plan.k]
        records = reads.records(needed_ids(units))  # the hits among them from the search, unread
        return self._budgeted(assemble(units, record_runs(records), self.token_counter, plan.skipped), plan.max_tokens)

    def _fill(self, search: Search, plan: Plan, reads: Reads) -> list[Document]:
        """Windows of the best hits, as many as it takes to hold the budget.

        Hits are taken in rank order: the shortest prefix of the ranking whose windows reach
        the policy's ``fixed_target`` (by the sentences' own token counts). The search goes further while
        even all its hits fall short, until the relevance floor cuts the ranking (the evidence
        ran out) or the store has no more. Records fetched in one round are reused in the
        next; the caller fits the windows to the budget exactly.
        """
        budget = plan.max_tokens
        assert budget is not None
        records: dict[str, Document] = {}
        sizes: dict[str, int] = {}
        units: list[Unit] = []
        first = plan.first_fetch()
        for scored in overfetch(search, first, first):
            hits = [to_hit(doc, score) for doc, score in scored]
            taken = plan.taken(hits)
            records.update((d.id, d) for d, _ in scored if d.id is not None)
            wanted = needed_ids(plan.units(taken))
            missing = [i for i in wanted if i not in records]
            records.update((d.id, d) for d in reads.records(missing) if d.id is not None)
            fresh = [i for i in wanted if i in records and i not in sizes]
            sizes.update(zip(fresh, reads.tokens([records[i] for i in fresh]), strict=True))
            needed = hits_for(plan.policy.fixed_target(budget), taken, plan, sizes)
            units = plan.units(taken[:needed])
            if len(taken) < len(hits) or needed < len(taken):
                break
        return assemble(units, record_runs(records.values()), self.token_counter, plan.skipped)

    def _grown(self, search: Hits, dense: VectorSearch, plan: Plan, reads: Reads) -> list[Document]:
        """Windows grown from the best hits toward the evidence, fitted to the budget.

        Hits are searched as in :meth:`_fill`; a hit's own relevance is its score in the ranking.
        Growth gathers the policy's ``guided_target`` (:class:`Growing`) and the windows are
        fitted to the budget exactly. Where that leaves more than ``1 - top_up`` of it free
        (a hit or a window's last sentences too big for the room left: long table rows), growth
        goes on from the windows kept into the room left, and the result is kept if it holds
        more and all they held.
        """
        budget = plan.max_tokens
        assert budget is not None
        vector = dense.vector()
        assert vector is not None  # _shape chose "fixed" for a store without embeddings
        target = plan.policy.guided_target(budget)
        growing = Growing(reads, vector, plan, decay_for(target))

        def fitted(growth: Growth) -> tuple[list[Document], int]:
            units = plan.joined([(by_seed[r.seed], r.first, r.last) for r in growth.regions])
            absorb(units, hits)
            kept, used = fit_counted(
                assemble(units, runs_of(reads, units), self.token_counter, plan.skipped), budget, self.token_counter
            )
            kept, cut = by_sections(kept, self.token_counter)
            if cut:  # counted again: a cut is smaller, and the count says so exactly
                kept, used = fit_counted(kept, budget, self.token_counter)
            return kept, used or 0

        first = plan.first_fetch()
        for found in overfetch(search, first, first):
            above = plan.taken(found)
            hits = growing.seeded(above, search.tokens(above), budget)
            by_seed = seeds_of(hits)
            seeds = list(by_seed)
            growth = growing.rounds(seeds, target, heads=[h.doc_id for h in hits])
            if not growth.exhausted or len(above) < len(found):
                break
        windows, used = fitted(growth)
        if used < plan.policy.top_up * budget and not plan.skipped:
            numbers = {(s.doc_id, s.index): n for n, s in enumerate(seeds)}
            taken = {numbers[w.metadata[DOC_ID], w.metadata[HIT]]: tuple(w.metadata[SPAN]) for w in windows}
            more, more_used = fitted(growing.rounds(seeds, budget, taken=taken, spent=used))
            if more_used > used and covers(more, windows):
                return more
        return windows

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
        plan = self._plan(k=len(hits) or 1, before=before, after=after, expand=True, merge=merge, max_tokens=max_tokens)
        units = plan.units([from_match(doc) for doc in hits])
        records = self._vectors.get_by_ids(needed_ids(units))
        return self._budgeted(assemble(units, record_runs(records), self.token_counter), plan.max_tokens)

    def source_text(self, doc_id: str) -> str:
        """A document's text rebuilt from the store, at the offsets the units carry.

        Whitespace before the first sentence is not stored and comes back as spaces.
        Use it as ``MergeOverlaps(gap=..., source=retriever.source_text)``.
        """
        heads = self._vectors.get_by_ids([unit_id(doc_id, 0)])
        if not heads:
            msg = f"Document {doc_id!r} is not in the store; add it first."
            raise KeyError(msg)
        return self._text_of(doc_id, heads[0])

    def _text_of(self, doc_id: str, head: Document) -> str:
        n = int(head.metadata[STORED_COUNT])
        records = self._vectors.get_by_ids([unit_id(doc_id, i) for i in range(n)])
        ordered = sorted(records, key=lambda r: int(r.metadata[STORED_INDEX]))
        return " " * int(ordered[0].metadata[STORED_START]) + joined_text([copy_of(r) for r in ordered])

    def _stored_documents(self, ids: list[str]) -> list[Document]:
        """Each stored document of ``ids`` (:meth:`get`): its text as :meth:`source_text` rebuilds it, its metadata."""
        ids = list(dict.fromkeys(ids))
        heads = {h.metadata.get(STORED_DOC): h for h in self._vectors.get_by_ids([unit_id(d, 0) for d in ids])}
        return [
            Document(self._text_of(d, heads[d]), metadata=decode_metadata(heads[d].metadata), id=d)
            for d in ids
            if d in heads
        ]

    def _plan(self, **given: Any) -> Plan:
        """This call's settings: what the call gives, else the instance's fields; checked."""
        return plan_call(self, given, has_embeddings=self._vectors.embeddings is not None)

    def _budgeted(self, windows: list[Document], max_tokens: int | None) -> list[Document]:
        """The windows that fit the budget, if there is one (their counts are ``assemble``'s, exact)."""
        return fit_counted(windows, max_tokens, self.token_counter)[0]


calls.list_fields(SentenceWindowRetriever)
