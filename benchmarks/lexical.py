"""The lexical index in PostgreSQL against the SQLite one: writing, and a BM25 search.

Reads ../shared/data/qmsum. Splits the first N meetings into sentences (the window
retriever's splitter), writes them into a ``LexicalIndex`` (SQLite FTS5, in memory) and a
``PostgresLexicalIndex`` (a throwaway server on loopback, ``tests/pgserver.py``; or
``--url``), then times a search (k=32) for each of the meetings' queries in both, and checks
that both rank alike. No embedding: what is timed is the index alone. A query with a snapshot
(up to ``snapshot_limit`` sentences) searches neither; beyond it, the retriever runs this
search beside the dense one.

Run: ``python benchmarks/lexical.py [--meetings 5 50] [--url postgresql+psycopg://...]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from common import machine, pct, qmsum_meetings  # type: ignore[import-not-found]

from langchain_expand import LexicalIndex, PostgresLexicalIndex, SentenceSplitter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.pgserver import throwaway_postgres


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    if url is not None:
        yield url
        return
    with throwaway_postgres() as started:
        yield started


def measure(meetings: int, url: str, table: str) -> dict:
    docs, queries = qmsum_meetings(meetings)
    splitter = SentenceSplitter(table_rows=True)
    rows = [(d["doc_id"], "r1", [d["text"][s:e] for s, e in splitter(d["text"])]) for d in docs]
    sentences = sum(len(r[2]) for r in rows)
    indexes = {"sqlite": LexicalIndex(), "postgresql": PostgresLexicalIndex(url, table=table)}
    result: dict = {"meetings": len(docs), "sentences": sentences, "queries": len(queries)}
    for name, index in indexes.items():
        started = time.perf_counter()
        index.replace(rows)
        write = time.perf_counter() - started
        index.search(queries[0]["query"], 32)  # warm
        seconds = []
        for q in queries:
            started = time.perf_counter()
            index.search(q["query"], 32)
            seconds.append(time.perf_counter() - started)
        result[name] = {
            "write_sentences_per_s": round(sentences / write),
            "search_ms_p50": round(statistics.median(seconds) * 1000, 1),
            "search_ms_p95": round(pct(seconds, 95) * 1000, 1),
        }
    sqlite, postgresql = result["sqlite"], result["postgresql"]
    result["same_ranking"] = all(
        indexes["sqlite"].search(q["query"], 32) == indexes["postgresql"].search(q["query"], 32) for q in queries
    )
    result["postgresql_over_sqlite"] = {
        "search_p50": round(postgresql["search_ms_p50"] / sqlite["search_ms_p50"], 2),
        "write_time": round(sqlite["write_sentences_per_s"] / postgresql["write_sentences_per_s"], 1),
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--meetings", type=int, nargs="+", default=[5, 50])
    parser.add_argument("--url", help="a PostgreSQL URL; a throwaway server on loopback by default")
    args = parser.parse_args()
    with server(args.url) as url:
        runs = [measure(n, url, f"bench_lexical_{n}_{int(time.time())}") for n in args.meetings]
    result = {"machine": machine(), "runs": runs}
    (Path(__file__).parent / "results" / "lexical.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
