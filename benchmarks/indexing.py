"""Indexing throughput as a ratio to the floor, measured side by side in one run.

The floor is what every design pays: the same sentences through a raw
``embed_documents`` plus a raw Chroma ``add``. Ours is ``SentenceWindowRetriever.add_documents``
(splitting, metadata, ids, commit marker included), by default (each sentence embedded with its
context: a turn's later sentences with its speaker label, so more text than the floor embeds)
and with ``sentence_prefix=None`` (the floor's texts). Reads ../shared/data/qmsum.

Run: ``python benchmarks/indexing.py [--meetings 5]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

from common import floor_seconds, machine, read  # type: ignore[import-not-found]
from langchain_core.documents import Document

from langchain_expand import SentenceWindowRetriever, chroma_store, default_embeddings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--meetings", type=int, default=5)
    args = parser.parse_args()
    docs = read("qmsum", "docs.jsonl.gz")[: args.meetings]
    embeddings = default_embeddings()
    embeddings.embed_documents(["warm up the model"] * 64)

    floor, n_sentences = floor_seconds(docs)

    def ours(**settings: object) -> float:
        store = chroma_store("ours", persist_directory=tempfile.mkdtemp(), embeddings=embeddings)
        retriever = SentenceWindowRetriever(vectorstore=store, **settings)  # type: ignore[arg-type]
        started = time.perf_counter()
        retriever.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
        return time.perf_counter() - started

    default = ours()
    alone = ours(sentence_prefix=None)

    print(
        json.dumps(
            {
                "corpus": f"qmsum, {len(docs)} meetings, {n_sentences} sentences",
                "machine": machine(),
                "floor_seconds": round(floor, 2),
                "ours_seconds": round(default, 2),
                "throughput_vs_floor": round(floor / default, 3),
                "ours_without_context_seconds": round(alone, 2),
                "without_context_vs_floor": round(floor / alone, 3),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
