"""Where a slow query's time goes: Python's full garbage collections, timed against each query.

The latency check shows one query of about 100-340 ms a run past the snapshot's limit, in a
different corpus each time, that takes 20 ms when run again alone. This script times each
default query (store path: ``snapshot_limit`` 1 and 0) and every garbage collection that runs
inside it, and prints the slow ones; with ``--freeze`` it calls ``gc.freeze()`` after the
warm-up, as a service would once its model is loaded, so the collector stops re-scanning the
process's long-lived objects (the model, Chroma, LangChain: about 560,000 of them).

Run: ``python benchmarks/tails.py emanual tatqa [--freeze]``.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from pathlib import Path

from common import ranked_in_memory  # type: ignore[import-not-found]
from langchain_core.documents import Document
from latency import BUDGET, sliced  # type: ignore[import-not-found]

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpora", nargs="+")
    parser.add_argument("--freeze", action="store_true", help="gc.freeze() after the warm-up")
    parser.add_argument("--passes", type=int, default=2)
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
        for mode, limit in (("past the limit", 1), ("store alone", 0)):
            ours = SentenceWindowRetriever(vectorstore=store, lexical=lexical, snapshot_limit=limit)
            if limit:
                ranked_in_memory(ours, warmup, BUDGET)
            for q in warmup:
                ours.invoke(q, max_tokens=BUDGET)
            tracked = len(gc.get_objects())
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
            print(f"{name}, {mode}: {tracked:,} objects tracked after the warm-up; slow queries: {slow}", flush=True)


if __name__ == "__main__":
    main()
