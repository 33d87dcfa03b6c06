"""Parents as served: ranked by their children's scores, checked against the head, placed and capped."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from langchain_core.documents import Document

from langchain_expand.budget import BudgetReport, context_tokens, fit_to_budget
from langchain_expand.merge import merge_overlaps
from langchain_expand.parents.migration import is_stock_parent
from langchain_expand.shrink import trim
from langchain_expand.store.records import (
    decode_metadata,
)
from langchain_expand.text.ranges import largest_fitting, outward
from langchain_expand.text.sentences import SentenceSplitter, Span
from langchain_expand.units import (
    BUDGET,
    CARRIED,
    CHILD_ID,
    CHILDREN,
    DOC_ID,
    END,
    IN_PARENT,
    PARENT_ID,
    REF_ID,
    REVISION,
    SCORE,
    START,
    STORED_DOC,
    STORED_END,
    STORED_REV,
    STORED_START,
    TOKENS,
    check_match,
    checked_units,
)

__all__ = [
    "Parent",
    "aggregate",
    "as_units",
    "best_children",
    "cap_parent",
    "child_out",
    "matched_children",
    "parent_out",
    "parents_of_hits",
    "ranked_parents",
    "same_version",
    "servable",
]

logger = logging.getLogger(__name__)


@dataclass
class Parent:
    """A ranked parent: its id, its matched children with their scores, and its own score."""

    parent_id: str
    children: list[tuple[Document, float]]
    score: float


def aggregate(how: str, scores: list[float]) -> float:
    """A parent's score from its children's: their ``max``, ``mean`` or ``sum``."""
    if how == "mean":
        return sum(scores) / len(scores)
    if how == "sum":
        return sum(scores)
    return max(scores)


def same_version(unit: Document, parent: Document | None) -> bool:
    """``unit`` (a child, or a parent) was written by the version ``parent`` holds.

    Units stored before versions were recorded pass; a missing head does not.
    """
    if parent is None:
        return False
    rev = unit.metadata.get(STORED_REV, unit.metadata.get(REVISION))
    return rev is None or parent.metadata.get(REVISION) is None or rev == parent.metadata[REVISION]


def child_out(child: Document, score: float, id_key: str) -> Document:
    """A matched child as a match-only result, in source coordinates."""
    m = child.metadata
    metadata = {
        **{k: v for k, v in decode_metadata(m).items() if k != id_key},
        DOC_ID: m.get(STORED_DOC),
        PARENT_ID: m.get(id_key),
        CHILD_ID: child.id,
        START: m.get(STORED_START),
        END: m.get(STORED_END),
        SCORE: score,
    }
    return Document(child.page_content, metadata=metadata, id=child.id)


def best_children(ranked: Sequence[Parent], id_key: str, k: int | None = None) -> list[Document]:
    """Each parent's best child, best first, as match-only results: the first ``k`` parents' (all, for None)."""
    return [child_out(child, score, id_key) for parent in ranked[:k] for child, score in parent.children[:1]]


def matched_children(
    ranked: Sequence[Parent],
    id_key: str,
    k: int | None,
    max_tokens: int | None,
    counter: Callable[[str], int],
    count: Callable[[str], int],
) -> list[Document]:
    """A match-only answer: :func:`best_children` with their ``tokens``, fitted to ``max_tokens`` whole or not at all.

    As a window retriever's matches, each carries its token count (the unit contract's).
    ``count`` is ``counter``'s count of a child, kept for the call
    (:meth:`~langchain_expand.parents.reads.CallReads.count`), so the rounds that gather
    children to fill a budget and the fit count each once.
    """
    matched = best_children(ranked, id_key, k)
    counts = [count(child.page_content) for child in matched]
    for child, tokens in zip(matched, counts, strict=True):
        child.metadata[TOKENS] = tokens
    if max_tokens is None:
        return matched
    return fit_to_budget(matched, max_tokens, token_counter=counter, counts=counts, counts_exact=True)[0]


def parent_out(parent: Parent, doc: Document, counter: Callable[[str], int]) -> Document:
    """A parent as served: its matched children with their places, its score and its token count."""
    base = int(doc.metadata.get(START, 0))
    children = []
    for child, score in sorted(parent.children, key=lambda cs: -cs[1]):
        m = child.metadata
        start = int(m.get(STORED_START, m.get(START, base)))
        end = int(m.get(STORED_END, m.get(END, base)))
        children.append({REF_ID: child.id, START: start, END: end, IN_PARENT: [start - base, end - base], SCORE: score})
    best = parent.children[0][0].metadata
    extra = {key: best[key] for key in CARRIED if key in best}
    metadata = {**doc.metadata, **extra, PARENT_ID: parent.parent_id, SCORE: parent.score, CHILDREN: children}
    metadata[TOKENS] = counter(doc.page_content)
    return Document(doc.page_content, metadata=metadata, id=parent.parent_id)


def cap_parent(doc: Document, cap: int, counter: Callable[[str], int]) -> Document:
    """A parent over ``cap`` tokens becomes the largest span around its best child that fits."""
    if doc.metadata[TOKENS] <= cap or not doc.metadata.get(CHILDREN):
        return doc
    base = int(doc.metadata[START])
    best = doc.metadata[CHILDREN][0]
    focus = (int(best[START]), int(best[END]))

    def fits(units: list[Span], r: tuple[int, int]) -> bool:
        return counter(doc.page_content[units[r[0]][0] - base : units[r[1] - 1][1] - base]) <= cap

    # Whole tables and code blocks first; if not even the child's own units fit,
    # finer units (table rows, code lines) from a splitter capped at ``cap``.
    for unit_cap, seed in ((None, focus), (cap, (focus[0], focus[0] + 1))):
        splitter = SentenceSplitter(max_unit_tokens=unit_cap, token_counter=counter)
        units: list[Span] = [(base + s, base + e) for s, e in splitter(doc.page_content)]
        ranges = outward(units, seed)
        fit = largest_fitting(ranges, lambda r, units=units: fits(units, r))  # type: ignore[misc]
        if fit is not None:
            return trim(doc, units, ranges[fit], counter)
    return trim(doc, units, ranges[0], counter)


def servable(
    ranked: list[Parent],
    stored: Sequence[Document | None],
    heads: Mapping[str, Document | None],
    limit: int | None = None,
    *,
    warn: bool = False,
) -> list[tuple[Parent, Document]]:
    """The first ``limit`` ranked parents (all, for None) that can be served.

    A parent is servable when it is in the docstore and of the version of its children;
    each keeps only its children of its version. With ``warn``, each one skipped is logged.
    """
    out: list[tuple[Parent, Document]] = []
    for parent, doc in zip(ranked, stored, strict=True):
        if len(out) == limit:
            break
        if doc is None:
            if warn:
                logger.warning(
                    "Skipping parent %r: its children are in the vector store but it is not in the "
                    "docstore (an interrupted add_documents, or stores out of sync). Re-add its document.",
                    parent.parent_id,
                )
            continue
        if warn and is_stock_parent(doc):
            logger.warning(
                "Skipping parent %r: it was written by the stock ParentDocumentRetriever, which this class "
                "does not read. Run retriever.migrate_stock_index() once: it adds the documents again with "
                "this class and removes the stock records.",
                parent.parent_id,
            )
            continue
        same = [(c, score) for c, score in parent.children if same_version(c, doc)]
        if not same or not same_version(doc, heads.get(str(doc.metadata.get(DOC_ID)))):
            if warn:
                logger.warning(
                    "Skipping parent %r: the matched children are of another version of its document "
                    "than the parent in the docstore (an interrupted or running add_documents). Re-add it.",
                    parent.parent_id,
                )
            continue
        out.append((Parent(parent.parent_id, same, parent.score), doc))
    return out


def as_units(parents: Sequence[Document], counter: Callable[[str], int]) -> list[Document]:
    """Fitted ``parents`` as sent: those of one document that share text (a splitter's ``chunk_overlap``) as one.

    Sent apart, the shared text would reach the model twice and read as corroboration, as
    overlapping windows would. Joined after the fit, so each parent is ranked, capped and
    fitted as itself (joined first, a low-ranked parent's text would take the budget at its
    neighbour's rank), and the joined unit uses fewer tokens than its parents did: the
    ``budget`` report's ``used`` and ``kept`` are recounted. Parents side by side stay two.
    ``counter`` recounts a joined unit's ``tokens``.
    """
    joined = merge_overlaps(parents, touching=False, token_counter=counter) if len(parents) > 1 else list(parents)
    if len(joined) < len(parents) and BUDGET in joined[0].metadata:
        used = context_tokens(joined, counter)
        for unit in joined:
            unit.metadata[BUDGET] = asdict(replace(BudgetReport(**unit.metadata[BUDGET]), used=used, kept=len(joined)))
    return joined


def ranked_parents(
    scored: list[tuple[Document, float]], threshold: float | None, id_key: str, how: str, *, keep_order: bool = False
) -> list[Parent]:
    """The children at or above ``threshold`` grouped by parent (``id_key``), each parent scored by ``how``.

    Best first, or in their first child's order (``keep_order``).
    """
    groups: dict[str, list[tuple[Document, float]]] = {}
    for child, score in scored:
        if threshold is not None and score < threshold:
            continue
        parent_id = child.metadata.get(id_key)
        if parent_id is not None:
            groups.setdefault(str(parent_id), []).append((child, score))
    parents = [Parent(pid, kids, aggregate(how, [s for _, s in kids])) for pid, kids in groups.items()]
    return parents if keep_order else sorted(parents, key=lambda p: -p.score)


def parents_of_hits(hits: Sequence[Document]) -> list[Parent]:
    """The parents of matched children (``expand=False`` results), in the order of their first, scored by it."""
    groups: dict[str, Parent] = {}
    for hit in checked_units(hits, "expand_hits"):
        check_match(hit, (PARENT_ID, SCORE))
        parent_id = str(hit.metadata[PARENT_ID])
        score = float(hit.metadata[SCORE])
        child = Document(hit.page_content, metadata=hit.metadata, id=hit.metadata.get(CHILD_ID))
        if parent_id in groups:
            groups[parent_id].children.append((child, score))
        else:
            groups[parent_id] = Parent(parent_id, [(child, score)], score)
    return list(groups.values())
