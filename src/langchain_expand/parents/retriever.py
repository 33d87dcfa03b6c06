"""Parent-document retrieval that counts parents, keeps scores and stays inside a budget.

A parent's size comes from the document's structure, a long-tailed distribution you
inherit: two large sections in one result clear any budget without either being unusual.
``BudgetedParentDocumentRetriever`` swaps in for LangChain's ``ParentDocumentRetriever``
and fixes what it lacks: ``k`` counts parents, not children; each parent keeps its score
and its matched children (ids and char offsets); ``max_parent_tokens`` and ``max_tokens``
bound what it returns; and its default docstore survives a restart.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_classic.retrievers import ParentDocumentRetriever
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import LangSmithRetrieverParams
from langchain_core.stores import BaseStore
from langchain_text_splitters import RecursiveCharacterTextSplitter, TextSplitter
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from langchain_expand import calls, rules
from langchain_expand.budget import fit_counted
from langchain_expand.calls import AsyncByThread
from langchain_expand.parents.assembly import (
    Parent,
    as_units,
    best_children,
    cap_parent,
    matched_children,
    parent_out,
    parents_of_hits,
    ranked_parents,
    servable,
)
from langchain_expand.parents.hybrid import HybridChildren, children_ranking
from langchain_expand.parents.indexing import ParentIndexing
from langchain_expand.parents.reads import CallReads, parent_units
from langchain_expand.policy import BudgetPolicy
from langchain_expand.rules import check_query
from langchain_expand.store import filters
from langchain_expand.store.adapters import StoreAdapter, adapt, collection_name
from langchain_expand.store.defaults import FromTexts
from langchain_expand.store.docstore import claim_docstore
from langchain_expand.store.indexing import DocumentIndexed
from langchain_expand.store.lexical import BaseLexicalIndex
from langchain_expand.store.search import Diversified, VectorSearch, overfetch
from langchain_expand.text.prefixes import EmbeddingPrefix, StructuralPrefix
from langchain_expand.text.sections import MarkdownSectionSplitter, SectionSplitter
from langchain_expand.text.tokens import TokenCounter
from langchain_expand.units import TOKENS

__all__ = ["BudgetedParentDocumentRetriever", "MarkdownSectionSplitter", "SectionSplitter"]

DEFAULT_K = 4
"""Parents returned when neither ``k`` nor a budget says how many."""
MMR_FETCH_K = 20
"""Children MMR chooses among at least, as LangChain's ``fetch_k`` default."""
_MAPPED_SEARCH_KWARGS = ("k", "score_threshold", "fetch_k", "lambda_mult")
"""``search_kwargs`` keys this class reads itself; the rest go to the vector store's search."""
_STOCK_FIELDS = ("k", "score_threshold")
"""Fields that ``search_kwargs`` keys of the same name set, as on the stock class."""
_CALL_ARGUMENTS = ("k", "expand", "filter", "max_tokens", "score_threshold")
"""What ``invoke`` takes besides the query."""


def _default_child_splitter() -> TextSplitter:
    return RecursiveCharacterTextSplitter(chunk_size=400, chunk_overlap=0)


_RULES: dict[str, Callable[[str, object], None]] = {
    "k": rules.check_optional_positive,
    "max_parent_tokens": rules.check_optional_positive,
    "max_tokens": rules.check_optional_positive,
    "batch_size": rules.check_positive,
}
"""Every numeric parameter's rule, for the fields and for the same arguments per call."""


class BudgetedParentDocumentRetriever(  # type: ignore[misc]
    calls.Portable,
    calls.CheckedAssignment,
    FromTexts,
    AsyncByThread,
    ParentIndexing,
    ParentDocumentRetriever,
    DocumentIndexed,
):
    """``ParentDocumentRetriever`` where ``k`` counts parents, scores stay, and size is bounded.

    Children are over-fetched until ``k`` distinct parents are found (or the store runs
    out); parents are ranked by their children's scores (``max``, ``mean`` or ``sum``).
    Each returned parent carries ``parent_id``, ``doc_id`` (the source document),
    ``score``, ``children`` (matched children, best first: ``id``, ``score``,
    ``start_index``/``end_index`` in the source and ``in_parent`` offsets into the
    stored parent), ``start_index``/``end_index`` in the source, and ``tokens``.

    ``max_parent_tokens`` turns a parent over the cap into a span of it around its
    matched children (whole sentences, tables and code blocks); ``max_tokens`` bounds the
    joined context as ``FitToBudget`` does. Both are off by default; ``k``, ``filter`` and
    ``max_tokens`` also change per call: ``invoke(query, k=4, max_tokens=8000)``.

    A drop-in for the stock class: every stock argument works with the stock meaning but
    one. ``k`` counts *parents*; the stock class counts children through
    ``search_kwargs={"k": n}``, which here sets ``k`` (so ``{"k": 2}`` gives at most 2
    parents, as the stock class gives at most 2 with distinct parents). ``search_kwargs``'
    ``score_threshold`` sets ``score_threshold``, ``fetch_k``/``lambda_mult`` shape
    ``search_type="mmr"``, and every other key (``filter``, a store's own options) goes to the
    vector store's search. ``search_type`` is ``"similarity"``, ``"similarity_score_threshold"``
    (needs a threshold) or ``"mmr"``. A ``docstore`` (or ``byte_store``) is required, as on the
    stock class: :class:`SQLDocStore` keeps parents in a SQLite file or a SQL server, so a restart
    loses nothing; there is no default, so two retrievers never share a table by accident.

    Ids are deterministic: the ids passed to ``add_documents`` name the
    *source* documents (else ``Document.id``, else a content hash); with a
    ``parent_splitter``, parent ``j`` of document ``d`` is ``"d.p{j}"``, without one the
    parent id is the document id. Re-adding an id replaces its parents and children.

    Example:
        .. code-block:: python

            from langchain_expand import (
                BudgetedParentDocumentRetriever, MarkdownSectionSplitter, SQLDocStore, chroma_store,
            )

            retriever = BudgetedParentDocumentRetriever(
                vectorstore=chroma_store("children", persist_directory=".langchain-expand/chroma"),
                docstore=SQLDocStore("sqlite:///.langchain-expand/parents.sqlite"),
                parent_splitter=MarkdownSectionSplitter(max_level=2),
                k=4,
                max_parent_tokens=1500,
                max_tokens=4000,
            )
            retriever.add_documents(docs)
            retriever.invoke("how do I reset the remote?")
    """

    docstore: BaseStore[str, Document]
    """Where parents live: a :class:`SQLDocStore` survives a restart; required, as on the stock class."""
    child_splitter: TextSplitter = Field(default_factory=_default_child_splitter)
    """Splits each parent into the children that get embedded."""
    k: int | None = None
    """The most distinct parents returned. None (the default): as many as ``max_tokens`` holds,
    best first, each capped by ``max_parent_tokens``; without a budget, 4."""
    aggregate: Literal["max", "mean", "sum"] = "max"
    """How a parent's score comes from its matched children's scores."""
    score_threshold: float | None = None
    """Ignore children whose relevance is below this."""
    max_parent_tokens: int | None = None
    """Cap on each returned parent; a parent over it becomes a span around its children."""
    max_tokens: int | None = None
    """Cap on the joined context of all returned parents (``"\\n\\n"`` between them); with
    ``expand=False``, of the matched children, each sent whole or not at all."""
    token_counter: Callable[[str], int] = Field(default_factory=TokenCounter)
    """Counts tokens for ``tokens`` and both budgets."""
    child_prefix: EmbeddingPrefix | None = Field(default_factory=StructuralPrefix)
    """What is embedded before each child, never returned: by default the heading above it, its
    table's column headings and its line's speaker label, read from the whole document
    (:class:`StructuralPrefix`, called with the children's spans); None embeds each child
    alone, as the stock class does. Changing it re-embeds a document when it is next added."""
    batch_size: int = 4096
    """Children embedded and written per call to the vector store."""
    lexical: BaseLexicalIndex | None = None
    """A BM25 ranking over the same children, fused with the dense one (each candidate by both scores):
    a question that names what a section holds (a rule's name, a part number, an error code)
    finds it word for word where the dense ranking puts paraphrases first. Parents then come in
    the fused order of their best child (``aggregate`` orders them without it). A
    :class:`~langchain_expand.store.sqlite.LexicalIndex` (a SQLite file) or a
    :class:`~langchain_expand.store.pglexical.PostgresLexicalIndex`, written by ``add_documents``
    under the same commit protocol. A ``filter`` on the documents' metadata (``doc_id`` included)
    narrows BM25 to the parents it picks; one on a child's own keys, a store's own filter
    object, or ``search_type="mmr"`` ranks by the store alone."""
    budget_policy: BudgetPolicy = Field(default_factory=BudgetPolicy)
    """How far a budget reaches: how much is gathered before the exact fit, and when gathering
    stops (:class:`~langchain_expand.policy.BudgetPolicy`; each default measured)."""

    child_context = calls.renamed_attribute("BudgetedParentDocumentRetriever", "child_context", "child_prefix")

    _vectors: StoreAdapter = PrivateAttr()
    _ahead: int = PrivateAttr(default=0)
    """Children the next query's first search asks for: as many as the last query's rounds asked (speed only)."""

    # an assigned field is checked and takes effect; help() and the schema show each field's docstring
    model_config = ConfigDict(validate_assignment=True, use_attribute_docstrings=True)

    def _coupled(self, name: str, value: Any) -> dict[str, Any]:
        """``k`` and ``score_threshold`` are one setting with their ``search_kwargs`` keys.

        Assigning ``search_kwargs`` sets them from its keys, and assigning either one updates
        its key where ``search_kwargs`` holds it, so the two never disagree; a key changed in
        place (``search_kwargs["k"] = 3``) is read at query time, as the stock class reads it.
        """
        if name == "search_kwargs" and isinstance(value, dict):
            return {key: value[key] for key in _STOCK_FIELDS if key in value}
        if name in _STOCK_FIELDS and name in self.search_kwargs:
            return {"search_kwargs": {**self.search_kwargs, name: value}}
        return {}

    @model_validator(mode="before")
    @classmethod
    def _stock_arguments(cls, values: Any) -> Any:
        """Stock arguments, checked and mapped before the fields are set.

        A docstore is required (as on the stock class); unknown arguments are errors;
        ``search_kwargs``' ``k`` and ``score_threshold`` set this class's fields.
        """
        if not isinstance(values, dict):
            return values
        values = calls.renamed(cls.__name__, values, {"child_context": "child_prefix"})
        calls.reject_unknown(cls.__name__, values, [*cls.model_fields, "callbacks"])
        if values.get("docstore") is None and values.get("byte_store") is None:
            msg = (
                f"{cls.__name__} needs a `docstore` for the parents, as ParentDocumentRetriever does. "
                "One that survives a restart, in a file of your choosing: "
                'docstore=SQLDocStore("sqlite:///parents.sqlite") (from langchain_expand import SQLDocStore).'
            )
            raise ValueError(msg)
        kwargs = dict(values.get("search_kwargs") or {})
        for key in _STOCK_FIELDS:
            if key in kwargs and values.get(key) is not None and values[key] != kwargs[key]:
                msg = f"{cls.__name__}: `{key}` is given twice, as `{key}={values[key]!r}` and in search_kwargs."
                raise ValueError(msg)
            if key in kwargs:
                values = {**values, key: kwargs[key]}
        return values

    @model_validator(mode="after")
    def _validate(self) -> BudgetedParentDocumentRetriever:
        for name, rule in _RULES.items():
            rule(name, getattr(self, name))
        rules.check_fraction("score_threshold", self.score_threshold)
        search_type = self._search_type
        if search_type not in ("similarity", "similarity_score_threshold", "mmr"):
            msg = f"`search_type` must be 'similarity', 'similarity_score_threshold' or 'mmr', got {search_type!r}."
            raise ValueError(msg)
        if search_type == "similarity_score_threshold" and self.score_threshold is None:
            msg = (
                "search_type='similarity_score_threshold' needs a threshold: "
                "search_kwargs={'score_threshold': 0.5}, or score_threshold=0.5."
            )
            raise ValueError(msg)
        lambda_mult = self.search_kwargs.get("lambda_mult", 0.5)
        rules.check_fraction("search_kwargs['lambda_mult']", lambda_mult)
        rules.check_positive("search_kwargs['fetch_k']", self.search_kwargs.get("fetch_k", MMR_FETCH_K))
        self._derive()
        return self

    def _get_ls_params(self, **kwargs: Any) -> LangSmithRetrieverParams:
        """LangSmith's retriever parameters, with the store, the embedding and this call's ``k`` and budget."""
        return calls.traced(super()._get_ls_params(**kwargs), self.vectorstore, kwargs, self)

    def _derive(self) -> None:
        """The store's adapter, built again when ``vectorstore`` is assigned, copied or unpickled."""
        self._vectors = adapt(self.vectorstore, type(self).__name__)
        claim_docstore(self.docstore, collection_name(self.vectorstore), type(self).__name__, write=False)
        if self.lexical is not None:
            self.lexical.check_units("children", type(self).__name__)

    @property
    def _search_type(self) -> str:
        """``search_type`` as text, whether given as LangChain's ``SearchType`` or as a string."""
        return str(getattr(self.search_type, "value", self.search_type))

    # -- querying ---------------------------------------------------------------------

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        expand: bool = True,
        filter: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        score_threshold: float | None = None,
        **unknown: Any,
    ) -> list[Document]:
        calls.reject_unknown(f"{type(self).__name__}.invoke", unknown, _CALL_ARGUMENTS)
        check_query(query)
        rules.check_flag("expand", expand)
        k, max_tokens = self._resolve(k=k, max_tokens=max_tokens)
        rules.check_fraction("score_threshold", score_threshold)
        floor = (
            self.search_kwargs.get("score_threshold", self.score_threshold)
            if score_threshold is None
            else score_threshold
        )
        kwargs = self._search_kwargs(filter)
        dense = VectorSearch(self._vectors, query, kwargs, ahead=self._ahead)
        search = self._search(dense, kwargs.get("filter"))
        in_order = isinstance(search, HybridChildren | Diversified)  # parents in their best child's order
        reads = CallReads(self.docstore, self.token_counter, self._head_id)
        ranked: list[Parent] = []
        stored: Sequence[Document | None] = []
        first = k or DEFAULT_K
        try:
            for scored in overfetch(search, first, first):
                ranked = ranked_parents(scored, floor, self.id_key, self.aggregate, keep_order=in_order)
                stored = reads.mget([p.parent_id for p in ranked]) if expand else []
                if k is None and not expand:  # the budget decides: enough matched children to fill it
                    assert max_tokens is not None
                    matched = best_children(ranked, self.id_key)
                    if sum(reads.count(c.page_content) for c in matched) >= max_tokens:
                        break
                    continue
                if k is None:  # the budget decides: enough parents to hold it
                    assert max_tokens is not None
                    capped = self._capped(ranked, None, stored, reads)
                    policy = self.budget_policy  # gather past the budget until the fitted parents fill it
                    if sum(d.metadata[TOKENS] for d in capped) >= policy.parents_overfill * max_tokens:
                        fitted, used = self._fit(capped, max_tokens)
                        if fitted and (used or 0) >= policy.parents_full * max_tokens:
                            return fitted
                    continue
                have = len(servable(ranked, stored, reads.heads(stored))) if expand else len(ranked)
                if have >= (k or DEFAULT_K):
                    break
        finally:
            self._ahead = dense.reached  # the next query's first search reads as far ahead as this one went
        if not expand:
            return matched_children(ranked, self.id_key, k, max_tokens, self.token_counter, reads.count)
        return self._fit(self._capped(ranked, k, stored, reads), max_tokens)[0]

    def _search(self, dense: VectorSearch, where: Any) -> Callable[[int], list[tuple[Document, float]]]:
        """The children's ranking for ``search_type`` (:func:`~langchain_expand.parents.hybrid.children_ranking`)."""
        mmr = None
        if self._search_type == "mmr":
            mmr = int(self.search_kwargs.get("fetch_k", MMR_FETCH_K)), float(self.search_kwargs.get("lambda_mult", 0.5))
        return children_ranking(dense, self.lexical, self._vectors, where, self.id_key, mmr)

    def expand_hits(self, hits: Sequence[Document], *, max_tokens: int | None = None) -> list[Document]:
        """Parents of matched children (``expand=False`` results), in the given order.

        ``max_tokens`` (else the instance's) bounds the joined parents, as in retrieval.
        """
        _, max_tokens = self._resolve(k=None, max_tokens=max_tokens)
        ranked, reads = parents_of_hits(hits), CallReads(self.docstore, self.token_counter, self._head_id)
        stored = reads.mget([p.parent_id for p in ranked])
        return self._fit(self._capped(ranked, None, stored, reads), max_tokens)[0]

    def _resolve(self, *, k: int | None, max_tokens: int | None) -> tuple[int | None, int | None]:
        """This call's ``k`` and budget: the call's, else the instance's; checked.

        ``k`` comes back None only when a budget decides how many parents there are.
        """
        k = self.search_kwargs.get("k", self.k) if k is None else k
        max_tokens = self.max_tokens if max_tokens is None else max_tokens
        _RULES["k"]("k", k)
        _RULES["max_tokens"]("max_tokens", max_tokens)
        return (DEFAULT_K if k is None and max_tokens is None else k), max_tokens

    def _search_kwargs(self, metadata_filter: dict[str, Any] | None) -> dict[str, Any]:
        """``search_kwargs`` less what this class handles itself, with the call's filter in place of theirs."""
        kwargs = {key: v for key, v in self.search_kwargs.items() if key not in _MAPPED_SEARCH_KWARGS}
        where = filters.applied(kwargs.pop("filter", None) if metadata_filter is None else metadata_filter)
        return kwargs if where is None else {**kwargs, "filter": where}

    def _fit(self, capped: list[Document], max_tokens: int | None) -> tuple[list[Document], int | None]:
        """``capped`` fitted to ``max_tokens``, parents that share text then joined (each char sent once).

        And what the fit used, before the join: a budget's rounds gather until it fills the budget.
        """
        fitted, used = fit_counted(capped, max_tokens, self.token_counter, parent_units(self.token_counter))
        return as_units(fitted, self.token_counter), used

    def _capped(
        self, ranked: list[Parent], k: int | None, stored: Sequence[Document | None], reads: CallReads
    ) -> list[Document]:
        """The first ``k`` parents present in the docstore (all, for None), each capped, with its ``tokens``."""
        pairs = servable(ranked, stored, reads.heads(stored), k, warn=True)
        out = [parent_out(parent, doc, reads.count) for parent, doc in pairs]
        if self.max_parent_tokens is not None:
            out = [cap_parent(doc, self.max_parent_tokens, self.token_counter) for doc in out]
        return out


_STOCK_DESCRIPTIONS = {
    "vectorstore": "Where the children are embedded and searched: any LangChain VectorStore that reads and "
    "deletes by id.",
    "byte_store": "A byte store for the parents, as in the stock class: used as the docstore where none is given.",
    "id_key": "The child metadata key that holds its parent's id, as in the stock class.",
    "search_kwargs": "LangChain's search arguments: `k` (distinct parents here), `filter`, `score_threshold`; "
    "others go to the store's search.",
    "search_type": "`similarity`, `mmr` or `similarity_score_threshold` (which needs a `score_threshold`).",
    "parent_splitter": "Splits each document into parents; None: each document is its own parent.",
    "child_metadata_fields": "The parent metadata keys its children keep; None keeps them all.",
}
"""What the fields taken from the stock class mean here: its own docstrings do not reach help() or the schema."""
for _name, _description in _STOCK_DESCRIPTIONS.items():
    BudgetedParentDocumentRetriever.model_fields[_name].description = _description
BudgetedParentDocumentRetriever.model_rebuild(force=True)
calls.list_fields(BudgetedParentDocumentRetriever)
