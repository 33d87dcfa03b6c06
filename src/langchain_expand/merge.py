"""Merging overlapping units, so the same source text is never sent twice.

Two windows around adjacent hits overlap; sent as they are, the shared sentences reach
the model twice and read as corroboration. :func:`merge_overlaps` turns every group of
units of one document whose char ranges overlap (or touch within ``gap``) into a single
unit covering the union, text in document order, each character once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, model_validator

from langchain_expand import calls
from langchain_expand.text.cues import heading
from langchain_expand.text.sentences import SentenceSplitter
from langchain_expand.text.tokens import TokenCounter
from langchain_expand.units import (
    CHILDREN,
    CROSSED,
    DOC_ID,
    END,
    HIT,
    HITS,
    SCORE,
    SENTENCES,
    SPAN,
    START,
    TOKENS,
    checked_units,
    located,
)

__all__ = ["MergeOverlaps", "merge_overlaps"]

SourceText = Callable[[str], str]
"""Gives the full source text of a document id; needed only to bridge gaps."""


def _distance(a: Document, b: Document) -> int:
    """How far ``b`` starts after ``a`` ends: sentences where both have spans, else chars."""
    if SPAN in a.metadata and SPAN in b.metadata:
        return int(b.metadata[SPAN][0]) - int(a.metadata[SPAN][1])
    return int(b.metadata[START]) - int(a.metadata[END])


def merge_overlaps(
    documents: Sequence[Document],
    *,
    gap: int = 0,
    source: SourceText | None = None,
    token_counter: Callable[[str], int] | None = None,
    touching: bool = True,
) -> list[Document]:
    """Merge units of the same document whose ranges overlap or lie within ``gap``.

    Units need ``doc_id``, ``start_index`` and ``end_index`` metadata; others pass
    through untouched. A merged unit sits at the rank of its best-ranked member and
    holds its metadata with ``score`` (the best), the union's ``start_index``/``end_index``,
    ``hits`` (every member's, best first) where members have hits, a parent's ``children``
    (every member's, best first; each child's ``in_parent`` stays into its own parent), and
    ``span`` when all members had one. The input is never mutated, and merging a merged list
    changes nothing.

    Args:
        documents: Units, best first.
        gap: Also merge units this far apart: in sentences where both carry ``span``,
            else in chars. 0 merges units whose char ranges overlap or touch, the
            ones that would send text twice; it never needs ``source``.
        source: Full text by document id; required when ``gap`` > 0 has to bridge text
            that no unit holds.
        token_counter: Recounts ``tokens`` of merged units; a ``TokenCounter`` by default.
        touching: With ``gap`` 0, also merge units that only touch (one ends where the next
            begins); False merges only units that share text, as parents do (two sections
            side by side stay two parents).

    Raises:
        ValueError: When ``gap`` is negative, or a gap must be bridged without ``source``.
        TypeError: When ``documents`` is not a list of ``Document``.
    """
    documents = checked_units(documents, "merge_overlaps")
    if gap < 0:
        msg = f"`gap` must be >= 0, got {gap}."
        raise ValueError(msg)
    placed: dict[int, Document] = {}
    absorbed: set[int] = set()
    for component in _components(documents, gap, touching):
        _place(documents, component, placed, absorbed, source)
    counter = token_counter
    out = []
    for rank, doc in enumerate(documents):
        if rank in absorbed:
            continue
        merged = placed.get(rank, doc)
        if merged is not doc and TOKENS in merged.metadata:
            counter = counter or TokenCounter()
            merged.metadata[TOKENS] = counter(merged.page_content)
        out.append(merged)
    return out


def _components(documents: Sequence[Document], gap: int, touching: bool) -> Iterator[list[int]]:
    """The ranks of each run of located units of one document that overlap, touch or lie within ``gap``."""
    groups: dict[str, list[int]] = {}
    for rank, doc in enumerate(documents):
        if located(doc.metadata):
            groups.setdefault(doc.metadata[DOC_ID], []).append(rank)
    for ranks in groups.values():
        ordered = sorted(ranks, key=lambda r: (documents[r].metadata[START], r))
        component = [ordered[0]]
        reach = documents[ordered[0]]  # the member that ends last
        for r in ordered[1:]:
            doc = documents[r]
            start, end = doc.metadata[START], reach.metadata[END]
            joined = start < end or (touching and start == end)
            if joined or (gap > 0 and _distance(reach, doc) <= gap):
                component.append(r)
                if doc.metadata[END] > reach.metadata[END]:
                    reach = doc
            else:
                yield component
                component, reach = [r], doc
        yield component


def _place(
    documents: Sequence[Document],
    component: list[int],
    placed: dict[int, Document],
    absorbed: set[int],
    source: SourceText | None,
) -> None:
    if len(component) == 1:
        return
    best = min(component)
    placed[best] = _union([documents[r] for r in component], [documents[r] for r in sorted(component)], source)
    absorbed.update(r for r in component if r != best)


def _union(by_position: list[Document], by_rank: list[Document], source: SourceText | None) -> Document:
    """One unit covering ``by_position`` (sorted by start), ranked as ``by_rank[0]``."""
    first = by_position[0]
    doc_id = first.metadata[DOC_ID]
    parts = [first.page_content]
    end = first.metadata[END]
    bridged: list[tuple[int, str]] = []  # (char offset, text) of each gap filled in
    for doc in by_position[1:]:
        start, stop = doc.metadata[START], doc.metadata[END]
        if start > end:
            if source is None:
                msg = (
                    f"Merging units of document {doc_id!r} across chars {end}-{start} needs the text "
                    "between them: pass `source=` (a function from document id to its text)."
                )
                raise ValueError(msg)
            bridged.append((end, source(doc_id)[end:start]))
            parts.append(bridged[-1][1])
            parts.append(doc.page_content)
        elif stop > end:
            parts.append(doc.page_content[end - start :])
        end = max(end, stop)
    best = by_rank[0]
    metadata: dict[str, Any] = {**best.metadata}
    hits = [h for d in by_rank for h in d.metadata.get(HITS, [d.metadata.get(HIT)]) if h is not None]
    if hits or HITS in metadata:
        metadata[HITS] = hits
    if any(CHILDREN in d.metadata for d in by_rank):
        children = [c for d in by_rank for c in d.metadata.get(CHILDREN, [])]
        metadata[CHILDREN] = sorted(children, key=lambda c: -float(c.get(SCORE) or 0))
    scores = [d.metadata[SCORE] for d in by_rank if isinstance(d.metadata.get(SCORE), int | float)]
    if scores:
        metadata[SCORE] = max(scores)
    metadata[START] = first.metadata[START]
    metadata[END] = end
    if all(SPAN in d.metadata for d in by_position):
        metadata[SPAN] = [
            min(d.metadata[SPAN][0] for d in by_position),
            max(d.metadata[SPAN][1] for d in by_position),
        ]
    if all(SENTENCES in d.metadata for d in by_position):
        seen = {tuple(s) for d in by_position for s in d.metadata[SENTENCES]}
        seen.update((start + a, start + b) for start, text in bridged for a, b in SentenceSplitter()(text))
        metadata[SENTENCES] = [list(s) for s in sorted(seen)]
        span = metadata.get(SPAN)
        if span is not None and len(seen) != span[1] - span[0]:
            # The gap did not split into the sentences its span counts (another splitter indexed
            # it): without a one-to-one map, FitToBudget must not cut this unit by sentence.
            del metadata[SENTENCES]
    text = "".join(parts)
    if CROSSED in metadata:
        base = int(metadata[START])
        units = metadata.get(SENTENCES) or [[base + a, base + b] for a, b in SentenceSplitter()(text)]
        metadata[CROSSED] = sum(heading(text[a - base : b - base]) for a, b in units[1:])
    return Document(page_content=text, metadata=metadata, id=best.id)


class MergeOverlaps(calls.Serialisable, RunnableSerializable[list[Document], list[Document]]):
    """A runnable that merges overlapping units: ``retriever | MergeOverlaps()``.

    See :func:`merge_overlaps` for the rules. Sync, async and batch all work, and every
    field can change per request with ``configurable_fields``.

    Example:
        .. code-block:: python

            from langchain_expand import FitToBudget, MergeOverlaps

            context = retriever | MergeOverlaps() | FitToBudget(max_tokens=2000)
    """

    gap: int = 0
    """Also merge units this far apart (sentences where both carry ``span``, else chars)."""
    source: SourceText | None = None
    """Full text by document id; required when a gap has to be bridged."""
    token_counter: Callable[[str], int] | None = None
    """Recounts merged units' ``tokens``; ``TokenCounter()`` when None."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", use_attribute_docstrings=True)

    @model_validator(mode="after")
    def _validate(self) -> MergeOverlaps:
        if self.gap < 0:
            msg = f"`gap` must be >= 0, got {self.gap}."
            raise ValueError(msg)
        return self

    def invoke(self, input: list[Document], config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        """Merge the overlapping units of ``input``."""
        return self._call_with_config(self._merge, input, config, run_type="chain", **kwargs)

    def _merge(self, documents: list[Document]) -> list[Document]:
        counter = self.token_counter or TokenCounter()
        return merge_overlaps(documents, gap=self.gap, source=self.source, token_counter=counter)


calls.list_fields(MergeOverlaps)
