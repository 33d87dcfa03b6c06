"""Rerank the matched units, then expand them: never the other way round.

The ordering rule: a reranker must score what the retriever matched, the sentence
(or the parent retriever's child chunk), not the window or parent built around it. A
cross-encoder that scores a five-sentence window is scoring four sentences the
retriever never matched, and a distinctive one-sentence match can be scored down to
nothing by its neighbours. So the pipeline is: match (``expand=False``), rerank the
matches, then expand the best into windows or parents, ``k`` as the retriever counts them: two
matches whose windows merge are one window, and the next match takes the place left.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
from langchain_core.callbacks import CallbackManagerForRetrieverRun, Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from pydantic import ConfigDict, model_validator

from langchain_expand import calls
from langchain_expand.calls import AsyncQueryByThread, reject_unknown
from langchain_expand.policy import BudgetPolicy
from langchain_expand.rules import check_positive
from langchain_expand.units import BUDGET, DOC_ID, RELEVANCE_SCORE, RERANK_SCORE

__all__ = ["EmbeddingsReranker", "Expandable", "RerankThenExpand", "expand_to", "rerank", "rerank_then_expand_chain"]


@runtime_checkable
class Expandable(Protocol):
    """A retriever that can return matches alone and expand them afterwards.

    Its ``max_tokens`` (None: no budget) is the budget a call that names none expands into,
    and its ``budget_policy`` says how many reranked matches that budget takes.
    """

    max_tokens: int | None
    budget_policy: BudgetPolicy

    def invoke(self, input: str, config: Any = None, **kwargs: Any) -> list[Document]:
        """Retrieve; called with ``k=``, ``expand=False`` and an unbounded ``max_tokens`` for matches alone."""
        ...

    def expand_hits(self, hits: Sequence[Document], **kwargs: Any) -> list[Document]:
        """Expand matches (in the given order) into their bigger units; ``max_tokens`` bounds them."""
        ...

    async def aexpand_hits(self, hits: Sequence[Document], **kwargs: Any) -> list[Document]:
        """Async twin of ``expand_hits``."""
        ...


def rerank(
    reranker: BaseDocumentCompressor,
    hits: Sequence[Document],
    query: str,
    k: int | None = None,
    callbacks: Callbacks = None,
    *,
    top_n: int | None = None,
) -> list[Document]:
    """Rerank matches, keep the best ``k``, and record ``rerank_score`` on copies of them.

    LangChain's ``CrossEncoderReranker`` drops its scores, so for it the cross-encoder
    is called directly (the same scoring and sort); other compressors are asked to
    ``compress_documents`` and their ``relevance_score`` metadata, where they set one,
    becomes ``rerank_score``. ``top_n`` is the old name of ``k`` (deprecated). A compressor
    that hands a match back changed (its text rewritten, its metadata stripped) is an error:
    a match is expanded by its place in its document.
    """
    k = _k_of("rerank", k, top_n)
    scored = _cross_encoder_scores(reranker, hits, query)
    if scored is None:
        kept = list(reranker.compress_documents(hits, query, callbacks=callbacks))
        _check_unchanged(reranker, hits, kept)
        scored = [(d, d.metadata.get(RELEVANCE_SCORE)) for d in kept]
    out = []
    for doc, score in scored[:k]:
        metadata = {**doc.metadata}
        if score is not None:
            metadata[RERANK_SCORE] = float(score)
        out.append(Document(page_content=doc.page_content, metadata=metadata, id=doc.id))
    return out


def _every_reranked(
    reranker: BaseDocumentCompressor, hits: Sequence[Document], query: str, callbacks: Callbacks = None
) -> list[Document]:
    """Every match, reranked (:func:`rerank`, ``k`` their number): :func:`expand_to` takes what ``k`` units need."""
    return rerank(reranker, hits, query, max(len(hits), 1), callbacks=callbacks)


def _check_unchanged(reranker: BaseDocumentCompressor, hits: Sequence[Document], kept: Sequence[Document]) -> None:
    """Refuse what ``reranker`` kept unless each is one of the ``hits``: the same text, of the same document."""
    given = {(d.page_content, d.metadata.get(DOC_ID)) for d in hits}
    for doc in kept:
        if (doc.page_content, doc.metadata.get(DOC_ID)) not in given:
            msg = (
                f"{type(reranker).__name__} handed back a match changed (document {doc.metadata.get(DOC_ID)!r}: "
                f"{doc.page_content[:60]!r}): its text rewritten or its metadata stripped, so it cannot be expanded. "
                "Give RerankThenExpand a reranker that scores and orders the matches (CrossEncoderReranker, "
                "EmbeddingsReranker, a Cohere or FlashRank reranker); one that rewrites them (LLMChainExtractor) "
                "goes after the expansion."
            )
            raise ValueError(msg)


def _cross_encoder_scores(
    reranker: BaseDocumentCompressor, hits: Sequence[Document], query: str
) -> list[tuple[Document, float | None]] | None:
    from langchain_classic.retrievers.document_compressors import CrossEncoderReranker

    if not isinstance(reranker, CrossEncoderReranker) or not hits:
        return None
    scores = reranker.model.score([(query, doc.page_content) for doc in hits])
    order = sorted(range(len(hits)), key=lambda i: -float(scores[i]))
    return [(hits[i], float(scores[i])) for i in order]


def _k_of(owner: str, k: int | None, top_n: int | None) -> int:
    """The count of matches kept, given as ``k`` or under its old name ``top_n`` (with a warning)."""
    if top_n is not None:
        calls.deprecated(f"{owner}(top_n=...) is now k=...; the old name will be removed.")
        if k is not None and k != top_n:
            msg = f"{owner}: `top_n` is the old name of `k`; pass `k` alone (got k={k}, top_n={top_n})."
            raise ValueError(msg)
        k = top_n
    if k is None:
        msg = f"{owner} needs `k`, the number of matches to keep."
        raise TypeError(msg)
    check_positive("k", k)
    return k


class RerankThenExpand(AsyncQueryByThread, BaseRetriever):
    """Match small units, rerank them, expand the best: a drop-in ``BaseRetriever``.

    The reranker sees only the matched sentences (or child chunks); expansion to
    windows (or parents) happens after. Each result keeps ``score`` (retrieval) and
    ``rerank_score``.

    Per call: ``k``, ``fetch_k`` and ``filter`` for matching and reranking;
    ``before``, ``after``, ``merge`` (windows) and ``max_tokens`` (both) for the expansion,
    e.g. ``invoke(q, k=2, before=3, after=0, max_tokens=300)``.

    Example:
        .. code-block:: python

            from langchain_expand import EmbeddingsReranker, RerankThenExpand

            pipeline = RerankThenExpand(
                retriever=window_retriever,  # a SentenceWindowRetriever
                reranker=EmbeddingsReranker(embeddings=my_embeddings),  # or CrossEncoderReranker
                fetch_k=20,
                k=4,
            )
            pipeline.invoke("what did they decide about the budget?")
    """

    model_config = ConfigDict(use_attribute_docstrings=True)  # help() and the schema show each field's docstring

    retriever: Any
    """The retriever: ``SentenceWindowRetriever`` or ``BudgetedParentDocumentRetriever``."""
    reranker: BaseDocumentCompressor
    """Scores the matches, e.g. LangChain's ``CrossEncoderReranker``."""
    fetch_k: int = 20
    """Matches retrieved for the reranker to score."""
    k: int | None = None
    """Units returned, counted as the retriever's ``k`` counts them: merged windows, the next
    reranked matches taking the place of those merged; parents (:func:`expand_to`). None (the
    default): as the retriever's ``budget_policy`` says: with a budget (``max_tokens``, per call
    or the retriever's) every match, in reranked order, as far as the budget holds them; without
    one, 4."""

    top_n = calls.renamed_attribute("RerankThenExpand", "top_n", "k")

    @model_validator(mode="before")
    @classmethod
    def _known_arguments(cls, data: Any) -> Any:
        """A typo (``top_k=5``) is an error naming the closest valid argument."""
        if isinstance(data, dict):
            data = calls.renamed(cls.__name__, data, {"top_n": "k"})
            reject_unknown(cls.__name__, data, [*cls.model_fields, "callbacks"])
        return data

    def model_post_init(self, context: Any, /) -> None:
        """Validate the collaborators and the counts."""
        if not isinstance(self.retriever, Expandable):
            msg = (
                f"`retriever` must match first and expand after (have `expand_hits`), got "
                f"{type(self.retriever).__name__}. Use SentenceWindowRetriever or BudgetedParentDocumentRetriever."
            )
            raise ValueError(msg)
        if self.k is not None and (self.k < 1 or self.fetch_k < self.k):
            msg = f"Need 1 <= `k` <= `fetch_k`, got k={self.k}, fetch_k={self.fetch_k}."
            raise ValueError(msg)

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        top_n: int | None = None,
        fetch_k: int | None = None,
        filter: dict[str, Any] | None = None,
        before: int | None = None,
        after: int | None = None,
        merge: bool | None = None,
        max_tokens: int | None = None,
        **unknown: Any,
    ) -> list[Document]:
        reject_unknown(
            f"{type(self).__name__}.invoke",
            unknown,
            ("k", "top_n", "fetch_k", "filter", "before", "after", "merge", "max_tokens"),
        )
        fetch = self.fetch_k if fetch_k is None else fetch_k
        check_positive("fetch_k", fetch)
        if k is None and top_n is None:
            k = self.k
        if k is None and top_n is None:
            budget = max_tokens if max_tokens is not None else self.retriever.max_tokens
            k = self.retriever.budget_policy.kept_after_rerank(fetch, budget)
        keep = _k_of(f"{type(self).__name__}.invoke", k, top_n)
        if keep > fetch:
            msg = f"Need 1 <= `k` <= `fetch_k`, got k={keep}, fetch_k={fetch}: the reranker keeps k of fetch_k matches."
            raise ValueError(msg)
        given = {"before": before, "after": after, "merge": merge, "max_tokens": max_tokens}
        shape = _expansion(self.retriever, {n: v for n, v in given.items() if v is not None})
        hits = _matches(self.retriever, query, fetch, filter, callbacks=run_manager.get_child())
        ranked = _every_reranked(self.reranker, hits, query, callbacks=run_manager.get_child())
        return expand_to(self.retriever, ranked, keep, **shape)


def expand_to(retriever: Expandable, ranked: Sequence[Document], k: int, **shape: Any) -> list[Document]:
    """The first ``ranked`` matches expanded, ``k`` of them, as the retriever's own ``k`` counts.

    Where the retriever merges windows (``merge``, per call or its field), ``k`` counts merged
    windows, as the window retriever's does: matches whose windows merge make one unit, and the
    next ones are expanded in their place, each round as many as units are missing, until ``k``
    units, the matches run out, or a budget (``max_tokens``) is full (it dropped a unit).
    Otherwise ``k`` counts matches: a parents retriever's ``k`` counts parents, and those that
    share text are sent as one unit, so at most ``k`` parents' text is sent.
    """
    taken = min(k, len(ranked))
    merging = bool(shape.get("merge", getattr(retriever, "merge", False)))
    while True:
        units: list[Document] = retriever.expand_hits(ranked[:taken], **shape)
        full = bool(units) and bool(units[0].metadata.get(BUDGET, {}).get("dropped"))  # every unit holds the report
        if not merging or len(units) >= k or taken >= len(ranked) or full:
            return units
        taken += k - len(units)


_UNBOUNDED = 2**62
"""The budget a matching call is given: none a retriever would cut its matches to (``None`` means its own)."""


def _matches(
    retriever: Expandable, query: str, k: int, where: dict[str, Any] | None = None, callbacks: Callbacks = None
) -> list[Document]:
    """The retriever's ``k`` best matches alone, for a reranker: all ``k``, whatever the retriever's budget.

    A budget bounds what is expanded, after reranking; a match-only call under the retriever's
    ``max_tokens`` would keep only the matches that fit it, and the reranker would choose among those.
    """
    config = {"callbacks": callbacks}
    return retriever.invoke(query, config, k=k, expand=False, max_tokens=_UNBOUNDED, **_where(where))


def _expansion(retriever: Expandable, given: dict[str, Any]) -> dict[str, Any]:
    """``given``, refused before anything is searched where the retriever's ``expand_hits`` does not take them.

    ``before``, ``after`` and ``merge`` shape sentence windows; a parents retriever takes ``max_tokens`` alone.
    """
    taken = inspect.signature(retriever.expand_hits).parameters
    refused = [name for name in given if name not in taken]
    if refused and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in taken.values()):
        names = ", ".join(f"`{name}`" for name in refused)
        them = "it" if len(refused) == 1 else "them"
        msg = f"{type(retriever).__name__} does not take {names}, which shape sentence windows: leave {them} out."
        raise ValueError(msg)
    return given


def _where(metadata_filter: dict[str, Any] | None) -> dict[str, Any]:
    return {} if metadata_filter is None else {"filter": metadata_filter}


def rerank_then_expand_chain(
    retriever: Any,
    reranker: BaseDocumentCompressor,
    *,
    fetch_k: int = 20,
    k: int | None = None,
    top_n: int | None = None,
) -> Runnable[str, list[Document]]:
    """The same pipeline as an explicit LCEL chain: hits, then rerank, then expand.

    ``question -> {"query", "matches"} -> reranked hits -> expanded units``; each step is
    its own runnable, visible in traces, and any can be swapped. The reranked matches are
    expanded into ``k`` units (4 by default; ``top_n`` is its old name, deprecated): :func:`expand_to`.
    """
    k = 4 if k is None and top_n is None else _k_of("rerank_then_expand_chain", k, top_n)
    matched: RunnableLambda[str, list[Document]] = RunnableLambda(
        lambda q: _matches(retriever, q, fetch_k), name="match"
    )
    reranked: RunnableLambda[dict[str, Any], list[Document]] = RunnableLambda(
        lambda x: _every_reranked(reranker, x["matches"], x["query"]), name="rerank"
    )
    expanded: RunnableLambda[list[Document], list[Document]] = RunnableLambda(
        lambda ranked: expand_to(retriever, ranked, k), name="expand"
    )
    chain: Runnable[str, list[Document]] = {"query": RunnablePassthrough(), "matches": matched} | reranked | expanded
    return chain


class EmbeddingsReranker(BaseDocumentCompressor):
    """Reranks by cosine similarity between the query and each text: an offline scorer.

    A stand-in for a cross-encoder where none can be loaded; it reads the text it is
    given, so it obeys the same ordering rule. Sets ``relevance_score``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, use_attribute_docstrings=True)

    embeddings: Embeddings
    """The model that embeds the query and the texts."""
    top_n: int | None = None
    """How many to keep; all when None. Named as LangChain's rerankers (``CrossEncoderReranker``)
    name it, so one can stand in for the other."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Sort ``documents`` by cosine similarity to ``query``, best first."""
        if not documents:
            return []
        q = np.asarray(self.embeddings.embed_query(query), dtype=np.float64)
        m = np.asarray(self.embeddings.embed_documents([d.page_content for d in documents]), dtype=np.float64)
        sims = (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q) + 1e-12)
        order = np.argsort(-sims)[: self.top_n]
        return [
            Document(
                page_content=documents[i].page_content,
                metadata={**documents[i].metadata, RELEVANCE_SCORE: float(sims[i])},
                id=documents[i].id,
            )
            for i in order
        ]


calls.list_fields(RerankThenExpand)
calls.list_fields(EmbeddingsReranker)
