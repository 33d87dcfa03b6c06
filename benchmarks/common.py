"""Shared helpers for the benchmarks. They read ../shared/data (the shared corpora)."""

from __future__ import annotations

import gzip
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def read(corpus: str, name: str) -> list[dict]:
    with gzip.open(SHARED / corpus / name, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def qmsum_meetings(meetings: int) -> tuple[list[dict], list[dict]]:
    """The first ``meetings`` QMSum meetings that have queries (in file order), and their queries."""
    queries = read("qmsum", "queries.jsonl.gz")
    with_queries = {q["doc_id"] for q in queries}
    docs = [d for d in read("qmsum", "docs.jsonl.gz") if d["doc_id"] in with_queries][:meetings]
    ids = {d["doc_id"] for d in docs}
    return docs, [q for q in queries if q["doc_id"] in ids]


def corpora(meetings: int) -> dict[str, tuple[list[dict], list[dict]]]:
    """QMSum (the meetings of the first queries, in query order) and both E-Manuals, with queries."""
    queries = read("qmsum", "queries.jsonl.gz")
    ids = list(dict.fromkeys(q["doc_id"] for q in queries))[:meetings]
    return {
        "qmsum": (
            [d for d in read("qmsum", "docs.jsonl.gz") if d["doc_id"] in ids],
            [q for q in queries if q["doc_id"] in ids],
        ),
        "emanual": (read("emanual", "docs.jsonl.gz"), read("emanual", "queries.jsonl.gz")),
    }


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else 0.0


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "median": float(statistics.median(values)) if values else 0.0,
        "p95": pct(values, 95),
        "p99": pct(values, 99),
        "max": float(max(values)) if values else 0.0,
    }


def covered(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of half-open ranges, sorted and disjoint."""
    out: list[list[int]] = []
    for s, e in sorted(ranges):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    total = 0
    for s, e in a:
        for t, u in b:
            total += max(0, min(e, u) - max(s, t))
    return total


def evidence_recall(gold: list[list[int]], returned: list[tuple[int, int]]) -> float:
    """The share of gold characters that the returned spans cover."""
    gold_ranges = covered((s, e) for s, e in gold)
    size = sum(e - s for s, e in gold_ranges)
    return overlap(gold_ranges, covered(returned)) / size if size else 0.0


def machine() -> str:
    import os

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def floor_seconds(docs: list[dict], embeddings: object | None = None) -> tuple[float, int]:
    """The floor every design pays: our sentences through a raw encode and a raw Chroma add.

    ``embeddings`` is the model to encode with (the bundled MiniLM on the CPU by default).

    Returns:
        The seconds it took and the number of sentences.
    """
    import chromadb

    from langchain_expand import SentenceSplitter, default_embeddings

    splitter = SentenceSplitter()
    sentences = [d["text"][s:e] for d in docs for s, e in splitter(d["text"])]
    model = embeddings or default_embeddings()

    def run() -> None:
        vectors = model.embed_documents(sentences)  # type: ignore[attr-defined]
        collection = chromadb.PersistentClient(tempfile.mkdtemp()).create_collection("floor")
        step = collection._client.get_max_batch_size()
        for at in range(0, len(sentences), step):
            collection.add(
                ids=[str(i) for i in range(at, min(at + step, len(sentences)))],
                embeddings=vectors[at : at + step],
                documents=sentences[at : at + step],
            )

    return timed(run), len(sentences)


def interleaved(
    ours: Callable[[str], object],
    raw: Callable[[str], object],
    queries: Sequence[str],
    passes: int,
    before: Callable[[], object] | None = None,
) -> tuple[list[float], list[float]]:
    """Seconds of each call of ``ours`` and of ``raw`` on ``queries``, ``passes`` times over.

    ``before`` runs, untimed, before each query's pair (emptying a cache, say).

    The two alternate query by query, each first on every other query, so neither always
    finds the machine as the other left it; several passes make the tails steadier on a
    shared machine, whose bursts of load hit a single pass unevenly.
    """
    ours_t: list[float] = []
    raw_t: list[float] = []
    for n, query in enumerate(list(queries) * passes):
        if before is not None:
            before()
        for which in ("raw", "ours") if n % 2 else ("ours", "raw"):
            fn = raw if which == "raw" else ours
            started = time.perf_counter()
            fn(query)
            (raw_t if which == "raw" else ours_t).append(time.perf_counter() - started)
    return ours_t, raw_t


def latency(fn: Callable[[str, str], object], raw: Callable[[str, str], object], queries: list[dict]) -> dict:
    """p50 and p99 of ``fn`` over those of ``raw``, the two run alternately on each query."""
    ours_t, raw_t = [], []
    for q in queries:
        raw_t.append(timed(lambda q=q: raw(q["query"], q["doc_id"])))
        ours_t.append(timed(lambda q=q: fn(q["query"], q["doc_id"])))
    return {
        "p50_vs_raw_search": round(statistics.median(ours_t) / statistics.median(raw_t), 2),
        "p99_vs_raw_search": round(pct(ours_t, 99) / pct(raw_t, 99), 2),
        "raw_p50_ms": round(1000 * statistics.median(raw_t), 1),
    }


def ranked_in_memory(retriever: Any, warmup: Sequence[str], budget: int) -> float:
    """Seconds to build what ``retriever`` holds in memory at its store's mark; then ``warmup`` is asked.

    ``retriever`` is a ``SentenceWindowRetriever``. The first query after a write would start the
    build beside the queries (the store and the index answer until it is done); ``warm`` builds it
    first, so the warm-up and the timed queries after it run in the steady state.
    """
    started = time.perf_counter()
    retriever.warm()
    built = round(time.perf_counter() - started, 1)
    for q in warmup:
        retriever.invoke(q, max_tokens=budget)
    return built


def exact_search(retriever: Any) -> Any:
    """``retriever`` (on Chroma) with its store searched exactly: every vector it holds measured against the query.

    As the store measures (float32, its space: :func:`similarity.distances`), every record scored:
    what an index's misses decide is decided here by the distances alone. Ties (to ``TIES``
    decimals) go by document id, then position: every path's rule (``tie_key``). A ``filter``
    keeps the records it passes, as Chroma decides (:func:`filters.matches`); any other argument
    is refused, so no search is exact in name only.
    """
    from langchain_expand.store import filters, similarity
    from langchain_expand.store.adapters.ties import TIES, tie_key

    got = retriever.vectorstore._collection.get(include=["embeddings", "metadatas"])
    ids, matrix, metas = got["ids"], np.asarray(got["embeddings"], dtype=np.float32), got["metadatas"]
    adapter = retriever._vectors

    def search_ids(vector: Sequence[float], k: int, **kwargs: Any) -> list[tuple[str, float]]:
        where = kwargs.pop("filter", None)
        if kwargs:
            msg = f"exact_search takes only `filter`, got {sorted(kwargs)}"
            raise TypeError(msg)
        q = np.asarray(vector, dtype=np.float32)
        found = similarity.distances(*similarity.measured(matrix, q), q, adapter.space or "cosine").tolist()
        kept = [(i, d) for i, d, m in zip(ids, found, metas, strict=True) if where is None or filters.matches(where, m)]
        kept.sort(key=lambda pair: (round(pair[1], TIES), tie_key(pair[0])))
        return [(i, adapter.relevance(d)) for i, d in kept[:k]]

    object.__setattr__(adapter, "search_ids", search_ids)
    return retriever
