"""Merging overlapping windows on QMSum: tokens saved, duplicated tokens, evidence recall.

Reads ../shared/data/qmsum. Indexes the first N meetings (those with queries), then for
every query of those meetings retrieves k=8 windows of 2 sentences each side from its own
meeting (a metadata filter) and measures three contexts:

- ``plain``: the 8 windows as retrieved;
- ``merged``: the same 8 windows through ``MergeOverlaps()``: the same text, once;
- ``merged+refill``: ``merge=True`` in the retriever, so ``k`` counts merged units and
  overlapping hits make room for further ones.

Run: ``python benchmarks/merge.py [--meetings 40]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from common import evidence_recall, machine, qmsum_meetings, summary  # type: ignore[import-not-found]
from langchain_core.documents import Document

from langchain_expand import MergeOverlaps, SentenceWindowRetriever, TokenCounter, chroma_store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--meetings", type=int, default=40)
    parser.add_argument("--k", type=int, default=8)
    args = parser.parse_args()

    docs, queries = qmsum_meetings(args.meetings)

    counter = TokenCounter()
    store = chroma_store("merge-bench", persist_directory=tempfile.mkdtemp())
    retriever = SentenceWindowRetriever(vectorstore=store, k=args.k, before=2, after=2)
    started = time.perf_counter()
    retriever.add_documents([Document(d["text"], id=d["doc_id"], metadata={"meeting": d["doc_id"]}) for d in docs])
    indexed = time.perf_counter() - started
    merge = MergeOverlaps(token_counter=counter)

    rows: dict[str, dict[str, list[float]]] = {
        name: {"tokens": [], "recall": [], "duplicated": []} for name in ("plain", "merged", "merged+refill")
    }
    for q in queries:
        where = {"meeting": q["doc_id"]}
        plain = retriever.invoke(q["query"], filter=where, merge=False)  # one window a hit, overlaps and all
        contexts = {
            "plain": plain,
            "merged": merge.invoke(plain),
            "merged+refill": retriever.invoke(q["query"], filter=where, merge=True),
        }
        for name, units in contexts.items():
            tokens = counter("\n\n".join(u.page_content for u in units))
            unique = counter("\n\n".join(u.page_content for u in merge.invoke(units)))
            spans = [(u.metadata["start_index"], u.metadata["end_index"]) for u in units]
            rows[name]["tokens"].append(tokens)
            rows[name]["duplicated"].append((tokens - unique) / tokens if tokens else 0.0)
            rows[name]["recall"].append(evidence_recall(q["gold_spans"], spans))

    result = {
        "corpus": f"qmsum, {len(docs)} meetings, {len(queries)} queries",
        "k": args.k,
        "window": "2 before, 2 after",
        "machine": machine(),
        "index_seconds": round(indexed, 1),
        "contexts": {
            name: {
                "prompt_tokens": {k: round(v, 1) for k, v in summary(r["tokens"]).items()},
                "duplicated_token_share": round(sum(r["duplicated"]) / len(r["duplicated"]), 4),
                "evidence_recall": round(sum(r["recall"]) / len(r["recall"]), 4),
            }
            for name, r in rows.items()
        },
    }
    plain_tokens = sum(rows["plain"]["tokens"])
    result["merged_saves_tokens"] = round(1 - sum(rows["merged"]["tokens"]) / plain_tokens, 4)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
