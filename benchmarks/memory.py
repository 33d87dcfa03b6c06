"""Memory of indexing one large document, as a multiple of the document's size.

A document used to be turned into records (one Document with its metadata per sentence,
about 1.2 KB each) before its first write: about twenty times its text. Records are now
built one write batch at a time. For each size this measures, in one run, with
``tracemalloc`` (Python allocations; Chroma's own index in Rust is not traced):

- the peak before the first write (splitting and validation: offsets, not records);
- the peak of the whole ``add_documents`` (one batch of records and its embeddings);
- side by side, what holding every record at once would cost (the old way).

The text is QMSum meetings joined to the size asked. The embeddings are LangChain's
``DeterministicFakeEmbedding`` (384 numbers seeded by the text's hash, MiniLM's size),
because what is measured is the library's own allocation, not the model's, and a 4 MB
document takes MiniLM about ten minutes.

Run: ``python benchmarks/memory.py [--sizes 1 2 4]`` (megabytes).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import tracemalloc

from common import machine, read  # type: ignore[import-not-found]
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from langchain_expand import SentenceWindowRetriever, chroma_store


def document(megabytes: float) -> str:
    meetings = [d["text"] for d in read("qmsum", "docs.jsonl.gz")]
    parts: list[str] = []
    size = 0
    while size < megabytes * 1e6:
        parts.append(meetings[len(parts) % len(meetings)])
        size += len(parts[-1]) + 2
    return "\n\n".join(parts)[: int(megabytes * 1e6)]


def measure(text: str) -> dict[str, float]:
    fake = DeterministicFakeEmbedding(size=384)
    store = chroma_store("memory", persist_directory=tempfile.mkdtemp(), embeddings=fake)
    retriever = SentenceWindowRetriever(vectorstore=store)
    first_write: list[int] = []
    write = store.add_documents

    def spy(documents: list[Document], **kwargs: object) -> list[str]:
        if not first_write:
            first_write.append(tracemalloc.get_traced_memory()[1])
        return write(documents, **kwargs)

    object.__setattr__(store, "add_documents", spy)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    retriever.add_documents([Document(text, id="big")])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()

    tracemalloc.start()  # the old way, side by side: every record built before the first write
    held = retriever._prepare(Document(text, id="big"), "big")
    records = [held.payload.record(i) for i in range(held.payload.n)]
    all_records = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    mb = len(text) / 1e6
    return {
        "document_mb": round(mb, 2),
        "sentences": len(records),
        "before_first_write_mb": round((first_write[0] - base) / 1e6, 1),
        "whole_call_peak_mb": round((peak - base) / 1e6, 1),
        "every_record_at_once_mb": round(all_records / 1e6, 1),
        "before_first_write_x_document": round((first_write[0] - base) / 1e6 / mb, 2),
        "every_record_at_once_x_document": round(all_records / 1e6 / mb, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=float, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    rows = [measure(document(mb)) for mb in args.sizes]
    print(json.dumps({"machine": machine(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
