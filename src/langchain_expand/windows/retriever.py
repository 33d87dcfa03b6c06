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
from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import LangSmithRetrieverParams
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from langchain_expand import calls
from langchain_expand.calls import AsyncByThread
from langchain_expand.policy import BudgetPolicy
from langchain_expand.rules import check_query
from langchain_expand.store import filters
from langchain_expand.store.adapters import StoreAdapter, adapt
from langchain_expand.store.defaults import FromTexts
from langchain_expand.store.lexical import BaseLexicalIndex
from langchain_expand.store.search import VectorSearch
from langchain_expand.text.prefixes import EmbeddingPrefix, StructuralPrefix
from langchain_expand.text.ranges import window_bounds
from langchain_expand.text.sentences import SentenceSplitter, Span
from langchain_expand.text.tokens import TokenCounter
from langchain_expand.units import checked_units
from langchain_expand.windows import scope
from langchain_expand.windows.answer import answer, budgeted
from langchain_expand.windows.assembly import assemble, runs_of
from langchain_expand.windows.cache import SentenceCache
from langchain_expand.windows.growth import MAX_RADIUS
from langchain_expand.windows.hits import Ranking, from_match
from langchain_expand.windows.indexing import SentenceIndexing
from langchain_expand.windows.performance import Performance, from_old_names
from langchain_expand.windows.performance import old_name as performance_old_name
from langchain_expand.windows.plan import (
    RULES,
    Plan,
    check_window,
    plan_call,
)
from langchain_expand.windows.reads import Reads
from langchain_expand.windows.views import StoreViews, shared

__all__ = ["SentenceWindowRetriever", "window_bounds"]


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


class SentenceWindowRetriever(calls.Portable, calls.CheckedAssignment, FromTexts, AsyncByThread, SentenceIndexing):
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
    before: int | None = None
    """Sentences included before the matched one in a fixed window. None (the default): 2, and
    a call with a budget grows guided windows (``window``). A number, here or per call, makes
    the windows fixed unless ``window="guided"`` says otherwise."""
    after: int | None = None
    """Sentences included after the matched one in a fixed window; None (the default): 2, as ``before``."""
    expand: bool = True
    """Return windows; False returns the matched sentences alone (match-only mode)."""
    merge: bool = True
    """Merge overlapping or adjacent windows of one document, so no text is sent twice (sent
    twice, it reads as corroboration); ``k`` then counts merged units. False returns one window
    a hit, overlaps included.

    Hits are read in rank order (2k at first, more while fewer than ``k`` units hold less than twice
    what ``k`` windows would), and a lower-ranked hit whose window touches a unit formed joins it."""
    merge_gap: int = 0
    """With ``merge``, also join windows this many sentences apart (the gap is filled in); refused
    beside ``merge=False``, where it would do nothing (a call's ``merge=False`` turns it off)."""
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
    guided when the call has a budget and neither ``before`` nor ``after`` is set (here or
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
    """A BM25 ranking over the same sentences, fused with the dense one before expansion (each
    candidate of either by both scores: :func:`~langchain_expand.store.search.fuse_scores`):
    exact terms (numbers, names, codes) that dense vectors miss. A
    :class:`~langchain_expand.store.sqlite.LexicalIndex` (a SQLite file) on one machine, a
    :class:`~langchain_expand.store.pglexical.PostgresLexicalIndex` where several share a store. Written by
    ``add_documents`` under the same commit protocol; no extra embedding. Queries read neighbours
    from its local copies of the sentence records (faster than the store), at the revision of
    each document's head, or from their snapshot in memory (``performance``)."""
    score_threshold: float | None = None
    """No hit whose relevance (in [0, 1]) is below this is returned or grows a window: the
    evidence has run out, and what is left would be sent as noise. Also per call:
    ``invoke(query, max_tokens=500, score_threshold=0.4)``."""
    relative_score_threshold: float | None = None
    """No hit scoring below this fraction of the best hit's relevance is returned. Also per call."""
    filter: dict[str, Any] | None = None
    """A metadata filter in the vector store's own syntax, e.g. ``{"source": "a.md"}`` for Chroma; ``{}`` is none."""
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
    budget_policy: BudgetPolicy = Field(default_factory=BudgetPolicy)
    """How far a budget reaches: how many hits a first search asks for, how much is gathered
    before the exact fit, when guided windows grow on into room left
    (:class:`~langchain_expand.policy.BudgetPolicy`; each default measured)."""
    performance: Performance = Field(default_factory=Performance)
    """What queries hold in memory (a snapshot of the sentences, BM25, a sentence cache) and how many
    records a write sends at once: speed and memory, never the answer
    (:class:`~langchain_expand.windows.performance.Performance`)."""

    sentence_context = calls.renamed_attribute("SentenceWindowRetriever", "sentence_context", "sentence_prefix")
    snapshot_limit = performance_old_name("SentenceWindowRetriever", "snapshot_limit")
    in_memory = performance_old_name("SentenceWindowRetriever", "in_memory")
    cache_size = performance_old_name("SentenceWindowRetriever", "cache_size")
    batch_size = performance_old_name("SentenceWindowRetriever", "batch_size")

    _vectors: StoreAdapter = PrivateAttr()
    _cache: SentenceCache = PrivateAttr()
    _views: StoreViews = PrivateAttr()
    _wired: tuple[VectorStore, BaseLexicalIndex | None, int | None] | None = PrivateAttr(default=None)

    # an assigned field is checked and takes effect; help() and the schema show each field's docstring
    model_config = ConfigDict(validate_assignment=True, use_attribute_docstrings=True)

    @model_validator(mode="before")
    @classmethod
    def _known_arguments(cls, data: Any) -> Any:
        """Unknown arguments are errors; LangChain's ``search_kwargs`` maps onto the fields."""
        if not isinstance(data, dict):
            return data
        data = calls.renamed(cls.__name__, data, {"sentence_context": "sentence_prefix"})
        data = from_old_names(cls.__name__, data)
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
        if self.merge_gap and not self.merge:
            msg = (
                f"`merge_gap={self.merge_gap}` joins windows that many sentences apart when merging, and "
                "`merge=False` merges none: set merge=True, or leave merge_gap at 0."
            )
            raise ValueError(msg)
        self._wire()
        return self

    def _wire(self) -> None:
        """The store's adapter, and what queries keep from the store and the lexical index.

        Taken at construction, and again when ``vectorstore``, ``lexical`` or the snapshot's
        limit is assigned another: the sentence cache, the snapshot, BM25 in memory and the heads
        read, shared by every retriever over the same stores in this process (:func:`shared`).
        """
        wired, limit = self._wired, self.performance.limit
        if wired is not None and wired[0] is self.vectorstore and wired[1] is self.lexical and wired[2] == limit:
            return
        if wired is None or wired[0] is not self.vectorstore:
            self._vectors = adapt(self.vectorstore, type(self).__name__)
        if self.lexical is not None and (wired is None or wired[1] is not self.lexical):
            self.lexical.check_units("sentences", type(self).__name__)
        self._cache, self._views = shared(self.vectorstore, self.lexical, limit)
        self._wired = (self.vectorstore, self.lexical, limit)

    def _get_ls_params(self, **kwargs: Any) -> LangSmithRetrieverParams:
        """LangSmith's retriever parameters, with the store, the embedding and this call's ``k`` and budget."""
        return calls.traced(super()._get_ls_params(**kwargs), self.vectorstore, kwargs, self)

    def _derive(self) -> None:
        """After a copy or an unpickle: the adapter, and what queries over its stores keep (:meth:`_wire`)."""
        self._wire()

    # -- querying ---------------------------------------------------------------------

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **given: Any
    ) -> list[Document]:
        """The call's windows; ``given``: what it sets of :data:`_CALL_ARGUMENTS` (None: the field's value)."""
        calls.reject_unknown(f"{type(self).__name__}.invoke", given, _CALL_ARGUMENTS)
        check_query(query)
        where = filters.applied(self.filter if given.get("filter") is None else given["filter"])
        plan = self._plan(**{name: given.get(name) for name in _CALL_ARGUMENTS if name != "filter"})
        ranking, reads, dense = self._ranking(query, where, plan)
        found = answer(plan, ranking, dense, reads, self.token_counter)
        for _ in range(_REFILLS):  # a document being written meanwhile: answer again without it
            if not plan.skipped:
                break
            plan = dataclasses.replace(plan, excluded=plan.excluded | plan.skipped, skipped=set())
            found = answer(plan, ranking, dense, reads, self.token_counter)
        return found

    def _ranking(self, query: str, where: dict[str, Any] | None, plan: Plan) -> tuple[Ranking, Reads, VectorSearch]:
        """The query's ranking (:class:`Ranking`), the reads it and the windows share, and its dense search."""
        dense = VectorSearch(self._vectors, query, None if where is None else {"filter": where})
        guided = plan.shape == "guided"  # the ranking asks the store for ids first
        current, lexical = self._searched(where)
        settings = self.performance
        reads = Reads(self._vectors, self._cache, settings.cache_size, self.token_counter, self.lexical, current)
        ranked = None if current is None else current.bm25  # BM25 in memory, where it is current
        bm25 = None if lexical is None else ranked if ranked is not None else lexical
        return Ranking(dense, reads, bm25, self._views.beside, ids_first=guided), reads, dense

    def warm(self) -> None:
        """Build what queries hold in memory at the store's current change mark, now, in this thread.

        Otherwise the first query after a write starts that build beside the queries, which
        search the store and the lexical index until it is done. Call this where a process
        should answer its first queries from memory (a service before it takes traffic). It
        changes speed, never an answer. Nothing is built without a lexical index, with
        ``performance.in_memory`` False, or on a store that keeps no change mark.
        """
        settings = self.performance
        if self.lexical is not None and settings.limit is not None:
            self._views.warm(self._vectors, self.lexical, settings.limit, settings.cache_size)

    def clear_cache(self) -> None:
        """Forget the sentences and heads kept between queries (``cache_size``); never needed for correctness.

        They are kept for the stores, so every retriever over them in this process forgets them.
        What is built in memory at the store's mark (:meth:`warm`) stays: like the store's own
        index, it is what queries search.
        """
        self._cache.clear()
        self._views.forget_heads()

    def _searched(self, where: Any) -> scope.Scoped:
        """Besides the store, what the query searches: the views at its mark, the lexical index; narrowed by a filter.

        Without a lexical index, or for a filter only the store applies
        (:meth:`StoreAdapter.whole_documents`), the store alone, and of the views the heads read at its mark.
        """
        settings = self.performance
        lexical = self.lexical if where is None or self._vectors.whole_documents(where) else None
        current = self._views.current(self._vectors, lexical, settings.limit, settings.cache_size)
        if lexical is None or where is None:
            return scope.Scoped(current, lexical)
        return scope.narrowed(self._vectors, lexical, where, current)

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
        then expand. Windows are fixed (``before``/``after``, else the fields'), also on a
        retriever whose ``window`` is guided. Metadata the hits gained on the way (``rerank_score``) is kept.
        ``max_tokens`` (else the instance's) bounds the joined windows, as in retrieval. A hit whose
        document was rewritten since the match, its sentence moved or changed, is skipped with a warning.
        """
        shape = {"before": before, "after": after, "window": "fixed"}  # whatever the retriever's `window`
        plan = self._plan(k=len(hits) or 1, expand=True, merge=merge, max_tokens=max_tokens, **shape)
        units = plan.units([from_match(doc) for doc in checked_units(hits, "expand_hits")])
        settings = self.performance
        reads = Reads(self._vectors, self._cache, settings.cache_size, self.token_counter, self.lexical)
        return budgeted(assemble(units, runs_of(reads, units), self.token_counter), plan.max_tokens, self.token_counter)

    def _plan(self, **given: Any) -> Plan:
        """This call's settings: what the call gives, else the instance's fields; checked."""
        return plan_call(self, given, has_embeddings=self._vectors.embeddings is not None)


calls.list_fields(SentenceWindowRetriever)
