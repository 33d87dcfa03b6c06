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

import random
import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand.merge import merge_overlaps
from langchain_expand.prompt import context_tokens
from langchain_expand.store.adapters import adapt
from langchain_expand.store.records import sentence_span, unit_id
from langchain_expand.text.sentences import SentenceSplitter, Span, Splitter
from langchain_expand.text.tokens import TokenCounter
from langchain_expand.tools.report.index import read_once, read_records
from langchain_expand.tools.report.tables import (
    SENTENCE_WARNING_P95,
    CorpusReport,
    DesignRow,
    SentenceTable,
    Sizes,
    WindowRow,
)
from langchain_expand.tools.report.verdict import designs_of, recommend, share_over, verdicts_of
from langchain_expand.units import (
    DOC_ID,
    END,
    HIT,
    N_SENTENCES,
    SCORE,
    START,
    STORED_COUNT,
    STORED_DOC,
    STORED_INDEX,
    STORED_START,
    TOKENS,
)
from langchain_expand.windows.retriever import SentenceWindowRetriever

__all__ = ["budget_report"]


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
        documents: The corpus, embedded into a throwaway index; parents are its ``sections``
            metadata (char offsets), else its ``##`` sections. Leave it out to measure ``index``.
        index: A window retriever whose store holds the corpus: its stored sentences and
            vectors are read and nothing is embedded but ``queries``; documents and their
            sentences are the index's own (so is ``cap``).
        queries: Questions to ask; else ``pseudo_queries`` sampled sentences (the report says so).
        k: Units per query.
        budget: The prompt budget in tokens.
        windows: ``(before, after)`` pairs to sweep; all reuse one index.
        reserve: Tokens the rest of the prompt needs (system text, history, question).
        embeddings: The model; the bundled MiniLM by default.
        token_counter: Counts tokens; ``cl100k_base`` by default.
        cap: The splitter's ``max_unit_tokens``; ``None`` measures uncapped windows.
        pseudo_queries: How many sentences to sample when no queries are given.
        seed: The sampling seed.
        corpus_name: A name for the tables.
        progress: Show progress bars while indexing and querying.

    Raises:
        ValueError: For an empty corpus or index, both or neither of ``documents`` and
            ``index``, ``k`` below 1, or a reserve that eats the budget.
    """
    _check_arguments(documents, index, k, budget, reserve)
    counter = token_counter or TokenCounter()
    room = budget - reserve
    retriever, documents, spans, cap, index_seconds = _source(documents, index, embeddings, counter, cap, k, progress)
    texts = {str(d.id): d.page_content for d in documents}
    # 1. Sentences, with and without the cap.
    sizes = [n for doc_id, text in texts.items() for n in counter.count_many([text[s:e] for s, e in spans[doc_id]])]
    sentences = _sentence_table(texts, sizes, cap, counter, table_rows=getattr(retriever.splitter, "table_rows", False))
    # 2. One index for every window configuration.
    started = time.perf_counter()
    asked, hits_per_query = _asked(retriever, queries, texts, spans, sizes, 4 * k, pseudo_queries, seed, progress)
    rows, samples = _window_rows(retriever, hits_per_query, windows, k, counter, _median(sizes), room)
    swept = _Swept(sentences, rows, samples, len(asked), time.perf_counter() - started, index_seconds)
    # 3. Parents: the sections enclosing the same hits.
    parents_from, designs = designs_of(rows, documents, hits_per_query, texts, k, counter, room, samples)
    settings = {"corpus": corpus_name, "documents": len(documents), "k": k, "budget": budget, "reserve": reserve}
    return _corpus_report(settings, swept, parents_from, designs, pseudo=not queries, read=index is not None)


class _Swept(NamedTuple):
    """What the window sweep measured."""

    sentences: SentenceTable
    rows: list[WindowRow]
    samples: dict[str, dict[str, list[float]]]
    queries: int
    seconds: float
    index_seconds: float


def _corpus_report(
    settings: dict[str, Any],
    swept: _Swept,
    parents_from: str | None,
    designs: list[DesignRow],
    *,
    pseudo: bool,
    read: bool,
) -> CorpusReport:
    """The report of one run: its ``settings`` (corpus, documents, k, budget, reserve), the sweep and the parents."""
    room = settings["budget"] - settings["reserve"]
    return CorpusReport(
        **settings,
        queries=swept.queries,
        pseudo_queries=pseudo,
        sentences=swept.sentences,
        windows=swept.rows,
        index_seconds=round(swept.index_seconds, 2),
        read_from_index=read,
        sweep_seconds=round(swept.seconds, 2),
        reindex_seconds_saved=0.0 if read else round(swept.index_seconds * (len(swept.rows) - 1), 2),
        parents_from=parents_from,
        designs=designs,
        verdicts=verdicts_of(swept.rows, designs, room),
        recommendation=recommend(swept.sentences, swept.rows, designs, room),
        samples=swept.samples,
    )


def _check_arguments(
    documents: Sequence[Document] | None, index: SentenceWindowRetriever | None, k: int, budget: int, reserve: int
) -> None:
    if (documents is None) == (index is None):
        msg = "Give the report either documents (embedded here) or an index (read, not embedded), not both."
        raise ValueError(msg)
    if documents is not None and not documents:
        msg = "The corpus has no documents. Point the report at a folder of .txt/.md files or a JSON Lines file."
        raise ValueError(msg)
    if k < 1 or budget < 1 or not 0 <= reserve < budget:
        msg = f"Need k >= 1 and 0 <= reserve < budget; got k={k}, budget={budget}, reserve={reserve}."
        raise ValueError(msg)


def _source(
    documents: Sequence[Document] | None,
    index: SentenceWindowRetriever | None,
    embeddings: Embeddings | None,
    counter: TokenCounter,
    cap: int | None,
    k: int,
    progress: bool,
) -> tuple[SentenceWindowRetriever, Sequence[Document], dict[str, list[Span]], int | None, float]:
    """The retriever to measure, the corpus, each document's spans, their cap, and the seconds taken."""
    started = time.perf_counter()
    if index is None:
        assert documents is not None
        retriever, spans = _embedded(documents, embeddings, counter, cap, k, progress)
    else:
        retriever, documents, spans = _read(index, counter, k)
        cap = getattr(index.splitter, "max_unit_tokens", cap)
    return retriever, documents, spans, cap, time.perf_counter() - started


def _median(sizes: list[int]) -> float:
    return float(np.median(sizes)) if sizes else 0.0


def _embedded(
    documents: Sequence[Document],
    embeddings: Embeddings | None,
    counter: TokenCounter,
    cap: int | None,
    k: int,
    progress: bool,
) -> tuple[SentenceWindowRetriever, dict[str, list[Span]]]:
    """A throwaway in-memory index of ``documents``, split as the retriever splits, and each one's spans."""
    from langchain_expand.store.defaults import chroma_store

    splitter: Splitter = SentenceSplitter(max_unit_tokens=cap, token_counter=counter, table_rows=True)
    spans = {str(d.id): splitter(d.page_content) for d in documents}
    store = chroma_store(f"report-{random.Random().getrandbits(48):x}", embeddings=embeddings)
    retriever = SentenceWindowRetriever(vectorstore=store, splitter=splitter, token_counter=counter, k=k)
    plain = [Document(d.page_content, id=str(d.id)) for d in documents]
    for batch in _progress(_batches(plain, 64), "indexing", progress, len(plain) // 64 + 1):
        retriever.add_documents(batch)
    return retriever, spans


def _read(
    index: SentenceWindowRetriever, counter: TokenCounter, k: int
) -> tuple[SentenceWindowRetriever, list[Document], dict[str, list[Span]]]:
    """A retriever on ``index``'s store, the documents rebuilt from it, and each one's spans."""
    documents, spans, records = read_records(index.vectorstore, 5000)
    store = read_once(index.vectorstore, records)  # the records are read already
    retriever = SentenceWindowRetriever(vectorstore=store, splitter=index.splitter, token_counter=counter, k=k)
    if not documents:
        msg = "The index holds no documents: index a corpus first, or give the report one to embed."
        raise ValueError(msg)
    return retriever, documents, spans


def _asked(
    retriever: SentenceWindowRetriever,
    queries: Sequence[str] | None,
    texts: dict[str, str],
    spans: dict[str, list[Span]],
    sizes: list[int],
    k: int,
    pseudo_queries: int,
    seed: int,
    progress: bool,
) -> tuple[list[str], list[list[Document]]]:
    """The queries asked and each one's ``k`` matched sentences.

    Without ``queries``, sentences of the corpus sampled (seeded) and searched by their stored
    vectors: nothing is embedded.
    """
    if queries:
        asked = list(queries)
        found = [retriever.invoke(q, k=k, expand=False) for q in _progress(asked, "querying", progress, len(asked))]
        return asked, found
    picked = _sample(texts, spans, sizes, pseudo_queries, seed)
    asked = [texts[d][spans[d][i][0] : spans[d][i][1]] for d, i in picked]
    return asked, _matches_of_sentences(retriever, picked, k, progress)


def _window_rows(
    retriever: SentenceWindowRetriever,
    hits_per_query: list[list[Document]],
    windows: Sequence[tuple[int, int]],
    k: int,
    counter: TokenCounter,
    median_sentence: float,
    room: int,
) -> tuple[list[WindowRow], dict[str, dict[str, list[float]]]]:
    """Each window configuration's unit and prompt sizes over the same hits, and the samples plotted."""
    rows: list[WindowRow] = []
    samples: dict[str, dict[str, list[float]]] = {"units": {}, "prompts": {}}
    for before, after in windows:
        units: list[float] = []
        prompts: list[float] = []
        merged: list[float] = []
        for hits in hits_per_query:
            found = retriever.expand_hits(hits[:k], before=before, after=after, merge=False)  # merged below
            units += [d.metadata[TOKENS] for d in found]
            prompts.append(context_tokens(found, counter))
            merged.append(context_tokens(merge_overlaps(found, token_counter=counter), counter))
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
                over_budget=share_over(prompts, room),
                over_budget_merged=share_over(merged, room),
            )
        )
        samples["units"][f"window {before}:{after}"] = units
        samples["prompts"][f"window {before}:{after}"] = prompts
    return rows, samples


def _sentence_table(
    texts: dict[str, str], sizes: list[int], cap: int | None, counter: TokenCounter, *, table_rows: bool
) -> SentenceTable:
    raw = SentenceSplitter(max_unit_tokens=None, token_counter=counter, table_rows=table_rows)  # as indexed, uncapped
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
    store = adapt(retriever.vectorstore, "The report")
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
        END: sentence_span(record)[1],
        SCORE: score,
    }
    return Document(record.page_content, metadata=metadata, id=record.id)
