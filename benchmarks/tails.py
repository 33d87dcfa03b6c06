"""Where a slow query's time goes: Python's full garbage collections, timed against each query.

The latency check showed one query of 70-340 ms in most runs, in a different corpus and mode
each time, that takes 20 ms when run again alone. This script times each default query in the
three modes of ``latency.py`` and every garbage collection that runs inside it, prints the slow
ones, and counts the objects each query promotes to the collector's oldest generation (a full
collection runs once the objects promoted since the last one reach a quarter of those it
holds: about 140,000 here, where the model, Chroma and LangChain leave ~560,000).

- ``--collect``: one full collection after the warm-up, as ``latency.py`` does. Indexing leaves
  tens of thousands of objects promoted; without it, the first full collection they trigger
  lands in whichever query comes next, ours or the raw search's.
- ``--freeze``: ``gc.freeze()`` after the warm-up, as a service may once its model is loaded.

Run: ``python benchmarks/tails.py emanual tatqa [--collect | --freeze]``.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path

from common import ranked_in_memory  # type: ignore[import-not-found]
from langchain_core.documents import Document
from latency import BUDGET, MODES, sliced  # type: ignore[import-not-found]

from langchain_expand import LexicalIndex, SentenceWindowRetriever, chroma_store, default_embeddings

SLOW_MS = 45.0
"""A query slower than this is listed, with the collections that ran inside it."""

collections: list[tuple[float, int, float]] = []
"""Each collection's end, generation and seconds."""


def _timed_collections(phase: str, info: dict) -> None:
    if phase == "start":
        _timed_collections.started = time.perf_counter()  # type: ignore[attr-defined]
    else:
        now = time.perf_counter()
        collections.append((now, info["generation"], now - _timed_collections.started))  # type: ignore[attr-defined]


def promoted_per_query(ours: SentenceWindowRetriever, queries: list[str]) -> float:
    """Objects the queries move into the oldest generation, a query (counted after ``gc.freeze()``)."""
    gc.collect()
    gc.freeze()
    seen: set[int] = set()

    def count(phase: str, info: dict) -> None:
        if phase == "stop" and info["generation"] >= 1:
            seen.update(id(o) for o in gc.get_objects(generation=2))

    gc.callbacks.append(count)
    try:
        for q in queries:
            ours.invoke(q, max_tokens=BUDGET)
    finally:
        gc.callbacks.remove(count)
        gc.unfreeze()
    return len(seen) / len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="+")
    settle = parser.add_mutually_exclusive_group()
    settle.add_argument("--collect", action="store_true", help="gc.collect() after the warm-up")
    settle.add_argument("--freeze", action="store_true", help="gc.freeze() after the warm-up")
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    embeddings = default_embeddings()
    gc.callbacks.append(_timed_collections)
    for name in args.corpora:
        docs, queries = sliced(name, 45)
        warmup, timed = queries[:5], queries[5:]
        path = tempfile.mkdtemp()
        store = chroma_store(name, persist_directory=path, embeddings=embeddings)
        lexical = LexicalIndex(Path(path) / "lexical.sqlite")
        SentenceWindowRetriever(vectorstore=store, lexical=lexical).add_documents(
            [Document(d["text"], id=d["doc_id"]) for d in docs]
        )
        for mode, settings in MODES.items():
            own = chroma_store(name, persist_directory=path, embeddings=embeddings)  # no mode's memory shared
            ours = SentenceWindowRetriever(vectorstore=own, lexical=lexical, **settings)
            if ours.performance.in_memory:
                ranked_in_memory(ours, warmup, BUDGET)
            for q in warmup:
                ours.invoke(q, max_tokens=BUDGET)
            tracked = len(gc.get_objects())
            if args.collect:
                gc.collect()
            if args.freeze:
                gc.freeze()
            slow = []
            for n, q in enumerate(timed * args.passes):
                collections.clear()
                started = time.perf_counter()
                ours.invoke(q, max_tokens=BUDGET)
                ended = time.perf_counter()
                store.similarity_search(q, k=16)
                inside = [(g, round(s * 1000, 1)) for at, g, s in collections if started <= at <= ended]
                if (ended - started) * 1000 > SLOW_MS:
                    slow.append({"query": n, "ms": round((ended - started) * 1000, 1), "collections": inside})
            if args.freeze:
                gc.unfreeze()
            promoted = promoted_per_query(ours, timed)
            print(
                f"{name}, {mode}: {tracked:,} objects tracked after the warm-up; "
                f"{promoted:.0f} promoted to the oldest generation a query; slow queries: {slow}",
                flush=True,
            )


if __name__ == "__main__":
    main()
