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
import json
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand.sections import MarkdownSectionSplitter, SectionSplitter
from langchain_expand.sentences import SentenceSplitter, Span
from langchain_expand.spans import merge_overlaps
from langchain_expand.tokens import TokenCounter
from langchain_expand.units import DOC_ID, SECTIONS, START, TOKENS
from langchain_expand.windows import SentenceWindowRetriever

__all__ = ["CorpusReport", "budget_report", "write_plots"]

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
    parents_from: str | None
    designs: list[DesignRow]
    verdicts: list[Verdict]
    recommendation: str
    samples: dict[str, list[float]] = field(default_factory=dict, repr=False)
    plotted_window: str = field(default="2:2", repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain data, without the raw samples."""
        data = asdict(self)
        data.pop("samples")
        data.pop("plotted_window")
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

    def print_rich(self) -> None:
        """The tables in the terminal, with rich."""
        from rich.console import Console
        from rich.table import Table

        console = Console()
        for title, header, rows in self._tables():
            table = Table(title=title, title_justify="left")
            for name in header:
                table.add_column(name, justify="right" if name not in ("design", "configuration") else "left")
            for row in rows:
                table.add_row(*row)
            console.print(table)
        console.print(f"[bold]Recommendation.[/bold] {self.recommendation}")

    def _tables(self) -> list[tuple[str, list[str], list[list[str]]]]:
        s = self.sentences
        source = "pseudo-queries sampled from the corpus" if self.pseudo_queries else "queries"
        sentence_rows = [
            ["with the cap", f"{s.count:,}", *_sizes(s.tokens), f"{s.capped_share:.1%}"],
            ["without a cap", "", *_sizes(s.uncapped), ""],
        ]
        windows = [
            [
                f"{w.before}:{w.after}",
                str(w.sentences),
                *_sizes(w.unit)[0:1],
                *_sizes(w.unit)[2:],
                f"{w.predicted:,.0f}",
                f"{w.prediction_error:+.0%}",
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
                f"Radius sweep: k={self.k}, {self.queries} {source}, one index "
                f"(embedded once in {self.index_seconds:.1f}s; the sweep took {self.sweep_seconds:.1f}s, "
                f"re-indexing per radius would have cost {self.reindex_seconds_saved:.0f}s more)",
                [
                    "before:after",
                    "sentences",
                    "unit median",
                    "unit p99",
                    "unit max",
                    "predicted",
                    "error",
                    "prompt median",
                    "prompt p99",
                    "merged median",
                    "merged p99",
                    "over budget",
                    "over (merged)",
                ],
                windows,
            ),
            (
                f"Windows against parents ({self.parents_from or 'no sections or headings found'}), "
                f"budget {self.budget:,}",
                ["design", "unit median", "unit max", "prompt median", "prompt p99", "over budget"],
                designs,
            ),
            (
                f"Verdict: budget {self.budget:,} - reserve {self.reserve:,} - p99 prompt",
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
    documents: Sequence[Document],
    *,
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
        documents: The corpus. Parents are the ``sections`` in metadata where present
            (char offsets), else ``##`` Markdown sections, else none.
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
        ValueError: For an empty corpus, ``k`` below 1, or a reserve that eats the budget.
    """
    from langchain_expand.stores import chroma_store

    if not documents:
        msg = "The corpus has no documents. Point the report at a folder of .txt/.md files or a JSON Lines file."
        raise ValueError(msg)
    if k < 1 or budget < 1 or not 0 <= reserve < budget:
        msg = f"Need k >= 1 and 0 <= reserve < budget; got k={k}, budget={budget}, reserve={reserve}."
        raise ValueError(msg)
    counter = token_counter or TokenCounter()
    splitter = SentenceSplitter(max_tokens=cap, token_counter=counter)
    texts = {str(d.id): d.page_content for d in documents}

    # 1. Sentences, with and without the cap.
    spans = {doc_id: splitter(text) for doc_id, text in texts.items()}
    sizes = [n for doc_id, text in texts.items() for n in counter.count_many([text[s:e] for s, e in spans[doc_id]])]
    sentences = _sentence_table(texts, sizes, cap, counter)

    # 2. One index for every window configuration.
    store = chroma_store(f"report-{random.Random().getrandbits(48):x}", embeddings=embeddings)
    retriever = SentenceWindowRetriever(vectorstore=store, splitter=splitter, token_counter=counter, k=k)
    started = time.perf_counter()
    plain = [Document(d.page_content, id=str(d.id)) for d in documents]
    for batch in _progress(_batches(plain, 64), "indexing", progress, len(plain) // 64 + 1):
        retriever.add_documents(batch)
    index_seconds = time.perf_counter() - started

    asked = list(queries) if queries else _sample(texts, spans, sizes, pseudo_queries, seed)
    sweep_started = time.perf_counter()
    hits_per_query = [
        retriever.invoke(q, k=4 * k, expand=False) for q in _progress(asked, "querying", progress, len(asked))
    ]
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
    samples: dict[str, list[float]] = {}
    chosen = _reference_window(rows)
    samples["window_units"], samples["window_prompts"] = window_samples[f"{chosen.before}:{chosen.after}"]
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
        samples["parent_units"], samples["parent_prompts"] = parent_units, parent_prompts

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
        sweep_seconds=round(sweep_seconds, 2),
        reindex_seconds_saved=round(index_seconds * (len(rows) - 1), 2),
        parents_from=parents_from,
        designs=designs,
        verdicts=verdicts,
        recommendation=_recommend(sentences, rows, designs, budget - reserve),
        samples=samples,
        plotted_window=f"{chosen.before}:{chosen.after}",
    )


def _sentence_table(texts: dict[str, str], sizes: list[int], cap: int | None, counter: TokenCounter) -> SentenceTable:
    raw = SentenceSplitter(max_tokens=None, token_counter=counter)
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


def _reference_window(rows: list[WindowRow]) -> WindowRow:
    for row in rows:
        if (row.before, row.after) == (2, 2):
            return row
    return rows[len(rows) // 2]


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


def _sample(texts: dict[str, str], spans: dict[str, list[Span]], sizes: list[int], n: int, seed: int) -> list[str]:
    """Pseudo-queries: sentences of the corpus with at least 5 tokens, sampled with a seed."""
    pool = []
    at = 0
    for doc_id, text in texts.items():
        for s, e in spans[doc_id]:
            if sizes[at] >= 5:
                pool.append(text[s:e])
            at += 1
    if not pool:
        msg = "The corpus has no sentence of 5 tokens or more to sample queries from; pass queries."
        raise ValueError(msg)
    return random.Random(seed).sample(pool, min(n, len(pool)))


def write_plots(report: CorpusReport, folder: Path | str) -> list[Path]:
    """Histograms of unit and prompt sizes for windows and parents, budget line drawn.

    Returns:
        The PNG files written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    limit = report.budget - report.reserve
    for kind, title in (("units", "Unit size (tokens)"), ("prompts", f"Prompt size at k={report.k} (tokens)")):
        fig, ax = plt.subplots(figsize=(7, 4))
        for design, label in (("window", f"windows {report.plotted_window}"), ("parent", "parents")):
            values = report.samples.get(f"{design}_{kind}")
            if values:
                ax.hist(values, bins=40, alpha=0.6, label=label)
        if kind == "prompts":
            ax.axvline(limit, color="red", linestyle="--", label=f"budget {limit:,}")
        ax.set_xlabel(title)
        ax.set_ylabel("count")
        ax.set_title(f"{report.corpus}: {title.lower()}")
        ax.legend()
        path = out / f"{kind}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
