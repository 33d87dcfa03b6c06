"""Quality, prompt size and latency of every LangChain-side design on the same queries.

Reads ../shared/data/qmsum and ../shared/data/emanual. Every system uses the bundled
MiniLM, k=8 and the same budget; each query is restricted to its own document. Evidence
recall is measured in source-document char offsets (our units carry exact offsets; stock
LangChain units are located in the source by their text).

Systems: our windows (2:2, 3:1), windows + merge + budget, rerank-then-expand, our
budgeted parents, LangChain's stock ParentDocumentRetriever, and plain chunks
(RecursiveCharacterTextSplitter, 1,000 chars, into the vector store's retriever).

Latency: windows + merge + budget against a raw ``similarity_search`` at the same k,
measured alternately in one run, reported as ratios of p50 and p99.

Run: ``python benchmarks/quality.py [--meetings 20] [--queries 150] [--budget 2000]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from collections.abc import Callable

from common import corpora, covered, evidence_recall, latency, machine, overlap, summary  # type: ignore[import-not-found]
from langchain_classic.retrievers import ParentDocumentRetriever
from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    EmbeddingsReranker,
    FitToBudget,
    MarkdownSectionSplitter,
    MergeOverlaps,
    RerankThenExpand,
    SectionSplitter,
    SentenceWindowRetriever,
    SQLDocStore,
    TokenCounter,
    chroma_store,
    default_embeddings,
)

Units = list[tuple[str, int, int]]  # text, start, end in the source


def located(docs: list[Document], source: str) -> Units:
    """Stock units carry no offsets: find each in its source (first match)."""
    out = []
    for d in docs:
        start = source.find(d.page_content)
        out.append((d.page_content, start, start + len(d.page_content)) if start >= 0 else (d.page_content, 0, 0))
    return out


def ours(docs: list[Document]) -> Units:
    return [(d.page_content, d.metadata["start_index"], d.metadata["end_index"]) for d in docs]


Systems = dict[str, Callable[[str, str], Units]]


def build(corpus: str, docs: list[dict], k: int, budget: int) -> tuple[Callable[[str, str], object], Systems]:
    path = tempfile.mkdtemp()
    sources = {d["doc_id"]: d["text"] for d in docs}
    plain_docs = [Document(d["text"], id=d["doc_id"], metadata={"source": d["doc_id"]}) for d in docs]
    windows = SentenceWindowRetriever(vectorstore=chroma_store(f"{corpus}-sentences", persist_directory=path), k=k)
    windows.add_documents(plain_docs)

    structure = SectionSplitter(fallback=MarkdownSectionSplitter(max_level=2))
    with_sections = [
        Document(d["text"], id=d["doc_id"], metadata={"source": d["doc_id"], "sections": d.get("sections")})
        for d in docs
    ]
    children = chroma_store(f"{corpus}-children", persist_directory=path)
    docstore = SQLDocStore(f"sqlite:///{path}/parents.sqlite")
    parents = BudgetedParentDocumentRetriever(
        vectorstore=children,
        docstore=docstore,
        parent_splitter=structure,
        k=k,
        max_parent_tokens=budget // 4,
        max_tokens=budget,
    )
    parents.add_documents(with_sections)

    chunks = chroma_store(f"{corpus}-chunks", persist_directory=path)
    chunker = RecursiveCharacterTextSplitter(chunk_size=1000, chunk_overlap=0)
    chunk_docs = [Document(t, metadata={"source": d["doc_id"]}) for d in docs for t in chunker.split_text(d["text"])]
    chunks.add_documents(chunk_docs)

    fit = FitToBudget(max_tokens=budget)
    merge = MergeOverlaps()
    rerank = RerankThenExpand(
        retriever=windows, reranker=EmbeddingsReranker(embeddings=default_embeddings()), fetch_k=3 * k, k=k
    )

    def stock(q: str, doc_id: str) -> Units:
        retriever = ParentDocumentRetriever(
            vectorstore=children,
            docstore=docstore,
            child_splitter=parents.child_splitter,
            search_kwargs={"k": k, "filter": {"source": doc_id}},
        )
        return located(retriever.invoke(q), sources[doc_id])

    def where(doc_id: str) -> dict[str, str]:
        return {"source": doc_id}

    def raw(q: str, doc_id: str) -> object:
        return windows.vectorstore.similarity_search(q, k=k, filter=where(doc_id))

    return raw, {
        "windows 2:2": lambda q, d: ours(windows.invoke(q, filter=where(d))),
        "windows 3:1": lambda q, d: ours(windows.invoke(q, filter=where(d), before=3, after=1)),
        "windows 2:2 + merge + budget": lambda q, d: ours(fit.invoke(merge.invoke(windows.invoke(q, filter=where(d))))),
        "rerank-then-expand 2:2": lambda q, d: ours(rerank.invoke(q, filter=where(d))),
        "parents + budgets (ours)": lambda q, d: ours(parents.invoke(q, filter=where(d))),
        "stock ParentDocumentRetriever": stock,
        "plain chunks (1,000 chars)": lambda q, d: located(
            chunks.similarity_search(q, k=k, filter=where(d)), sources[d]
        ),
    }


def measure(systems: Systems, queries: list[dict], budget: int) -> dict:
    counter = TokenCounter()
    out = {}
    for name, system in systems.items():
        tokens, recall, any_hit, duplicated = [], [], [], []
        for q in queries:
            units = system(q["query"], q["doc_id"])
            joined = counter("\n\n".join(t for t, _, _ in units))
            spans = [(s, e) for _, s, e in units if e > s]
            union = covered(spans)
            unique_chars = sum(e - s for s, e in union)
            all_chars = sum(e - s for s, e in spans)
            tokens.append(joined)
            recall.append(evidence_recall(q["gold_spans"], spans))
            any_hit.append(float(overlap(covered((s, e) for s, e in q["gold_spans"]), union) > 0))
            duplicated.append(1 - unique_chars / all_chars if all_chars else 0.0)
        mean_recall = sum(recall) / len(recall)
        out[name] = {
            "evidence_recall": round(mean_recall, 4),
            "any_overlap_recall": round(sum(any_hit) / len(any_hit), 4),
            "tokens": {k: round(v) for k, v in summary(tokens).items()},
            "recall_per_1k_tokens": round(1000 * mean_recall / statistics.mean(tokens), 4),
            "duplicated_share": round(sum(duplicated) / len(duplicated), 4),
            "over_budget_share": round(sum(t > budget for t in tokens) / len(tokens), 4),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--meetings", type=int, default=20)
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--budget", type=int, default=2000)
    args = parser.parse_args()

    results = {"k": args.k, "budget": args.budget, "machine": machine()}
    for corpus, (docs, queries) in corpora(args.meetings).items():
        queries = queries[: args.queries]
        raw, systems = build(corpus, docs, args.k, args.budget)
        results[corpus] = {
            "documents": len(docs),
            "queries": len(queries),
            "systems": measure(systems, queries, args.budget),
            "latency_windows_merge_budget_vs_raw_search": latency(
                systems["windows 2:2 + merge + budget"], raw, queries
            ),
        }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
