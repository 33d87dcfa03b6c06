"""The budget report: the numbers that decide between windows and parents on your corpus.

It answers four questions. Are the sentences real, or will windows be unbounded? What
does each radius cost? What is the tail of parent sizes? Which configuration keeps the
p99 prompt inside the budget? Medians hide tails, so every size comes with p95/p99/max
and every prompt with the share of queries over budget.

All window configurations reuse one index (sentences are embedded once; windows are
computed at query time), and parents are the sections enclosing the same hits, so the
two designs are compared on identical matches.
"""

from __future__ import annotations

import bisect
import itertools
import json
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from langchain_expand.adapters import StoreAdapter
from langchain_expand.records import decode_metadata, unit_id
from langchain_expand.sections import MarkdownSectionSplitter, SectionSplitter
from langchain_expand.sentences import SentenceSplitter, Span, Splitter
from langchain_expand.spans import merge_overlaps
from langchain_expand.tokens import TokenCounter
from langchain_expand.units import (
    DOC_ID,
    END,
    HIT,
    N_SENTENCES,
    SCORE,
    SECTIONS,
    START,
    STORED_COUNT,
    STORED_DOC,
    STORED_END,
    STORED_GAP,
    STORED_INDEX,
    STORED_REV,
    STORED_START,
    TOKENS,
)
from langchain_expand.windows import SentenceWindowRetriever

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from rich.console import Console

__all__ = ["CorpusReport", "budget_report", "read_index", "write_plots"]

SCHEMA_PATH = Path(__file__).with_name("report.schema.json")
SENTENCE_WARNING_P95 = 128
"""Above this p95 (tokens, before the cap), sentences are not a unit to count on."""


@dataclass(frozen=True)
class Sizes:
    """A distribution by its median and its tail."""

    median: float
    p95: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Sizes:
        """Percentiles of ``values`` (linear interpolation); zeros when empty."""
        if not values:
            return cls(0.0, 0.0, 0.0, 0.0)
        a = np.asarray(values, dtype=float)
        med, p95, p99 = (float(x) for x in np.percentile(a, [50, 95, 99]))
        return cls(med, p95, p99, float(a.max()))


@dataclass(frozen=True)
class SentenceTable:
    """Are the sentences real? Sizes with the cap, sizes without, and what the cap split."""

    count: int
    tokens: Sizes
    uncapped: Sizes
    cap: int | None
    capped_share: float
    warning: str | None


@dataclass(frozen=True)
class WindowRow:
    """What one window configuration costs, measured and predicted."""

    before: int
    after: int
    sentences: int
    unit: Sizes
    predicted: float
    prediction_error: float
    prompt: Sizes
    prompt_merged: Sizes
    over_budget: float
    over_budget_merged: float


@dataclass(frozen=True)
class DesignRow:
    """One design's unit and prompt sizes at ``k``."""

    design: str
    unit: Sizes
    prompt: Sizes
    over_budget: float


@dataclass(frozen=True)
class Verdict:
    """``budget - reserve - p99 prompt``: positive is safe, negative means truncation fires."""

    design: str
    margin: float
    safe: bool


@dataclass
class CorpusReport:
    """Everything the report measured; ``to_json`` follows ``report.schema.json``."""

    corpus: str
    documents: int
    queries: int
    pseudo_queries: bool
    k: int
    budget: int
    reserve: int
    sentences: SentenceTable
    windows: list[WindowRow]
    index_seconds: float
    sweep_seconds: float
    reindex_seconds_saved: float
    read_from_index: bool
    parents_from: str | None
    designs: list[DesignRow]
    verdicts: list[Verdict]
    recommendation: str
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict, repr=False)
    """Raw sizes for the plots: ``{"units": {design: sizes}, "prompts": {design: sizes}}``."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data, without the raw samples."""
        data = asdict(self)
        data.pop("samples")
        return data

    def to_json(self) -> str:
        """The report as JSON (see ``report.schema.json``)."""
        return json.dumps(self.to_dict(), indent=2)

    def to_markdown(self) -> str:
        """The four tables and the recommendation as Markdown."""
        return (
            "\n\n".join(f"### {title}\n\n" + _markdown(header, rows) for title, header, rows in self._tables())
            + f"\n\n### Recommendation\n\n{self.recommendation}\n"
        )

    def print_rich(self, console: Console | None = None) -> None:
        """The tables in the terminal, with rich; each fits 80 columns (cells wrap, never truncate)."""
        from rich.console import Console
        from rich.table import Table

        console = console or Console()
        for title, header, rows in self._tables():
            table = Table(title=title, title_justify="left")
            for name in header:
                left = name in ("design", "configuration")
                table.add_column(name, justify="left" if left else "right", overflow="fold")
            for row in rows:
                table.add_row(*row)
            console.print(table)
        console.print(f"[bold]Recommendation.[/bold] {self.recommendation}")

    def _tables(self) -> list[tuple[str, list[str], list[list[str]]]]:
        s = self.sentences
        source = "pseudo-queries sampled from the corpus" if self.pseudo_queries else "queries"
        how = (
            f"read from the index in {self.index_seconds:.1f}s, no document embedded"
            if self.read_from_index
            else f"embedded once in {self.index_seconds:.1f}s"
        )
        saved = (
            f"; re-indexing per window would have cost {self.reindex_seconds_saved:.0f}s more"
            if self.reindex_seconds_saved
            else ""
        )
        reserve = f" less a {self.reserve:,} reserve" if self.reserve else ""
        sentence_rows = [
            ["with the cap", f"{s.count:,}", *_sizes(s.tokens), f"{s.capped_share:.1%}"],
            ["without a cap", "", *_sizes(s.uncapped), ""],
        ]
        window_units = [
            [
                f"{w.before}:{w.after}",
                str(w.sentences),
                _n(w.unit.median),
                _n(w.unit.p99),
                _n(w.unit.max),
                f"{w.predicted:,.0f}",
                f"{w.prediction_error:+.0%}",
            ]
            for w in self.windows
        ]
        window_prompts = [
            [
                f"{w.before}:{w.after}",
                _n(w.prompt.median),
                _n(w.prompt.p99),
                _n(w.prompt_merged.median),
                _n(w.prompt_merged.p99),
                f"{w.over_budget:.1%}",
                f"{w.over_budget_merged:.1%}",
            ]
            for w in self.windows
        ]
        designs = [
            [d.design, _n(d.unit.median), _n(d.unit.max), _n(d.prompt.median), _n(d.prompt.p99), f"{d.over_budget:.1%}"]
            for d in self.designs
        ]
        verdicts = [
            [v.design, f"{v.margin:+,.0f}", "safe" if v.safe else "truncation will fire"] for v in self.verdicts
        ]
        return [
            (
                f"Sentences ({self.corpus}; cap {s.cap} tokens; {s.warning or 'sentences look real'})",
                ["configuration", "sentences", "median", "p95", "p99", "max", "text the cap split"],
                sentence_rows,
            ),
            (
                f"Window sizes: {self.queries} {source}, one index ({how}; the sweep took "
                f"{self.sweep_seconds:.1f}s{saved})",
                ["window", "sentences", "median", "p99", "max", "predicted", "error"],
                window_units,
            ),
            (
                f"Prompt sizes at k={self.k}, budget {self.budget:,}{reserve}: unmerged, then merged",
                ["window", "median", "p99", "merged median", "merged p99", "over", "over merged"],
                window_prompts,
            ),
            (
                f"Windows against parents ({self.parents_from or 'no sections or headings found'}), "
                f"budget {self.budget:,}",
                ["design", "unit median", "unit max", "prompt median", "prompt p99", "over budget"],
                designs,
            ),
            (
                f"Verdict: budget {self.budget:,} - reserve {self.reserve:,} - p99 prompt = margin",
                ["configuration", "margin", "verdict"],
                verdicts,
            ),
        ]


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _sizes(s: Sizes) -> list[str]:
    return [_n(s.median), _n(s.p95), _n(s.p99), _n(s.max)]


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def budget_report(
    documents: Sequence[Document] | None = None,
    *,
    index: SentenceWindowRetriever | None = None,
    queries: Sequence[str] | None = None,
    k: int = 8,
    budget: int = 16_000,
    windows: Sequence[tuple[int, int]] = ((0, 0), (1, 1), (2, 2), (4, 4), (8, 8)),
    reserve: int = 0,
    embeddings: Embeddings | None = None,
    token_counter: TokenCounter | None = None,
    cap: int | None = 256,
    pseudo_queries: int = 200,
    seed: int = 0,
    corpus_name: str = "corpus",
    progress: bool = False,
) -> CorpusReport:
    """Measure windows and parents on ``documents`` against a prompt budget.

    Args:
        documents: The corpus, embedded into a throwaway in-memory index. Parents are the
            ``sections`` in metadata where present (char offsets), else ``##`` Markdown
            sections, else none. Leave it out to measure ``index`` instead.
        index: A window retriever whose store already holds the corpus (Chroma): its
            stored sentences and vectors are read, nothing is embedded but the given
            ``queries`` (pseudo-queries search by their stored vectors); documents are
            rebuilt from the stored sentences. The sentences are the index's own (its
            splitter and cap), so ``cap`` is what the index was built with.
        queries: Questions to ask; without them, ``pseudo_queries`` sentences of the
            corpus are sampled (seeded) and the report says so.
        k: Units per query.
        budget: The prompt budget in tokens.
        windows: ``(before, after)`` pairs to sweep; all reuse one index.
        reserve: Tokens the rest of the prompt needs (system text, history, question).
        embeddings: The model; the bundled MiniLM by default.
        token_counter: Counts tokens; ``cl100k_base`` by default.
        cap: The splitter's ``max_tokens``; ``None`` measures uncapped windows.
        pseudo_queries: How many sentences to sample when no queries are given.
        seed: The sampling seed.
        corpus_name: A name for the tables.
        progress: Show progress bars while indexing and querying.

    Raises:
        ValueError: For an empty corpus or index, both or neither of ``documents`` and
            ``index``, ``k`` below 1, or a reserve that eats the budget.
    """
    from langchain_expand.stores import chroma_store

    if (documents is None) == (index is None):
        msg = "Give the report either documents (embedded here) or an index (read, not embedded), not both."
        raise ValueError(msg)
    if documents is not None and not documents:
        msg = "The corpus has no documents. Point the report at a folder of .txt/.md files or a JSON Lines file."
        raise ValueError(msg)
    if k < 1 or budget < 1 or not 0 <= reserve < budget:
        msg = f"Need k >= 1 and 0 <= reserve < budget; got k={k}, budget={budget}, reserve={reserve}."
        raise ValueError(msg)
    counter = token_counter or TokenCounter()
    started = time.perf_counter()
    if index is None:
        assert documents is not None
        splitter: Splitter = SentenceSplitter(
            max_tokens=cap, token_counter=counter, table_rows=True
        )  # as the retriever
        texts = {str(d.id): d.page_content for d in documents}
        spans = {doc_id: splitter(text) for doc_id, text in texts.items()}
        store = chroma_store(f"report-{random.Random().getrandbits(48):x}", embeddings=embeddings)
        retriever = SentenceWindowRetriever(vectorstore=store, splitter=splitter, token_counter=counter, k=k)
        plain = [Document(d.page_content, id=str(d.id)) for d in documents]
        for batch in _progress(_batches(plain, 64), "indexing", progress, len(plain) // 64 + 1):
            retriever.add_documents(batch)
    else:
        retriever = SentenceWindowRetriever(vectorstore=index.vectorstore, token_counter=counter, k=k)
        documents, spans, records = _read_index(index.vectorstore, 5000)
        retriever._vectors = _ReadOnce(index.vectorstore, records)  # the records are read already
        if not documents:
            msg = "The index holds no documents: index a corpus first, or give the report one to embed."
            raise ValueError(msg)
        texts = {str(d.id): d.page_content for d in documents}
        splitter = index.splitter
        cap = getattr(splitter, "max_tokens", cap)
    index_seconds = time.perf_counter() - started

    # 1. Sentences, with and without the cap.
    sizes = [n for doc_id, text in texts.items() for n in counter.count_many([text[s:e] for s, e in spans[doc_id]])]
    sentences = _sentence_table(texts, sizes, cap, counter, table_rows=getattr(splitter, "table_rows", False))

    # 2. One index for every window configuration.
    sweep_started = time.perf_counter()
    if queries:
        asked = list(queries)
        hits_per_query = [
            retriever.invoke(q, k=4 * k, expand=False) for q in _progress(asked, "querying", progress, len(asked))
        ]
    else:  # sentences of the corpus, searched by their stored vectors: nothing is embedded
        picked = _sample(texts, spans, sizes, pseudo_queries, seed)
        asked = [texts[d][spans[d][i][0] : spans[d][i][1]] for d, i in picked]
        hits_per_query = _matches_of_sentences(retriever, picked, 4 * k, progress)
    median_sentence = float(np.median(sizes)) if sizes else 0.0
    rows: list[WindowRow] = []
    window_samples: dict[str, tuple[list[float], list[float]]] = {}
    for before, after in windows:
        units: list[float] = []
        prompts: list[float] = []
        merged: list[float] = []
        for hits in hits_per_query:
            found = retriever.expand_hits(hits[:k], before=before, after=after)
            units += [d.metadata[TOKENS] for d in found]
            prompts.append(counter("\n\n".join(d.page_content for d in found)))
            merged.append(counter("\n\n".join(d.page_content for d in merge_overlaps(found, token_counter=counter))))
        predicted = (before + after + 1) * median_sentence
        unit = Sizes.of(units)
        rows.append(
            WindowRow(
                before=before,
                after=after,
                sentences=before + after + 1,
                unit=unit,
                predicted=predicted,
                prediction_error=(unit.median - predicted) / predicted if predicted else 0.0,
                prompt=Sizes.of(prompts),
                prompt_merged=Sizes.of(merged),
                over_budget=_over(prompts, budget - reserve),
                over_budget_merged=_over(merged, budget - reserve),
            )
        )
        window_samples[f"{before}:{after}"] = (units, prompts)
    sweep_seconds = time.perf_counter() - sweep_started

    # 3. Parents: the sections enclosing the same hits.
    parents_from, sections = _sections(documents)
    designs = [DesignRow(f"window {w.before}:{w.after}", w.unit, w.prompt, w.over_budget) for w in rows]
    samples: dict[str, dict[str, list[float]]] = {"units": {}, "prompts": {}}
    for label, (units, prompts) in window_samples.items():
        samples["units"][f"window {label}"], samples["prompts"][f"window {label}"] = units, prompts
    if sections:
        parent_units, parent_prompts = _parent_sizes(hits_per_query, sections, texts, k, counter)
        designs.append(
            DesignRow(
                f"parent ({parents_from})",
                Sizes.of(parent_units),
                Sizes.of(parent_prompts),
                _over(parent_prompts, budget - reserve),
            )
        )
        samples["units"]["parents"], samples["prompts"]["parents"] = parent_units, parent_prompts

    # 4. Verdict.
    verdicts = [
        Verdict(f"window {w.before}:{w.after}", budget - reserve - w.prompt.p99, budget - reserve - w.prompt.p99 >= 0)
        for w in rows
    ]
    verdicts += [
        Verdict(
            f"window {w.before}:{w.after} merged",
            budget - reserve - w.prompt_merged.p99,
            budget - reserve - w.prompt_merged.p99 >= 0,
        )
        for w in rows
    ]
    verdicts += [
        Verdict(d.design, budget - reserve - d.prompt.p99, budget - reserve - d.prompt.p99 >= 0)
        for d in designs
        if d.design.startswith("parent")
    ]
    return CorpusReport(
        corpus=corpus_name,
        documents=len(documents),
        queries=len(asked),
        pseudo_queries=not queries,
        k=k,
        budget=budget,
        reserve=reserve,
        sentences=sentences,
        windows=rows,
        index_seconds=round(index_seconds, 2),
        read_from_index=index is not None,
        sweep_seconds=round(sweep_seconds, 2),
        reindex_seconds_saved=0.0 if index is not None else round(index_seconds * (len(rows) - 1), 2),
        parents_from=parents_from,
        designs=designs,
        verdicts=verdicts,
        recommendation=_recommend(sentences, rows, designs, budget - reserve),
        samples=samples,
    )


def _sentence_table(
    texts: dict[str, str], sizes: list[int], cap: int | None, counter: TokenCounter, *, table_rows: bool
) -> SentenceTable:
    raw = SentenceSplitter(max_tokens=None, token_counter=counter, table_rows=table_rows)  # as indexed, uncapped
    uncapped: list[int] = []
    split_chars = total_chars = 0
    for text in texts.values():
        units = raw(text)
        counts = counter.count_many([text[s:e] for s, e in units])
        uncapped += counts
        total_chars += sum(e - s for s, e in units)
        if cap is not None:
            split_chars += sum(e - s for (s, e), n in zip(units, counts, strict=True) if n > cap)
    raw_sizes = Sizes.of(uncapped)
    warning = None
    if raw_sizes.p95 > SENTENCE_WARNING_P95:
        warning = (
            f"p95 sentence is {raw_sizes.p95:,.0f} tokens before the cap: this text is not made of real "
            "sentences, and without a cap the window bound is not a bound"
        )
    return SentenceTable(
        count=len(sizes),
        tokens=Sizes.of(sizes),
        uncapped=raw_sizes,
        cap=cap,
        capped_share=split_chars / total_chars if total_chars else 0.0,
        warning=warning,
    )


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
        texts_of = [texts[d][sections[d][i][0] : sections[d][i][1]] for d, i in chosen]
        for key, text in zip(chosen, texts_of, strict=True):
            if key not in cache:
                cache[key] = counter(text)
            units.append(cache[key])
        prompts.append(counter("\n\n".join(texts_of)))
    return units, prompts


def _over(prompts: Sequence[float], limit: int) -> float:
    return sum(p > limit for p in prompts) / len(prompts) if prompts else 0.0


def _recommend(sentences: SentenceTable, rows: list[WindowRow], designs: list[DesignRow], limit: int) -> str:
    parts = []
    if sentences.warning:
        parts.append(
            f"Sentences here are not a reliable unit ({sentences.warning}); keep the splitter's cap "
            f"(it split {sentences.capped_share:.0%} of the text) or the window sizes below do not hold."
        )
    safe = [w for w in rows if w.prompt.p99 <= limit]
    if safe:
        widest = max(safe, key=lambda w: w.sentences)
        parts.append(
            f"Windows up to {widest.before}:{widest.after} ({widest.sentences} sentences, median unit "
            f"{widest.unit.median:,.0f} tokens) keep the p99 prompt at {widest.prompt.p99:,.0f} tokens, "
            f"{limit - widest.prompt.p99:,.0f} under the budget: no query needs truncation."
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


def _batches(items: list[Document], size: int) -> list[list[Document]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _progress(items: Sequence[Any], label: str, show: bool, total: int) -> Iterable[Any]:
    """``items``, with a progress bar that advances as the caller works through them."""
    if not show:
        return items
    from rich.progress import track

    return track(items, description=label, total=total, transient=True)


def _sample(
    texts: dict[str, str], spans: dict[str, list[Span]], sizes: list[int], n: int, seed: int
) -> list[tuple[str, int]]:
    """Pseudo-queries: sentences of the corpus with at least 5 tokens, as (document, index), sampled with a seed."""
    pool = []
    at = 0
    for doc_id in texts:
        for i in range(len(spans[doc_id])):
            if sizes[at] >= 5:
                pool.append((doc_id, i))
            at += 1
    if not pool:
        msg = "The corpus has no sentence of 5 tokens or more to sample queries from; pass queries."
        raise ValueError(msg)
    return random.Random(seed).sample(pool, min(n, len(pool)))


def _matches_of_sentences(
    retriever: SentenceWindowRetriever, picked: list[tuple[str, int]], k: int, progress: bool
) -> list[list[Document]]:
    """Each picked sentence used as a query: searched by its stored vector, matches as ``expand=False`` gives."""
    store = retriever._vectors  # the retriever's own adapter: no second one to build
    vectors = {doc.id: [float(x) for x in v] for doc, v in store.with_vectors([unit_id(d, i) for d, i in picked])}
    out = []
    for d, i in _progress(picked, "querying", progress, len(picked)):
        found = store.search("", vectors[unit_id(d, i)], k)
        out.append([_match(doc, score) for doc, score in found])
    return out


def _match(record: Document, score: float) -> Document:
    m = record.metadata
    metadata = {
        DOC_ID: m[STORED_DOC],
        HIT: int(m[STORED_INDEX]),
        N_SENTENCES: int(m[STORED_COUNT]),
        START: m[STORED_START],
        END: m[STORED_END],
        SCORE: score,
    }
    return Document(record.page_content, metadata=metadata, id=record.id)


def read_index(store: VectorStore, page: int = 5000) -> tuple[list[Document], dict[str, list[Span]]]:
    """The documents a window index holds, rebuilt from its sentences, and each one's sentence spans.

    Reads the Chroma collection in pages, records only (no vectors); a document whose
    sentences are not all of its head's version (an interrupted run) is left out.
    """
    documents, spans, _ = _read_index(store, page)
    return documents, spans


def _read_index(store: VectorStore, page: int) -> tuple[list[Document], dict[str, list[Span]], dict[str, Document]]:
    """:func:`read_index`, and every sentence record read, by id."""
    collection = getattr(store, "_collection", None)
    if collection is None:
        msg = f"The report reads Chroma indexes; {type(store).__name__} cannot list its records. Give it documents."
        raise ValueError(msg)
    by_doc: dict[str, dict[int, Document]] = {}
    by_id: dict[str, Document] = {}
    for offset in itertools.count(0, page):
        got = collection.get(include=["documents", "metadatas"], limit=page, offset=offset)
        for id_, text, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
            if meta and STORED_DOC in meta:
                record = Document(text, metadata=dict(meta), id=id_)
                by_doc.setdefault(str(meta[STORED_DOC]), {})[int(meta[STORED_INDEX])] = record
                by_id[id_] = record
        if len(got["ids"]) < page:
            break
    documents: list[Document] = []
    spans: dict[str, list[Span]] = {}
    for doc_id, records in by_doc.items():
        head = records.get(0)
        if head is None:  # no committed version
            continue
        n = int(head.metadata[STORED_COUNT])
        rev = head.metadata.get(STORED_REV)
        kept = [r for r in (records.get(i) for i in range(n)) if r is not None and r.metadata.get(STORED_REV) == rev]
        if len(kept) != n:
            continue
        parts = [" " * int(kept[0].metadata[STORED_START])]
        for r in kept:  # each sentence and the whitespace after it, as they stand in the source
            parts += [r.page_content, str(r.metadata.get(STORED_GAP, ""))]
        text = "".join(parts[:-1])
        documents.append(Document(text, metadata=decode_metadata(head.metadata), id=doc_id))
        spans[doc_id] = [(int(r.metadata[STORED_START]), int(r.metadata[STORED_END])) for r in kept]
    return documents, spans, by_id


class _ReadOnce(StoreAdapter):
    """The index's store, with reads by id served from the records the report read already.

    The sweep expands every query's hits once per window configuration: a thousand reads
    of records that are in memory anyway. Searches still go to the store.
    """

    def __init__(self, store: VectorStore, records: dict[str, Document]) -> None:
        super().__init__(store)
        self.records = records

    def get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        return [self.records[i] for i in ids if i in self.records]


def write_plots(report: CorpusReport, folder: Path | str) -> list[Path]:
    """Histograms of unit and prompt sizes, one outline per window configuration and parents.

    The size axis is logarithmic: parents run to thousands of tokens where windows stay
    at tens, and on a linear axis the windows shrink to a spike. The prompt plot marks the
    budget, and the budget less the reserve where there is one.

    Returns:
        The PNG files written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in ("units", "prompts"):
        fig = plot(report, kind)
        path = out / f"{kind}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def plot(report: CorpusReport, kind: Literal["units", "prompts"]) -> Figure:
    """One figure of :func:`write_plots`: unit or prompt sizes, every design, log axis."""
    import matplotlib.pyplot as plt

    title = "Unit size (tokens)" if kind == "units" else f"Prompt size at k={report.k} (tokens)"
    series = {label: v for label, v in report.samples.get(kind, {}).items() if any(x > 0 for x in v)}
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if series:
        low = min(x for v in series.values() for x in v if x > 0)
        high = max(max(v) for v in series.values())
        if kind == "prompts":
            high = max(high, report.budget)
        bins = [float(b) for b in np.geomspace(max(low, 1.0), max(high, 2.0) * 1.05, 50)]
        for label, values in series.items():
            ax.hist([x for x in values if x > 0], bins=bins, histtype="step", linewidth=1.5, label=label)
        ax.set_xscale("log")
    if kind == "prompts":
        ax.axvline(report.budget, color="red", linestyle="--", label=f"budget {report.budget:,}")
        if report.reserve:
            limit = report.budget - report.reserve
            label = f"budget less reserve {report.reserve:,}: {limit:,} for context"
            ax.axvline(limit, color="darkred", linestyle=":", label=label)
    ax.set_xlabel(f"{title}, log scale")
    ax.set_ylabel("count")
    ax.set_title(f"{report.corpus}: {title.lower()}")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig
