"""Windows against parents on the same hits: each design's sizes, whether its p99 prompt fits, and the advice.

Parents are the sections enclosing the hits the window sweep found (given ``sections``
offsets, else ``##`` headings), so both designs are compared on identical matches.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from langchain_core.documents import Document

from langchain_expand.prompt import context_tokens
from langchain_expand.text.sections import MarkdownSectionSplitter, SectionSplitter
from langchain_expand.text.sentences import Span
from langchain_expand.text.tokens import TokenCounter
from langchain_expand.tools.report.tables import DesignRow, SentenceTable, Sizes, Verdict, WindowRow
from langchain_expand.units import DOC_ID, SECTIONS, START

__all__ = ["designs_of", "recommend", "share_over", "verdicts_of"]


def designs_of(
    rows: list[WindowRow],
    documents: Sequence[Document],
    hits_per_query: list[list[Document]],
    texts: dict[str, str],
    k: int,
    counter: TokenCounter,
    room: int,
    samples: dict[str, dict[str, list[float]]],
) -> tuple[str | None, list[DesignRow]]:
    """Every window configuration as a design, and parents (the sections enclosing the same hits) where any."""
    parents_from, sections = _sections(documents)
    designs = [DesignRow(f"window {w.before}:{w.after}", w.unit, w.prompt, w.over_budget) for w in rows]
    if sections:
        units, prompts = _parent_sizes(hits_per_query, sections, texts, k, counter)
        designs.append(
            DesignRow(f"parent ({parents_from})", Sizes.of(units), Sizes.of(prompts), share_over(prompts, room))
        )
        samples["units"]["parents"], samples["prompts"]["parents"] = units, prompts
    return parents_from, designs


def verdicts_of(rows: list[WindowRow], designs: list[DesignRow], room: int) -> list[Verdict]:
    """Whether each design's p99 prompt fits the room the budget leaves, and by how much."""
    sizes = [(f"window {w.before}:{w.after}", w.prompt.p99) for w in rows]
    sizes += [(f"window {w.before}:{w.after} merged", w.prompt_merged.p99) for w in rows]
    sizes += [(d.design, d.prompt.p99) for d in designs if d.design.startswith("parent")]
    return [Verdict(design, room - p99, room - p99 >= 0) for design, p99 in sizes]


def _sections(documents: Sequence[Document]) -> tuple[str | None, dict[str, list[Span]]]:
    """Each document's parents as source offsets, and where they came from."""
    out: dict[str, list[Span]] = {}
    kinds = set()
    headings = MarkdownSectionSplitter(max_level=2)
    for doc in documents:
        if doc.metadata.get(SECTIONS):
            found = SectionSplitter().sections(doc)
            kinds.add("given sections")
        elif (
            doc.metadata.get("format") == "markdown"
            or "\n## " in doc.page_content
            or doc.page_content.startswith("## ")
        ):
            found = headings.sections(doc)
            kinds.add("## headings")
        else:
            continue
        out[str(doc.id)] = [(s, e) for s, e, _ in found]
    return (", ".join(sorted(kinds)) or None), out


def _parent_sizes(
    hits_per_query: list[list[Document]],
    sections: dict[str, list[Span]],
    texts: dict[str, str],
    k: int,
    counter: TokenCounter,
) -> tuple[list[float], list[float]]:
    """Sizes of the distinct sections enclosing each query's hits, best first, k of them."""
    starts = {doc_id: [s for s, _ in spans] for doc_id, spans in sections.items()}
    cache: dict[tuple[str, int], int] = {}
    units: list[float] = []
    prompts: list[float] = []
    for hits in hits_per_query:
        chosen: list[tuple[str, int]] = []
        for hit in hits:
            doc_id = hit.metadata[DOC_ID]
            if doc_id not in sections:
                continue
            at = bisect.bisect_right(starts[doc_id], hit.metadata[START]) - 1
            if at >= 0 and (doc_id, at) not in chosen:
                chosen.append((doc_id, at))
            if len(chosen) == k:
                break
        parents = [Document(texts[d][sections[d][i][0] : sections[d][i][1]]) for d, i in chosen]
        for key, parent in zip(chosen, parents, strict=True):
            if key not in cache:
                cache[key] = counter(parent.page_content)
            units.append(cache[key])
        prompts.append(context_tokens(parents, counter))
    return units, prompts


def share_over(prompts: Sequence[float], limit: int) -> float:
    """The share of ``prompts`` (token counts) over ``limit``."""
    return sum(p > limit for p in prompts) / len(prompts) if prompts else 0.0


def recommend(sentences: SentenceTable, rows: list[WindowRow], designs: list[DesignRow], limit: int) -> str:
    """The advice, in sentences: how real the sentences are, the widest window that fits, whether parents do."""
    parts = []
    if sentences.warning:
        parts.append(
            f"Sentences here are not a reliable unit ({sentences.warning}); keep the splitter's cap "
            f"(it split {sentences.capped_share:.0%} of the text) or the window sizes below do not hold."
        )
    safe = [w for w in rows if w.prompt.p99 <= limit]
    if safe:
        widest = max(safe, key=lambda w: w.sentences)
        tail = (  # under the p99, up to 1% of queries may still be over: say how many, and by how much
            "no query needs truncation"
            if widest.over_budget == 0
            else f"{widest.over_budget:.1%} of queries exceed it (the largest prompt {widest.prompt.max:,.0f} "
            "tokens), which max_tokens trims"
        )
        parts.append(
            f"Windows up to {widest.before}:{widest.after} ({widest.sentences} sentences, median unit "
            f"{widest.unit.median:,.0f} tokens) keep the p99 prompt at {widest.prompt.p99:,.0f} tokens, "
            f"{limit - widest.prompt.p99:,.0f} under the budget: {tail}."
        )
    else:
        parts.append("No window configuration keeps the p99 prompt inside the budget: lower k or the radius.")
    merged_only = [w for w in rows if w.prompt.p99 > limit >= w.prompt_merged.p99]
    if merged_only:
        w = max(merged_only, key=lambda w: w.sentences)
        parts.append(
            f"With overlapping windows merged, {w.before}:{w.after} fits too "
            f"(p99 {w.prompt_merged.p99:,.0f} tokens): use MergeOverlaps or merge=True."
        )
    for d in designs:
        if not d.design.startswith("parent"):
            continue
        if d.prompt.p99 <= limit:
            parts.append(
                f"Parents also fit (p99 prompt {d.prompt.p99:,.0f}, largest unit {d.unit.max:,.0f}); "
                "prefer them where sections are small and coherent units of meaning."
            )
        else:
            parts.append(
                f"Parents do not fit: their p99 prompt is {d.prompt.p99:,.0f} tokens, {d.over_budget:.1%} of "
                f"queries exceed the budget, and the largest unit is {d.unit.max:,.0f}. Use windows, or "
                "parents with max_parent_tokens and max_tokens so the tail is trimmed instead of truncated."
            )
    return " ".join(parts)
