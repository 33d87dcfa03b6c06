"""Fitting retrieved units into a token budget.

A per-unit cap does not bound a prompt: the budget applies to the sum of the units as
the chain joins them, and, where the prompt is given, to the whole rendered prompt
(system text, history, question). :func:`fit_to_budget` guarantees that the context it
returns counts at most ``max_tokens`` (less ``reserve``), measured on the joined text
itself, never unit by unit.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass
from typing import Any, Literal, cast

from langchain_core.callbacks import CallbackManagerForChainRun, dispatch_custom_event
from langchain_core.documents import Document
from langchain_core.prompts import BasePromptTemplate
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, model_validator

from langchain_expand import calls
from langchain_expand.packing import Context, pack_exactly, pack_plain
from langchain_expand.prompt import Formatter, context_tokens, count_prompt_tokens, format_docs, render
from langchain_expand.text.sentences import SentenceSplitter, Splitter
from langchain_expand.text.tokens import TokenCounter
from langchain_expand.units import (
    BUDGET,
    DOC_ID,
    SCORE,
    START,
    TOKENS,
    TRUNCATED,
    checked_units,
)

logger = logging.getLogger(__name__)

__all__ = [
    "BudgetReport",
    "FitToBudget",
    "context_tokens",
    "count_prompt_tokens",
    "fit_counted",
    "fit_to_budget",
    "format_docs",
]

Order = Literal["rank", "score", "position", "lost_in_middle"]


@dataclass(frozen=True)
class BudgetReport:
    """What fitting did: the tokens used, and how many units were kept, shrunk or dropped."""

    max_tokens: int
    used: int
    kept: int
    truncated: int
    dropped: int

    def as_dict(self) -> dict[str, int]:
        """The report as plain data, for metadata and callback events."""
        return asdict(self)


def fit_counted(
    units: Sequence[Document],
    max_tokens: int | None,
    token_counter: Callable[[str], int],
    splitter: Splitter | None = None,
) -> tuple[list[Document], int | None]:
    """Units carrying their exact ``tokens`` fitted to ``max_tokens``, and what they use (None: no budget)."""
    if max_tokens is None:
        return list(units), None
    counts = [d.metadata[TOKENS] for d in units]
    kept, report = fit_to_budget(
        units, max_tokens, token_counter=token_counter, counts=counts, counts_exact=True, splitter=splitter
    )
    return kept, report.used


def fit_to_budget(
    documents: Sequence[Document],
    max_tokens: int,
    *,
    token_counter: Callable[[str], int] | None = None,
    separator: str = "\n\n",
    formatter: Formatter | None = None,
    reserve: int = 0,
    order: Order = "rank",
    measure: Callable[[str], int] | None = None,
    counts: Sequence[int] | None = None,
    counts_exact: bool = False,
    splitter: Splitter | None = None,
) -> tuple[list[Document], BudgetReport]:
    """Keep the best-ranked units whose joined context fits ``max_tokens - reserve``.

    Units are taken in rank order. One that does not fit is first shrunk (a window loses sentences from its edges but
    never its hit; a parent is cut to whole sentences, tables and code blocks around its best child, or one of its
    units, rows or 48-token pieces; another retriever's chunk, with no focus, is not cut); if even that does not fit it
    is dropped, and smaller, lower-ranked units still get their turn. Kept units are put in ``order``; shrunk ones carry
    ``truncated=True``, each ``budget`` (the report as a dict). The input is not mutated.

    Args:
        documents: Units, best first.
        max_tokens: The budget for the context (or the whole prompt, with ``measure``).
        token_counter: Counts tokens; a ``TokenCounter`` (cl100k_base) by default.
        separator: Joins the units when no ``formatter`` is given.
        formatter: Builds the context string exactly as the chain will, e.g. :func:`format_docs`; its output is counted.
        reserve: Tokens kept free for the rest of the prompt.
        order: ``"rank"`` (as given), ``"score"``, ``"position"`` (document order) or
            ``"lost_in_middle"`` (best units at both ends, weakest in the middle).
        measure: Counts the whole prompt around a context string; replaces the plain
            count of the context when the budget is for the whole prompt.
        counts: Each unit's token count by ``token_counter``, where the caller has them
            (a retriever's own ``tokens``), so they are not counted again. They guide the
            packing only: what is kept is checked on an exact count of the joined context.
        counts_exact: The ``counts`` are ``token_counter``'s exact counts of these units, so the
            joined context is not counted again where its count follows from theirs
            (:func:`separator_cost`); wrong counts given as exact can break the budget.
        splitter: The units a parent that does not fit is cut by (a window's are its sentences);
            ``SentenceSplitter(token_counter=token_counter)`` if None.

    Returns:
        The kept units and a :class:`BudgetReport`.

    Raises:
        ValueError: When ``max_tokens`` or ``reserve`` is out of range or ``order`` unknown.
        TypeError: When ``documents`` is not a list of ``Document``.
    """
    documents = checked_units(documents, "fit_to_budget")
    _check(max_tokens, reserve, order, counts, len(documents))
    counter = token_counter or TokenCounter()
    context = Context(render(separator, formatter), measure or counter, max_tokens - reserve)
    context.check_room()
    splitter = splitter or SentenceSplitter(token_counter=counter)
    if formatter is None and measure is None:
        kept = pack_plain(documents, context, counter, separator, splitter, counts, counts_exact)
    else:
        kept = pack_exactly(documents, context.fits, context.fits_after, counter, splitter)
    return _in_order(documents, kept, context, order, printed=formatter is not None)


def _in_order(
    documents: Sequence[Document], kept: list[tuple[int, Document]], context: Context, order: Order, *, printed: bool
) -> tuple[list[Document], BudgetReport]:
    """The units ``kept`` (each with its rank in ``documents``) put in ``order``, still fitting, and the report.

    Reordering can move a token boundary where units meet: the lowest-ranked go until it fits.
    """
    truncated = sum(d.page_content != documents[rank].page_content for rank, d in kept)
    ordered = _ordered(kept, order)
    dropped = len(documents) - len(kept)
    while ordered and not context.fits([d for _, d in ordered]):
        ordered.remove(max(ordered, key=lambda item: item[0]))
        dropped += 1
    if documents and not ordered:
        whole = sum(not isinstance(d.metadata.get(START), int) for d in documents)  # no offsets: nothing to cut by
        logger.warning(
            "fit_to_budget kept none of %d units: not even a matched sentence fits in %d tokens%s. "
            "Raise max_tokens or lower the reserve.",
            len(documents),
            context.limit,
            f" ({whole} without offsets, start_index, as another retriever's chunks, are kept whole or not at all)"
            if whole
            else "",
        )
    return _reported(ordered, context, truncated, dropped, printed=printed)


def _reported(
    ordered: list[tuple[int, Document]], context: Context, truncated: int, dropped: int, *, printed: bool
) -> tuple[list[Document], BudgetReport]:
    """The kept units, each stamped with the report of what they use.

    Where a formatter may print the stamped metadata (``printed``), what it prints is counted:
    the last-ranked units go while it is over the limit, and the report is settled on its own
    printed count.
    """
    final = [d for _, d in ordered]
    report = BudgetReport(context.limit, context.size(context.render(final)), len(final), truncated, dropped)
    stamped = _stamped(final, report)
    settling = _SETTLE_ROUNDS
    while printed:
        size = context.size(context.render(stamped))
        if size > context.limit:  # the budget holds whatever it costs
            ordered.remove(max(ordered, key=lambda item: item[0]))
            final = [d for _, d in ordered]
            used = context.size(context.render(final))
            report = BudgetReport(context.limit, used, len(final), truncated, report.dropped + 1)
        elif size != report.used and settling:  # the report prints its own count: settle it
            settling -= 1
            report = BudgetReport(context.limit, size, len(final), truncated, report.dropped)
        else:
            break
        stamped = _stamped(final, report)
    return stamped, report


_SETTLE_ROUNDS = 8
"""How often the stamped units are recounted when a formatter prints their metadata."""


def _stamped(units: list[Document], report: BudgetReport) -> list[Document]:
    """The kept units with ``truncated`` and the ``budget`` report (a copy each) in their metadata."""
    stamp = report.as_dict()
    return [
        Document(page_content=d.page_content, metadata={TRUNCATED: False, **d.metadata, BUDGET: dict(stamp)}, id=d.id)
        for d in units
    ]


def _check(max_tokens: int, reserve: int, order: str, counts: Sequence[int] | None = None, units: int = 0) -> None:
    if not isinstance(max_tokens, int) or max_tokens < 1:
        msg = f"`max_tokens` must be a positive integer, got {max_tokens!r}."
        raise ValueError(msg)
    if reserve < 0 or reserve >= max_tokens:
        msg = f"`reserve` must be >= 0 and below `max_tokens` ({max_tokens}), got {reserve}."
        raise ValueError(msg)
    if order not in ("rank", "score", "position", "lost_in_middle"):
        msg = f"`order` must be 'rank', 'score', 'position' or 'lost_in_middle', got {order!r}."
        raise ValueError(msg)
    if counts is not None and len(counts) != units:
        msg = f"`counts` must give one count per unit ({units}), got {len(counts)}."
        raise ValueError(msg)


def _ordered(kept: list[tuple[int, Document]], order: Order) -> list[tuple[int, Document]]:
    if order == "score":
        return sorted(kept, key=lambda item: -float(item[1].metadata.get(SCORE, 0.0)))
    if order == "position":
        return sorted(kept, key=lambda item: (str(item[1].metadata.get(DOC_ID, "")), item[1].metadata.get(START, 0)))
    if order == "lost_in_middle":
        front, back = kept[0::2], kept[1::2]
        return front + back[::-1]
    return list(kept)


class FitToBudget(calls.Serialisable, RunnableSerializable[Any, Any]):
    """A runnable that fits units into a token budget: ``... | FitToBudget(max_tokens=2000)``.

    Without ``prompt``, it maps ``list[Document]`` to the kept ``list[Document]``, and
    the joined context (``separator``, or ``formatter``) counts at most
    ``max_tokens - reserve``.

    With ``prompt`` (whole-prompt mode), its input is the prompt's input dict with the
    units under ``context_key``; the output is the same dict with the formatted context
    string there (and the kept units under ``context_key + "_docs"``), ready for
    ``| prompt``, and the whole rendered prompt counts at most ``max_tokens``.

    Each call reports what it did as a ``fit_to_budget`` custom callback event. Every field
    can change per request with ``configurable_fields`` (e.g. the budget, per model).

    Example:
        .. code-block:: python

            from langchain_core.prompts import ChatPromptTemplate
            from langchain_expand import FitToBudget, MergeOverlaps

            prompt = ChatPromptTemplate.from_messages(
                [("system", "Answer from the context: {context}"), ("human", "{question}")]
            )
            chain = (
                {"context": retriever | MergeOverlaps(), "question": lambda q: q}
                | FitToBudget(max_tokens=4000, prompt=prompt)
                | prompt
                | model
            )
    """

    max_tokens: int
    """The budget."""
    token_counter: Callable[[str], int] | None = None
    """Counts tokens; ``TokenCounter()`` (cl100k_base) when None."""
    separator: str = "\n\n"
    """Joins units when no ``formatter`` is given."""
    formatter: Formatter | None = None
    """Builds the context string; it is what gets counted."""
    reserve: int = 0
    """Tokens kept free for the rest of the prompt."""
    order: str = "rank"
    """The order of the kept units: "rank", "score", "position" or "lost_in_middle"."""
    prompt: BasePromptTemplate | None = None  # type: ignore[type-arg]  # a parametrised type would not accept subclasses
    """The chain's prompt; turns on whole-prompt mode."""
    context_key: str = "context"
    """The prompt variable that receives the context."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", use_attribute_docstrings=True)

    @model_validator(mode="after")
    def _validate(self) -> FitToBudget:
        _check(self.max_tokens, self.reserve, self.order)
        if self.prompt is not None and self.context_key not in self.prompt.input_variables:
            msg = (
                f"FitToBudget's prompt takes no {{{self.context_key}}} (its variables: {self.prompt.input_variables}): "
                "the context would not be in the prompt, and the budget would count none of it. Put "
                f"{{{self.context_key}}} in the prompt, or name the variable that takes the context in context_key."
            )
            raise ValueError(msg)
        return self

    @property
    def _order(self) -> Order:
        return cast("Order", self.order)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Fit ``input`` (units, or the prompt's input dict in whole-prompt mode) to the budget."""
        return self._call_with_config(self._fit, input, config, run_type="chain", **kwargs)

    def _fit(self, input: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig) -> Any:
        counter = self.token_counter or TokenCounter()
        if self.prompt is None:
            kept, report = fit_to_budget(
                input,
                self.max_tokens,
                token_counter=counter,
                separator=self.separator,
                formatter=self.formatter,
                reserve=self.reserve,
                order=self._order,
            )
            _report(report, config)
            return kept
        prompt, key = self.prompt, self.context_key
        if not isinstance(input, Mapping) or key not in input:
            msg = f"In whole-prompt mode the input must be a dict holding the units under {key!r}."
            raise ValueError(msg)
        missing = sorted(set(prompt.input_variables) - set(input))
        if missing:
            msg = f"FitToBudget's prompt needs {missing}, which its input dict lacks (it holds {sorted(input)})."
            raise KeyError(msg)
        formatted = render(self.separator, self.formatter)

        def measure(context: str) -> int:  # formatted, not invoked: a trial is no run in the trace
            return count_prompt_tokens(prompt.format_prompt(**{**input, key: context}), counter)

        kept, report = fit_to_budget(
            checked_units(input[key], f"FitToBudget, under {key!r} of its input,"),
            self.max_tokens,
            token_counter=counter,
            formatter=formatted,
            reserve=self.reserve,
            order=self._order,
            measure=measure,
        )
        _report(report, config)
        return {**input, key: formatted(kept), f"{key}_docs": kept}


def _report(report: BudgetReport, config: RunnableConfig) -> None:
    with suppress(RuntimeError):  # called outside a run: there is no callback to tell
        dispatch_custom_event("fit_to_budget", report.as_dict(), config=config)


calls.list_fields(FitToBudget)
