"""What changing the window radius from 2 to 4 sentences costs each system.

Ours computes windows at query time (``before``/``after`` per call), and so does
Haystack (``window_size`` is a run argument). LlamaIndex's ``SentenceWindowNodeParser``
writes each node's window into its metadata at index time, so a new radius means a new
index: parse, embed and write again. The cost of the change is reported as seconds and
as a multiple of the floor (raw ``embed_documents`` + raw Chroma ``add``) measured in the
same run, with each system's query latency at both radii as a ratio to raw search.

Run with the peers' environment: ``make bench-radius`` (or
``benchmarks/.venv-peers/bin/python benchmarks/radius.py``). Reads ../shared/data/qmsum.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Callable

from common import corpora, floor_seconds, latency, machine, timed  # type: ignore[import-not-found]
from langchain_core.documents import Document
from peers import Locator, build_haystack, build_llamaindex, dir_bytes  # type: ignore[import-not-found]

from langchain_expand import SentenceWindowRetriever, chroma_store, default_embeddings


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--meetings", type=int, default=5)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--k", type=int, default=8)
    args = parser.parse_args()
    default_embeddings().embed_documents(["warm up"] * 32)
    docs, queries = corpora(args.meetings)["qmsum"]
    queries = queries[: args.queries]
    locators = {d["doc_id"]: Locator(d["text"]) for d in docs}
    floor, sentences = floor_seconds(docs)

    path = tempfile.mkdtemp()
    ours = SentenceWindowRetriever(vectorstore=chroma_store("ours", persist_directory=path), k=args.k)
    documents = [Document(d["text"], id=d["doc_id"], metadata={"source": d["doc_id"]}) for d in docs]
    ours_seconds = timed(lambda: ours.add_documents(documents))

    def raw(q: str, doc_id: str) -> object:
        return ours.vectorstore.similarity_search(q, k=args.k, filter={"source": doc_id})

    def ours_at(radius: int) -> Callable[[str, str], object]:
        return lambda q, d: ours.invoke(q, filter={"source": d}, before=radius, after=radius)

    llama2, llama2_info = build_llamaindex(docs, args.k, locators, window=2)
    llama4, llama4_info = build_llamaindex(docs, args.k, locators, window=4)
    hay, hay_info = build_haystack(docs, args.k, locators)

    def hay_at(radius: int) -> Callable[[str, str], object]:
        return lambda q, d: hay(q, d, window=radius)  # type: ignore[call-arg]

    results = {
        "machine": machine(),
        "corpus": f"qmsum, {len(docs)} meetings, {sentences} sentences (ours), {len(queries)} queries",
        "floor_seconds": round(floor, 1),
        "ours": {
            "index_seconds": round(ours_seconds, 1),
            "radius_change_seconds": 0.0,
            "bytes_per_sentence": round(dir_bytes(path) / ours.vectorstore._collection.count()),  # type: ignore[attr-defined]
            "query_radius_2": latency(ours_at(2), raw, queries),
            "query_radius_4": latency(ours_at(4), raw, queries),
        },
        "LlamaIndex": {
            "index_seconds": round(llama2_info["seconds"], 1),
            "radius_change_seconds": round(llama4_info["seconds"], 1),
            "radius_change_vs_floor": round(llama4_info["seconds"] / floor, 2),
            "bytes_per_unit_radius_2": round(llama2_info["bytes"] / llama2_info["units"]),
            "bytes_per_unit_radius_4": round(llama4_info["bytes"] / llama4_info["units"]),
            "query_radius_2": latency(llama2, raw, queries),
            "query_radius_4": latency(llama4, raw, queries),
        },
        "Haystack": {
            "index_seconds": round(hay_info["seconds"], 1),
            "radius_change_seconds": 0.0,
            "query_radius_2": latency(hay_at(2), raw, queries),
            "query_radius_4": latency(hay_at(4), raw, queries),
        },
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
