"""Parents from structure: unit sizes, prompt sizes, the share over a 16k budget, recall.

Reads ../shared/data/qmsum (topic sections as parents) and ../shared/data/emanual (``##``
sections as parents). For each query, k=8 parents from the query's own document, with:

- ``stock``: LangChain's ParentDocumentRetriever on the same index (search_kwargs k=8
  children, so it returns however many distinct parents those children name);
- ``ours``: BudgetedParentDocumentRetriever, k=8 parents, no budgets;
- ``ours+budget``: the same with ``max_parent_tokens=4000`` and ``max_tokens=16000``.

Run: ``python benchmarks/parents.py [--meetings 40] [--queries 300]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile

from common import evidence_recall, machine, qmsum_meetings, read, summary  # type: ignore[import-not-found]
from langchain_classic.retrievers import ParentDocumentRetriever
from langchain_core.documents import Document

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    MarkdownSectionSplitter,
    SectionSplitter,
    SQLDocStore,
    TokenCounter,
    chroma_store,
)

BUDGET = 16_000


def run(corpus: str, docs: list[dict], queries: list[dict], splitter: object, k: int) -> dict[str, object]:
    counter = TokenCounter()
    path = tempfile.mkdtemp()
    common = {
        "vectorstore": chroma_store(f"{corpus}-children", persist_directory=path),
        "docstore": SQLDocStore(f"sqlite:///{path}/docstore.sqlite"),
        "parent_splitter": splitter,
    }
    ours = BudgetedParentDocumentRetriever(**common, k=k)
    ours.add_documents(
        [
            Document(d["text"], id=d["doc_id"], metadata={"source": d["doc_id"], "sections": d.get("sections")})
            for d in docs
        ]
    )
    budgeted = BudgetedParentDocumentRetriever(**common, k=k, max_parent_tokens=4000, max_tokens=BUDGET)
    units: list[int] = []
    results: dict[str, dict[str, list[float]]] = {
        n: {"prompt": [], "recall": [], "parents": []} for n in ("stock", "ours", "ours+budget")
    }
    for q in queries:
        where = {"source": q["doc_id"]}
        stock = ParentDocumentRetriever(
            vectorstore=common["vectorstore"],
            docstore=common["docstore"],
            child_splitter=ours.child_splitter,
            search_kwargs={"k": k, "filter": where},
        )
        contexts = {
            "stock": stock.invoke(q["query"]),
            "ours": ours.invoke(q["query"], filter=where),
            "ours+budget": budgeted.invoke(q["query"], filter=where),
        }
        units += [counter(p.page_content) for p in contexts["ours"]]
        for name, parents in contexts.items():
            results[name]["prompt"].append(counter("\n\n".join(p.page_content for p in parents)))
            results[name]["parents"].append(len(parents))
            spans = [(p.metadata["start_index"], p.metadata["end_index"]) for p in parents]
            results[name]["recall"].append(evidence_recall(q["gold_spans"], spans))
    return {
        "documents": len(docs),
        "queries": len(queries),
        "unit_tokens": {key: round(v) for key, v in summary(units).items()},
        "systems": {
            name: {
                "parents_per_query": {key: round(v, 1) for key, v in summary(r["parents"]).items()},
                "prompt_tokens": {key: round(v) for key, v in summary(r["prompt"]).items()},
                "over_budget_share": round(sum(p > BUDGET for p in r["prompt"]) / len(r["prompt"]), 4),
                "evidence_recall": round(sum(r["recall"]) / len(r["recall"]), 4),
            }
            for name, r in results.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--meetings", type=int, default=40)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--k", type=int, default=8)
    args = parser.parse_args()

    meetings, meeting_queries = qmsum_meetings(args.meetings)
    qmsum = run("qmsum", meetings, meeting_queries[: args.queries], SectionSplitter(), args.k)

    manuals = read("emanual", "docs.jsonl.gz")
    manual_queries = read("emanual", "queries.jsonl.gz")[: args.queries]
    emanual = run("emanual", manuals, manual_queries, MarkdownSectionSplitter(max_level=2), args.k)
    print(
        json.dumps({"k": args.k, "budget": BUDGET, "machine": machine(), "qmsum": qmsum, "emanual": emanual}, indent=2)
    )


if __name__ == "__main__":
    main()
