"""The ``langchain-expand`` command: index files, query them, run the demo.

Everything lives under ``./.langchain-expand/`` by default: an embedded, persistent
Chroma that a later run (or another process) opens again.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from langchain_core.documents import Document

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


def read_corpus(paths: Sequence[Path]) -> Iterator[Document]:
    """Documents from ``.txt``/``.md`` files, folders of them, and JSON Lines files.

    JSON Lines rows are ``{"doc_id", "text", ...}`` as in the shared data sets; other
    keys except ``sections`` become metadata.
    """
    for path in paths:
        if path.is_dir():
            yield from read_corpus(sorted(p for p in path.rglob("*") if p.suffix in {".txt", ".md", ".jsonl"}))
        elif path.suffix == ".jsonl":
            with path.open(encoding="utf-8") as f:
                for line_no, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    row = json.loads(line)
                    if "doc_id" not in row or "text" not in row:
                        msg = f"{path}:{line_no}: a JSON Lines row needs 'doc_id' and 'text'."
                        raise ValueError(msg)
                    meta = {k: v for k, v in row.items() if k not in {"doc_id", "text", "sections"}}
                    yield Document(row["text"], id=str(row["doc_id"]), metadata={"source": str(path), **meta})
        else:
            text = path.read_text(encoding="utf-8")
            yield Document(text, id=str(path), metadata={"source": str(path)})


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
    args = parser.parse_args(argv)

    if args.command == "index":
        docs = list(read_corpus(args.paths))
        ids = _retriever(args.home).add_documents(docs)
        print(f"indexed {len(ids)} documents into {args.home / 'chroma'}")
    elif args.command == "query":
        retriever = _retriever(args.home)
        docs = retriever.invoke(args.question, k=args.k, before=args.before, after=args.after)
        _print_units(args.question, docs, args.format == "json")
    else:
        retriever = _retriever(args.home)
        docs = list(read_corpus([DEMO_DATA / "qmsum" / "docs.jsonl", DEMO_DATA / "emanual" / "docs.jsonl"]))
        retriever.add_documents(docs)
        print(f"Indexed {len(docs)} documents (3 meetings, 1 manual) into {args.home / 'chroma'}.")
        print("Windows: 2 sentences before and 2 after each hit; token counts are cl100k_base.")
        for question in DEMO_QUESTIONS:
            _print_units(question, retriever.invoke(question, k=3), as_json=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
