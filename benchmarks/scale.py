"""Indexing and querying from 10k to 1M sentences, past the snapshot's limit.

One index grows step by step to each size in ``--sizes``: every document of ../shared/data
(all six corpora, about 200k sentences), shuffled (seed 7), then again as copies with their
own ids where a size needs more. At each size:

- **indexing**: ms per sentence of the documents added in that step, ours
  (``SentenceWindowRetriever.add_documents``, ten documents a call, hybrid: a
  ``LexicalIndex``) against a raw Chroma ``add`` of the same sentences with the same
  embeddings into a collection of its own with the same HNSW settings (the floor);
- **query**: the default ``invoke(q, max_tokens=2000)`` against ``similarity_search(q, k=16)``
  on the same Chroma, alternately query by query (:func:`common.interleaved`), p50 and p99.
  Past ``snapshot_limit`` (50,000 sentences) the query runs on the store path, BM25 ranked in
  memory once built (the seconds that took, from the first query after the last write, are
  reported; the queries are timed after it);
- **memory**: the process's resident memory after indexing and after the queries, and its peak;
- **full collections**: how many of Python's full garbage collections ran among the timed
  queries (each 60-100 ms in a process holding Chroma and LangChain: what a p99 here shows);
- **filtered** (``--filtered``, with ``--reuse``): each timed query once more, scoped to one
  document of the index (``filter={"doc_id": ...}``, a tenant's query), against
  ``similarity_search(q, k=16)`` with the same filter, once each, interleaved.

The embedding is a hashed bag of words (384 numbers, near-free), not MiniLM: MiniLM on two
cores embeds about 240 sentences a second, so a million would take hours, and what is
measured is the library's own cost beside the model's. For the same reason the ratios here are
harsher than with a real model, whose query embedding both sides pay.

Run: ``python benchmarks/scale.py [--sizes 10000 100000 1000000]``. Writes ``results/scale.json``.
``--reuse PATH`` times the queries alone on an index an earlier run grew (its report's ``index``);
``--freeze`` then freezes what the process holds after the warm-up (``gc.freeze()``), and
``--model`` embeds the query with the bundled MiniLM on both sides (:class:`ModelQueries`): what
a query costs a user with a model, on the same index; ``--filtered`` adds the filtered row.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import tempfile
import time
import zlib
from pathlib import Path

import chromadb
import numpy as np
from common import interleaved, machine, pct, ranked_in_memory, read  # type: ignore[import-not-found]
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand import LexicalIndex, SentenceWindowRetriever, chroma_store
from langchain_expand.store.defaults import EF_CONSTRUCTION, EF_SEARCH
from langchain_expand.store.words import words

HERE = Path(__file__).resolve().parent
BUDGET = 2000
CORPORA = ("qmsum", "emanual", "friendsqa", "tatqa", "loghub", "fastapi-docs")
DIMENSIONS = 384


class HashedWords(Embeddings):
    """A bag of words hashed into 384 numbers, normalised: deterministic and near-free."""

    def _vector(self, text: str) -> list[float]:
        vector = np.zeros(DIMENSIONS, dtype=np.float32)
        for word in words(text):
            vector[zlib.crc32(word.encode()) % DIMENSIONS] += 1.0
        norm = float(np.linalg.norm(vector))
        return (vector / norm if norm else vector).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


class ModelQueries(Embeddings):
    """Queries embedded by the bundled MiniLM, documents by :class:`HashedWords` (both 384 numbers).

    The index's sentences are hashed words, so a query's answers mean nothing here; what it
    costs does not depend on them: the model's embedding (which BM25 ranks beside), the store's
    search over the same graph, and ours after it.
    """

    def __init__(self) -> None:
        from langchain_expand import default_embeddings

        self._model = default_embeddings()
        self._documents = HashedWords()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._documents.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._model.embed_query(text)


def rss_mb() -> float:
    """This process's resident memory now."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def documents() -> tuple[list[dict], list[str]]:
    """Every shared document, shuffled, and queries drawn from every corpus that has them."""
    docs = [d for name in CORPORA for d in read(name, "docs.jsonl.gz")]
    random.Random(7).shuffle(docs)
    queries = [
        q["query"] for name in CORPORA if name not in ("loghub", "fastapi-docs") for q in read(name, "queries.jsonl.gz")
    ]
    return docs, random.Random(7).sample(queries, 45)


def copies(docs: list[dict]):  # type: ignore[no-untyped-def]
    """The documents, then copies of them under ids of their own, without end."""
    for n in range(10**6):
        for d in docs:
            yield d if n == 0 else {**d, "doc_id": f"{d['doc_id']}#copy{n}"}


def queried(
    retriever: SentenceWindowRetriever, queries: list[str], passes: int, freeze: bool = False, filtered: bool = False
) -> dict:
    """The default query against the raw search on the same store, p50 and p99, and memory after.

    With ``freeze``, ``gc.freeze()`` after the warm-up (docs/deployment.md): what the process
    holds then is left out of every later collection.
    """
    warmup, timed = queries[:5], queries[5:]
    store = retriever.vectorstore
    built = ranked_in_memory(retriever, warmup, BUDGET)
    if freeze:
        gc.collect()
        gc.freeze()

    def raw(q: str) -> object:
        return store.similarity_search(q, k=16)

    def ours(q: str) -> object:
        return retriever.invoke(q, max_tokens=BUDGET)

    for q in warmup:
        raw(q)
    gc.collect()  # what opening or indexing left for the collector, as latency.py does: not in a timed query
    full = gc.get_stats()[2]["collections"]
    ours_t, raw_t = interleaved(ours, raw, timed, passes)
    row = {
        "bm25_in_memory_built_s": built,
        "full_collections": gc.get_stats()[2]["collections"] - full,
        "raw_p50_ms": round(pct(raw_t, 50) * 1000, 1),
        "raw_p99_ms": round(pct(raw_t, 99) * 1000, 1),
        "p50_ms": round(pct(ours_t, 50) * 1000, 1),
        "p99_ms": round(pct(ours_t, 99) * 1000, 1),
        "rss_after_queries_mb": round(rss_mb()),
        "peak_mb": round(peak_mb()),
    }
    row["p50_ratio"] = round(row["p50_ms"] / row["raw_p50_ms"], 2)
    row["p99_ratio"] = round(row["p99_ms"] / row["raw_p99_ms"], 2)
    if filtered:
        row["filtered"] = filtered_timings(retriever, timed)
    return row


def filtered_timings(retriever: SentenceWindowRetriever, timed: list[str]) -> dict:
    """Each query scoped to one document (seed 7), ours against the raw filtered search, p50 and p99."""
    assert retriever.lexical is not None
    store = retriever.vectorstore
    doc_ids = sorted(retriever.lexical.documents())
    scope = {q: random.Random(f"7{q}").choice(doc_ids) for q in timed}

    def raw(q: str) -> object:  # a record names its document lcx_doc: the retriever renames doc_id so
        return store.similarity_search(q, k=16, filter={"lcx_doc": scope[q]})

    def ours(q: str) -> object:
        return retriever.invoke(q, max_tokens=BUDGET, filter={"doc_id": scope[q]})

    ours_t, raw_t = interleaved(ours, raw, timed, 1)
    found = {
        m: (round(pct(t, 50) * 1000, 1), round(pct(t, 99) * 1000, 1)) for m, t in (("ours", ours_t), ("raw", raw_t))
    }
    return {
        "raw_p50_ms": found["raw"][0],
        "raw_p99_ms": found["raw"][1],
        "p50_ms": found["ours"][0],
        "p99_ms": found["ours"][1],
        "p50_ratio": round(found["ours"][0] / found["raw"][0], 2),
        "p99_ratio": round(found["ours"][1] / found["raw"][1], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--passes", type=int, default=2, help="times each of the 40 timed queries is run")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "scale.json")
    parser.add_argument(
        "--reuse", type=Path, help="an index an earlier run grew (its report's 'index'): time the queries on it alone"
    )
    parser.add_argument("--freeze", action="store_true", help="with --reuse: gc.freeze() after the warm-up")
    parser.add_argument("--model", action="store_true", help="with --reuse: queries embedded by the bundled MiniLM")
    parser.add_argument("--filtered", action="store_true", help="with --reuse: each query scoped to one document too")
    args = parser.parse_args()
    if args.model and not args.reuse:
        parser.error("--model times queries on an index grown before: give --reuse PATH")
    docs, queries = documents()
    embeddings: Embeddings = ModelQueries() if args.model else HashedWords()
    path = str(args.reuse) if args.reuse else tempfile.mkdtemp()
    store = chroma_store("scale", persist_directory=path, embeddings=embeddings)
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(Path(path) / "lexical.sqlite"))
    report: dict = {"machine": machine(), "embedding": "hashed words, 384 numbers", "index": path, "sizes": []}
    if args.reuse:
        assert retriever.lexical is not None
        row: dict = {"sentences": retriever.lexical.count(), "rss_after_opening_mb": round(rss_mb())}
        row["query_embedding"] = "MiniLM" if args.model else "hashed words"
        row.update(queried(retriever, queries, args.passes, freeze=args.freeze, filtered=args.filtered))
        print(json.dumps(row), flush=True)
        return
    # The floor's HNSW graph is built as chroma_store builds ours (cosine, its construction
    # beam), so the ratio is the library's own work, not a choice of index settings.
    floor = chromadb.PersistentClient(tempfile.mkdtemp()).create_collection(
        "floor", configuration={"hnsw": {"space": "cosine", "ef_construction": EF_CONSTRUCTION, "ef_search": EF_SEARCH}}
    )
    step = floor._client.get_max_batch_size()
    stream = copies(docs)
    held = 0
    for size in sorted(args.sizes):
        ours_s = floor_s = 0.0
        added = 0
        while held < size:
            batch = [next(stream) for _ in range(10)]
            started = time.perf_counter()
            retriever.add_documents([Document(d["text"], id=d["doc_id"]) for d in batch])
            ours_s += time.perf_counter() - started
            sentences = [
                (d["doc_id"], i, d["text"][s:e])
                for d in batch
                for i, (s, e) in enumerate(retriever.splitter(d["text"]))
            ]
            started = time.perf_counter()
            vectors = embeddings.embed_documents([t for _, _, t in sentences])
            for at in range(0, len(sentences), step):
                chunk = sentences[at : at + step]
                floor.add(
                    ids=[f"{d}::{i}" for d, i, _ in chunk],
                    embeddings=vectors[at : at + step],  # type: ignore[arg-type]
                    documents=[t for _, _, t in chunk],
                )
            floor_s += time.perf_counter() - started
            added += len(sentences)
            held += len(sentences)
        row: dict = {
            "sentences": held,
            "snapshot": held <= retriever.performance.snapshot_limit,
            "index_ms_per_sentence": round(ours_s / added * 1000, 3),
            "floor_ms_per_sentence": round(floor_s / added * 1000, 3),
            "index_vs_floor": round(ours_s / floor_s, 2),
            "rss_after_indexing_mb": round(rss_mb()),
        }
        row.update(queried(retriever, queries, args.passes))
        report["sizes"].append(row)
        print(json.dumps(row), flush=True)
        args.out.parent.mkdir(exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
