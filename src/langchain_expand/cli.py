"""The ``langchain-expand`` command: index files, query them, run the demo.

Everything lives under ``./.langchain-expand/`` by default: an embedded, persistent
Chroma that a later run (or another process) opens again.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from langchain_core.documents import Document

from langchain_expand.corpus import read_corpus

__all__ = ["main"]

HOME = Path(".langchain-expand")
COLLECTION = "sentences"
DEMO_DATA = Path(__file__).resolve().parents[2] / "cookbooks" / "data"
DEMO_QUESTIONS = [
    "What did the group decide about the remote control's buttons and design?",
    "Why did the project manager mention the budget and the price of the remote?",
    "How do I turn on Wireless PowerShare to charge another device?",
    "How can I use Bixby on my phone?",
]


def _retriever(home: Path, device: str = "cpu"):  # type: ignore[no-untyped-def]
    from langchain_expand.stores import chroma_store, default_embeddings
    from langchain_expand.windows import SentenceWindowRetriever

    store = chroma_store(COLLECTION, persist_directory=home / "chroma", embeddings=default_embeddings(device=device))
    return SentenceWindowRetriever(vectorstore=store)


def _print_units(question: str, docs: list[Document], as_json: bool) -> None:
    if as_json:
        rows = [{"page_content": d.page_content, "metadata": d.metadata} for d in docs]
        print(json.dumps({"query": question, "results": rows}, ensure_ascii=False))
        return
    total = sum(d.metadata["tokens"] for d in docs)
    print(f"\nQ: {question}\n   {len(docs)} windows, {total} tokens in all")
    for d in docs:
        m = d.metadata
        print(
            f"  - {m['doc_id']} sentences {m['span'][0]}-{m['span'][1] - 1} (hit {m['hit']}), "
            f"chars {m['start_index']}-{m['end_index']}, score {m['score']:.3f}, {m['tokens']} tokens"
        )
        for line in d.page_content.splitlines():
            print(f"      {line}")


def _without_sections(doc: Document) -> Document:
    """Section offsets matter to parent splitting, not to sentences: don't copy them onto each."""
    meta = {k: v for k, v in doc.metadata.items() if k != "sections"}
    return Document(doc.page_content, metadata=meta, id=doc.id)


def _windows(args: argparse.Namespace) -> list[tuple[int, int]]:
    try:
        if args.windows:
            pairs = [tuple(int(x) for x in pair.split(":")) for pair in args.windows.split(",")]
            if any(len(p) != 2 for p in pairs):
                raise ValueError
            return [(p[0], p[1]) for p in pairs]
        return [(int(r), int(r)) for r in args.radius.split(",")]
    except ValueError:
        given = args.windows or args.radius
        msg = f"--windows takes before:after pairs like 3:1,2:2 and --radius numbers like 0,1,2; got {given!r}."
        raise SystemExit(msg) from None


def _report(args: argparse.Namespace) -> int:
    from langchain_expand.corpus import read_queries
    from langchain_expand.report import budget_report, write_plots

    windows = _windows(args)
    documents = list(read_corpus([args.corpus]))
    queries = [str(row["query"]) for row in read_queries(args.queries)] if args.queries else None
    result = budget_report(
        documents,
        queries=queries,
        k=args.k,
        budget=args.budget,
        windows=windows,
        reserve=args.reserve,
        corpus_name=args.corpus.name,
        progress=args.format == "table" and sys.stderr.isatty(),
    )
    if args.format == "json":
        print(result.to_json())
    elif args.format == "markdown":
        print(result.to_markdown())
    else:
        result.print_rich()
    if args.plots:
        for path in write_plots(result, args.plots):
            print(f"wrote {path}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``langchain-expand`` command."""
    parser = argparse.ArgumentParser(prog="langchain-expand", description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, default=HOME, help="where the index lives (default: %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True)
    index = sub.add_parser("index", help="index .txt, .md and .jsonl files")
    index.add_argument("paths", nargs="+", type=Path)
    query = sub.add_parser("query", help="ask the index")
    query.add_argument("question")
    query.add_argument("--k", type=int, default=4)
    query.add_argument("--before", type=int, default=2)
    query.add_argument("--after", type=int, default=2)
    query.add_argument("--format", choices=["text", "json"], default="text")
    sub.add_parser("demo", help="index the bundled sample corpus and ask it a few questions")
    report = sub.add_parser("report", help="measure windows and parents on a corpus against a budget")
    report.add_argument("corpus", type=Path, help="a folder of .txt/.md files, or a JSON Lines file")
    report.add_argument("--queries", type=Path, help='JSON Lines of {"query": ...}; else sampled sentences')
    report.add_argument("--k", type=int, default=8)
    report.add_argument("--budget", type=int, default=16_000)
    sweep = report.add_mutually_exclusive_group()
    sweep.add_argument("--radius", default="0,1,2,4,8", help="symmetric radii, e.g. 0,1,2,4,8")
    sweep.add_argument("--windows", help="before:after pairs, e.g. 3:1,2:2")
    report.add_argument("--reserve", type=int, default=0, help="tokens the rest of the prompt needs")
    report.add_argument("--format", choices=["table", "markdown", "json"], default="table")
    report.add_argument("--plots", type=Path, help="write PNG histograms into this folder")
    args = parser.parse_args(argv)

    if args.command == "report":
        return _report(args)

    if args.command == "index":
        docs = [_without_sections(d) for d in read_corpus(args.paths)]
        ids = _retriever(args.home).add_documents(docs)
        print(f"indexed {len(ids)} documents into {args.home / 'chroma'}")
    elif args.command == "query":
        retriever = _retriever(args.home)
        docs = retriever.invoke(args.question, k=args.k, before=args.before, after=args.after)
        _print_units(args.question, docs, args.format == "json")
    else:
        retriever = _retriever(args.home)
        corpus = [DEMO_DATA / "qmsum" / "docs.jsonl", DEMO_DATA / "emanual" / "docs.jsonl"]
        docs = [_without_sections(d) for d in read_corpus(corpus)]
        retriever.add_documents(docs)
        print(f"Indexed {len(docs)} documents (3 meetings, 1 manual) into {args.home / 'chroma'}.")
        print("Windows: 2 sentences before and 2 after each hit; token counts are cl100k_base.")
        for question in DEMO_QUESTIONS:
            _print_units(question, retriever.invoke(question, k=3), as_json=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
