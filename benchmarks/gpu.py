"""Embedding throughput on an accelerator against the CPU, and indexing against the floor there.

For a machine with a GPU (this project's device tool lends one to some tasks): the bundled
MiniLM encodes the same QMSum sentences on each device at a few batch sizes, then
``SentenceWindowRetriever.add_documents`` indexes them with ``default_embeddings(device=...)``
against the floor on the same device (raw ``embed_documents`` + raw Chroma ``add``). Where
the GPU makes embedding cheap, what we add on top of the floor (splitting, metadata, Chroma
writes) becomes the larger share, so this is where that ratio is tested hardest.

Run: ``python benchmarks/gpu.py [--meetings 5] [--devices cpu cuda]``. Reads the
sentences from ../shared/data/qmsum, or from ``--docs`` (a JSON Lines file with ``text``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import tempfile
import time
from pathlib import Path

from common import floor_seconds  # type: ignore[import-not-found]
from langchain_core.documents import Document

from langchain_expand import SentenceSplitter, SentenceWindowRetriever, chroma_store, default_embeddings


def load(path: Path, limit: int) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for _, line in zip(range(limit), f, strict=False)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--meetings", type=int, default=5)
    parser.add_argument("--devices", nargs="+", default=["cpu", "cuda"])
    parser.add_argument("--batches", type=int, nargs="+", default=[32, 256, 1024])
    parser.add_argument(
        "--docs", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/qmsum/docs.jsonl.gz"
    )
    args = parser.parse_args()
    import torch

    docs = load(args.docs, args.meetings)
    splitter = SentenceSplitter()
    sentences = [d["text"][s:e] for d in docs for s, e in splitter(d["text"])]
    results: dict[str, object] = {
        "sentences": len(sentences),
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    for device in args.devices:
        if device.startswith("cuda") and not torch.cuda.is_available():
            results[device] = "not available"
            continue
        row: dict[str, object] = {}
        for batch in args.batches:
            embeddings = default_embeddings(device=device, batch_size=batch)
            embeddings.embed_documents(sentences[:256])  # warm up kernels and caches
            started = time.perf_counter()
            embeddings.embed_documents(sentences)
            row[f"sentences_per_second_batch_{batch}"] = round(len(sentences) / (time.perf_counter() - started))
        embeddings = default_embeddings(device=device, batch_size=max(args.batches))

        floor, _ = floor_seconds(docs, embeddings)

        retriever = SentenceWindowRetriever(
            vectorstore=chroma_store("ours", persist_directory=tempfile.mkdtemp(), embeddings=embeddings)
        )
        started = time.perf_counter()
        retriever.add_documents([Document(d["text"], id=str(d.get("doc_id", i))) for i, d in enumerate(docs)])
        ours = time.perf_counter() - started
        row |= {
            "floor_seconds": round(floor, 2),
            "ours_seconds": round(ours, 2),
            "throughput_vs_floor": round(floor / ours, 3),
        }
        results[device] = row
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
