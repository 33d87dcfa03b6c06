"""The ``langchain-expand`` command: index files, query them, report on them, run the demo.

Everything lives under ``./.langchain-expand/`` by default: an embedded, persistent
Chroma and a SQLite docstore that a later run (or another process) opens again. For a
shared deployment, ``--chroma-host``/``--chroma-port`` point at a Chroma server and
``--docstore`` at a SQL database; a PostgreSQL one also holds the lexical index there.
"""

from __future__ import annotations

import argparse
import functools
import json
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from langchain_expand.rules import check_query
from langchain_expand.tools.arguments import parser
from langchain_expand.tools.corpus import read_corpus
from langchain_expand.tools.indexing import Stopped, for_windows, index
from langchain_expand.tools.opening import (
    counted,
    embeddings_of,
    indexed_ids,
    parents_retriever,
    store_of,
    windows_retriever,
)
from langchain_expand.units import (
    DOC_ID,
    END,
    HIT,
    SCORE,
    SPAN,
    START,
    TITLE,
    TOKENS,
    TRUNCATED,
)

__all__ = ["main"]

DEMO_DATA = Path(__file__).parent.parent / "data"
"""Slices of QMSum and the E-Manual that ship inside the package, so the demo runs from a wheel."""
DEMO_BUDGET = 400
DEMO_QUESTIONS = [
    "What did the group decide about the remote control's buttons and design?",
    "Why did the project manager mention the budget and the price of the remote?",
    "How do I turn on Wireless PowerShare to charge another device?",
    "How can I use Bixby on my phone?",
]


def _query(args: argparse.Namespace) -> int:
    """One call of the public API: every flag is one argument of ``invoke``."""
    check_query(args.question)  # before the model loads (seconds)
    if args.budget is not None and args.budget < 1:
        msg = f"--budget must be a positive number of tokens, got {args.budget}; leave it out for no budget."
        raise ValueError(msg)
    if args.k is not None and args.k < 1:
        msg = f"--k must be a positive number of units, got {args.k}."
        raise ValueError(msg)
    docs: list[Document]
    if args.mode == "parent":
        window_only = [
            flag
            for flag, value in (("--before", args.before), ("--after", args.after), ("--window", args.window))
            if value is not None
        ]
        if args.merge is not None:
            window_only.append("--merge" if args.merge else "--no-merge")
        if window_only:
            apply, them = ("apply", "them") if len(window_only) > 1 else ("applies", "it")
            msg = (
                f"{', '.join(window_only)} only {apply} to window mode; parents come whole from the document's "
                f"structure. Drop {them}, or query without --mode parent."
            )
            raise ValueError(msg)
        _check_indexed(args)
        retriever: Any = parents_retriever(args)
        docs = retriever.invoke(args.question, k=args.k, max_tokens=args.budget, filter=args.filter)
    else:
        for flag, value in (("--before", args.before), ("--after", args.after)):
            if value is not None and value < 0:
                msg = f"{flag} must be 0 or more sentences, got {value}."
                raise ValueError(msg)
        _check_indexed(args)
        retriever = windows_retriever(args)
        docs = retriever.invoke(
            args.question,
            k=args.k,
            before=args.before,
            after=args.after,
            merge=True if args.merge is None else args.merge,
            max_tokens=args.budget,
            window=args.window,
            filter=args.filter,
        )
    _print_units(args.question, docs, args.format == "json")
    if docs:
        return 0
    print(f"langchain-expand query: {_why_nothing(args, retriever)}", file=sys.stderr)
    return 1


def _why_nothing(args: argparse.Namespace, retriever: Any) -> str:
    """Why a query over a non-empty index answered with no unit, the same in every mode.

    The usual cause is an ``index`` run killed before its first batch was committed: its
    records are in the store but no document is complete, and the lexical index and snapshot
    hold only complete ones, so the hybrid path saw nothing to warn about.
    """
    where = f"{args.chroma_host}:{args.chroma_port}" if args.chroma_host else args.home
    committed = len(indexed_ids(args, retriever))
    if committed == 0:
        return (
            f"the {args.mode} index in {where} holds no complete document: an `index` run was interrupted "
            "before its first batch was committed. Run the same `langchain-expand index` command again to resume."
        )
    budget = f", or --budget {args.budget} holds no whole sentence or parent" if args.budget is not None else ""
    scope = f" (--filter {json.dumps(args.filter)}: does any unit's metadata match it?)" if args.filter else ""
    return f"no unit answered the question among {counted(committed, 'indexed document')}{budget}{scope}."


def _check_indexed(args: argparse.Namespace) -> None:
    """A query needs an index of its mode: say how to build one instead of answering "0 units"."""
    collection = "children" if args.mode == "parent" else "sentences"
    from langchain_expand.store.adapters import adapt

    if args.chroma_host:
        empty = adapt(store_of(args, collection), "The CLI").count() == 0
    else:
        import chromadb

        path = args.home / "chroma"
        names = (
            {c.name for c in chromadb.PersistentClient(path=str(path)).list_collections()} if path.exists() else set()
        )
        empty = collection not in names or adapt(store_of(args, collection), "The CLI").count() == 0
    if empty:
        where = f"{args.chroma_host}:{args.chroma_port}" if args.chroma_host else args.home
        msg = (
            f"no {args.mode} index in {where}: run `langchain-expand index --mode {args.mode} PATH` "
            f"first{' (with the same --home)' if not args.chroma_host else ''}."
        )
        raise ValueError(msg)


def _print_units(question: str, docs: list[Document], as_json: bool) -> None:
    from langchain_expand.prompt import context_tokens
    from langchain_expand.text.tokens import TokenCounter

    joined = context_tokens(docs, TokenCounter())
    if as_json:
        rows = [{"page_content": d.page_content, "metadata": d.metadata} for d in docs]
        print(json.dumps({"query": question, "context_tokens": joined, "results": rows}, ensure_ascii=False))
        return
    print(f"\nQ: {question}\n   {len(docs)} units, {joined} tokens joined")
    for d in docs:
        m = d.metadata
        if SPAN in m:
            where = f"sentences {m[SPAN][0]}-{m[SPAN][1] - 1} (hit {m[HIT]}), "
        else:
            where = f"{m.get(TITLE) or 'parent'}, "
        print(
            f"  - {m[DOC_ID]} {where}chars {m[START]}-{m[END]}, "
            f"score {m[SCORE]:.3f}, {m[TOKENS]} tokens{' (trimmed)' if m.get(TRUNCATED) else ''}"
        )
        for line in d.page_content.splitlines():
            print(f"      {line}")


def _demo(args: argparse.Namespace) -> int:
    """The bundled sample, indexed into a home of its own (``demo/`` under ``--home``), embedded.

    Not into the user's index: their first ``index`` and ``query`` would answer with the demo's
    documents beside their own.
    """
    home = args.home / "demo"
    retriever = windows_retriever(argparse.Namespace(**{**vars(args), "home": home, "chroma_host": None}))
    corpus = [DEMO_DATA / "qmsum" / "docs.jsonl", DEMO_DATA / "emanual" / "docs.jsonl"]
    docs = [for_windows(d) for d in read_corpus(corpus)]
    retriever.add_documents(docs)
    print(f"Indexed {len(docs)} documents (3 meetings, 1 manual) into {home / 'chroma'}.")
    print(
        f"Each answer: the best hits (dense and BM25 fused), each window grown toward the evidence around it, "
        f"merged where they touch, until {DEMO_BUDGET} tokens (cl100k_base) are full."
    )
    for question in DEMO_QUESTIONS:
        _print_units(question, retriever.invoke(question, max_tokens=DEMO_BUDGET, merge=True), as_json=False)
    return 0


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
    from langchain_expand.tools.corpus import read_queries
    from langchain_expand.tools.report import budget_report, write_plots

    windows = _windows(args)
    for flag, value, low in (("--k", args.k, 1), ("--budget", args.budget, 1), ("--reserve", args.reserve, 0)):
        if value < low:
            msg = f"{flag} must be {low} or more, got {value}."
            raise ValueError(msg)
    if args.reserve >= args.budget:
        msg = f"--reserve ({args.reserve}) must leave room in --budget ({args.budget}) for the context."
        raise ValueError(msg)
    queries = [str(row["query"]) for row in read_queries(args.queries)] if args.queries else None
    measure = functools.partial(
        budget_report,
        queries=queries,
        k=args.k,
        budget=args.budget,
        windows=windows,
        reserve=args.reserve,
        progress=args.format == "table" and sys.stderr.isatty(),
    )
    if args.corpus is None:  # the index that `index` built: read, not embedded again
        args.mode = "window"
        _check_indexed(args)
        where = f"{args.chroma_host}:{args.chroma_port}" if args.chroma_host else str(args.home)
        result = measure(index=windows_retriever(args), corpus_name=where)
    else:
        skipped: list[str] = []
        documents = list(read_corpus([args.corpus], skip_bad=args.skip_bad, skipped=skipped))
        for note in skipped:
            print(f"skipped {note}", file=sys.stderr)
        result = measure(documents, embeddings=embeddings_of(args), corpus_name=args.corpus.name)
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
    args = parser().parse_args(argv)
    commands = {"index": index, "query": _query, "demo": _demo, "report": _report}
    try:
        return commands[args.command](args)
    except ValueError as exc:  # bad input: say what and where, without a traceback
        print(f"langchain-expand {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM: what is kept and what to do, not a traceback
        kept = " What was written is kept: run the same command again to resume."
        print(
            f"langchain-expand {args.command}: interrupted.{kept if args.command == 'index' else ''}", file=sys.stderr
        )
        return 128 + (exc.signum if isinstance(exc, Stopped) else signal.SIGINT)


if __name__ == "__main__":
    sys.exit(main())
