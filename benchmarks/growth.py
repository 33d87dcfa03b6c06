"""How index time, query latency and indexing memory grow from 1x to 10x corpus size.

Each measurement runs in its own process, so that peak memory (``ru_maxrss``) belongs to
one job: the floor (raw ``embed_documents`` of every sentence plus a raw Chroma ``add``) or
ours (``SentenceWindowRetriever.add_documents``). The process that built our index then
times the same queries, drawn from the 1x meetings, against the whole collection:
a raw ``similarity_search``, windows + ``MergeOverlaps`` + ``FitToBudget`` as a chain, and
the retriever alone with ``merge=True, max_tokens=...`` (one call, refilled to k merged
windows), in turn on each query.

Run: ``python benchmarks/growth.py [--base 4] [--scales 1 3 10]``. Reads ../shared/data/qmsum.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import floor_seconds, machine, pct, qmsum_meetings, timed  # type: ignore[import-not-found]

HERE = Path(__file__).resolve().parent


def peak_mb() -> float:
    """This process's peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(job: str, meetings: int, base: int, queries: int, k: int, budget: int) -> dict:
    """One job in this process: load the model, then index (and, for ours, query)."""
    from langchain_core.documents import Document

    from langchain_expand import FitToBudget, MergeOverlaps, SentenceWindowRetriever, chroma_store, default_embeddings

    embeddings = default_embeddings()
    embeddings.embed_documents(["warm up the model"] * 64)
    docs, _ = qmsum_meetings(meetings)
    loaded = peak_mb()
    if job == "floor":
        seconds, sentences = floor_seconds(docs)
        return {"seconds": seconds, "sentences": sentences, "model_loaded_mb": loaded, "peak_mb": peak_mb()}

    store = chroma_store("growth", persist_directory=tempfile.mkdtemp(), embeddings=embeddings)
    retriever = SentenceWindowRetriever(vectorstore=store, k=k)
    seconds = timed(lambda: retriever.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs]))
    peak = peak_mb()

    _, asked = qmsum_meetings(base)
    asked = asked[:queries]
    merge, fit = MergeOverlaps(), FitToBudget(max_tokens=budget)

    def raw(q: str) -> object:
        return store.similarity_search(q, k=k)

    def windows(q: str) -> object:
        return retriever.invoke(q)

    def ours(q: str) -> object:
        return fit.invoke(merge.invoke(retriever.invoke(q)))

    def one_call(q: str) -> object:  # merging refills to k merged windows, then the budget
        return retriever.invoke(q, merge=True, max_tokens=budget)

    raw(asked[0]["query"]), windows(asked[0]["query"]), ours(asked[0]["query"]), one_call(asked[0]["query"])
    raw_t: list[float] = []
    windows_t: list[float] = []
    ours_t: list[float] = []
    one_t: list[float] = []
    for _ in range(2):
        for q in asked:
            raw_t.append(timed(lambda q=q: raw(q["query"])))
            windows_t.append(timed(lambda q=q: windows(q["query"])))
            ours_t.append(timed(lambda q=q: ours(q["query"])))
            one_t.append(timed(lambda q=q: one_call(q["query"])))
    return {
        "seconds": seconds,
        "sentences": store._collection.count(),  # type: ignore[attr-defined]
        "model_loaded_mb": loaded,
        "peak_mb": peak,
        "raw_ms": {"p50": 1000 * statistics.median(raw_t), "p99": 1000 * pct(raw_t, 99)},
        "windows_ms": {"p50": 1000 * statistics.median(windows_t), "p99": 1000 * pct(windows_t, 99)},
        "ours_ms": {"p50": 1000 * statistics.median(ours_t), "p99": 1000 * pct(ours_t, 99)},
        "one_call_ms": {"p50": 1000 * statistics.median(one_t), "p99": 1000 * pct(one_t, 99)},
    }


def run_child(job: str, meetings: int, args: argparse.Namespace) -> dict:
    command = [sys.executable, str(HERE / "growth.py"), "--child", job, "--meetings", str(meetings)]
    command += ["--base", str(args.base), "--queries", str(args.queries), "--k", str(args.k)]
    command += ["--budget", str(args.budget)]
    out = subprocess.run(command, cwd=HERE, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", type=int, default=4, help="meetings at 1x")
    parser.add_argument("--scales", type=int, nargs="+", default=[1, 3, 10])
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument("--child", choices=["floor", "ours"])
    parser.add_argument("--no-floor", action="store_true", help="query latency only: skip the floor's indexing job")
    parser.add_argument("--meetings", type=int)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.meetings, args.base, args.queries, args.k, args.budget)))
        return

    rows = []
    started = time.perf_counter()
    for scale in args.scales:
        meetings = scale * args.base
        floor = run_child("floor", meetings, args) if not args.no_floor else None
        ours = run_child("ours", meetings, args)
        rows.append(
            {
                "scale": f"{scale}x",
                "meetings": meetings,
                "sentences": ours["sentences"],
                "index_seconds": {"floor": floor and round(floor["seconds"], 1), "ours": round(ours["seconds"], 1)},
                "index_ms_per_sentence": round(1000 * ours["seconds"] / ours["sentences"], 2),
                "index_throughput_vs_floor": floor and round(floor["seconds"] / ours["seconds"], 3),
                "indexing_memory_mb": {
                    name: {"model_loaded": round(r["model_loaded_mb"]), "peak": round(r["peak_mb"])}
                    for name, r in (("floor", floor), ("ours", ours))
                    if r is not None
                },
                "query_ms": {
                    "raw_p50": round(ours["raw_ms"]["p50"], 1),
                    "raw_p99": round(ours["raw_ms"]["p99"], 1),
                    "windows_p50": round(ours["windows_ms"]["p50"], 1),
                    "ours_p50": round(ours["ours_ms"]["p50"], 1),
                    "ours_p99": round(ours["ours_ms"]["p99"], 1),
                },
                "one_call_ms": {k: round(v, 1) for k, v in ours["one_call_ms"].items()},
                "windows_p50_vs_raw_search": round(ours["windows_ms"]["p50"] / ours["raw_ms"]["p50"], 3),
                "query_p50_overhead_ms": round(ours["ours_ms"]["p50"] - ours["raw_ms"]["p50"], 1),
                "query_p50_vs_raw_search": round(ours["ours_ms"]["p50"] / ours["raw_ms"]["p50"], 3),
                "query_p99_vs_raw_search": round(ours["ours_ms"]["p99"] / ours["raw_ms"]["p99"], 3),
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr)
    print(
        json.dumps(
            {
                "machine": machine(),
                "k": args.k,
                "window": "2 each side, merged, budget " + str(args.budget),
                "queries": f"{args.queries} from the 1x meetings, twice, over the whole collection",
                "minutes": round((time.perf_counter() - started) / 60, 1),
                "rows": rows,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
