"""The ``langchain-expand`` command: index files, query them, report on them, run the demo.

Everything lives under ``./.langchain-expand/`` by default: an embedded, persistent
Chroma and a SQLite docstore that a later run (or another process) opens again. For a
shared deployment, ``--chroma-host``/``--chroma-port`` point at a Chroma server and
``--docstore`` at a SQL database; a PostgreSQL one also holds the lexical index there.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand.calls import check_query
from langchain_expand.tools.arguments import parser
from langchain_expand.tools.corpus import read_corpus
from langchain_expand.units import (
    DOC_ID,
    END,
    HIT,
    SCORE,
    SECTIONS,
    SPAN,
    START,
    STORED_DOC,
    STORED_INDEX,
    TITLE,
    TOKENS,
    TRUNCATED,
)

if TYPE_CHECKING:
    from langchain_core.vectorstores import VectorStore

    from langchain_expand.parents.retriever import BudgetedParentDocumentRetriever
    from langchain_expand.windows.retriever import SentenceWindowRetriever

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


def _embeddings(args: argparse.Namespace) -> Embeddings:
    """The model; its loading bar ("Loading weights") only with ``index --verbose``."""
    from langchain_expand.store.defaults import default_embeddings

    if not getattr(args, "verbose", False):
        import transformers

        transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    return default_embeddings(device=args.device, batch_size=args.embed_batch)


def _store(args: argparse.Namespace, collection: str, embeddings: Embeddings | None = None) -> VectorStore:
    import chromadb

    from langchain_expand.store.defaults import chroma_store

    embeddings = embeddings or _embeddings(args)
    if args.chroma_host:
        client = chromadb.HttpClient(host=args.chroma_host, port=args.chroma_port)
        return chroma_store(collection, client=client, embeddings=embeddings)
    return chroma_store(collection, persist_directory=args.home / "chroma", embeddings=embeddings)


def _windows_retriever(args: argparse.Namespace, embeddings: Embeddings | None = None) -> SentenceWindowRetriever:
    from langchain_expand.store.lexical import BaseLexicalIndex, LexicalIndex
    from langchain_expand.store.pglexical import PostgresLexicalIndex
    from langchain_expand.windows.retriever import SentenceWindowRetriever

    # A SQLite file is seen by one machine: with a shared Chroma server the lexical index lives in
    # the --docstore database when that is PostgreSQL, and is off otherwise.
    lexical: BaseLexicalIndex | None = None
    if args.lexical and not args.chroma_host:
        lexical = LexicalIndex(args.home / "lexical.sqlite")
    elif args.lexical and (args.docstore or "").startswith("postgresql"):
        lexical = PostgresLexicalIndex(args.docstore)
    return SentenceWindowRetriever(vectorstore=_store(args, "sentences", embeddings), lexical=lexical)


def _parents_retriever(
    args: argparse.Namespace, embeddings: Embeddings | None = None
) -> BudgetedParentDocumentRetriever:
    from langchain_expand.parents.retriever import BudgetedParentDocumentRetriever
    from langchain_expand.store.docstore import SQLDocStore
    from langchain_expand.text.sections import MarkdownSectionSplitter, SectionSplitter

    url = args.docstore or f"sqlite:///{args.home / 'docstore.sqlite'}"
    return BudgetedParentDocumentRetriever(
        vectorstore=_store(args, "children", embeddings),
        docstore=SQLDocStore(url),
        parent_splitter=SectionSplitter(fallback=MarkdownSectionSplitter(max_level=2)),
    )


def _batches(items: Iterable[Document], size: int) -> Iterator[list[Document]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def _for_windows(doc: Document) -> Document:
    """Section offsets matter to parent splitting, not to sentences: don't copy them onto each."""
    meta = {k: v for k, v in doc.metadata.items() if k != SECTIONS}
    return Document(doc.page_content, metadata=meta, id=doc.id)


class _Stopped(KeyboardInterrupt):
    """Indexing stopped by a signal; ``signum`` says which (the exit status is 128 + it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Stop:
    """Ctrl-C or SIGTERM while indexing: the run stops at its next step, and what it wrote is kept.

    A step is a few hundred texts embedded (a second or two) or a batch of documents begun.
    Every batch of sentences written before it stays (a large document resumes from them),
    every document committed before it too. A KeyboardInterrupt raised wherever the signal
    lands can be swallowed (Python only prints one raised inside a finaliser or a library's
    callback) and the run goes on to the end; a flag read at every step cannot be. A second
    signal stops at once. Outside the main thread, where no handler can be set, signals work
    as Python's default.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Stop:
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._first) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)

    def _first(self, signum: int, frame: object) -> None:
        self.signum = signum
        for s in self.SIGNALS:  # a second one stops now
            signal.signal(s, signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)
        name = signal.Signals(signum).name
        print(
            f"langchain-expand index: {name}: stopping at the next step, keeping what is written (again: now)",
            file=sys.stderr,
            flush=True,
        )

    def check(self) -> None:
        """Raise :class:`_Stopped` once a signal has come."""
        if self.signum is not None:
            raise _Stopped(self.signum)


def _index(args: argparse.Namespace) -> int:
    """Stream the corpus in batches; each batch is committed, so a re-run resumes."""
    from rich.console import Console
    from rich.progress import Progress

    skipped: list[str] = []
    documents = read_corpus(args.paths, skip_bad=args.skip_bad, skipped=skipped, root=_root(args))
    batches = _batches(documents, args.batch_docs)
    first = next(batches, None)
    if first is None:  # before any model loads or store opens
        paths = ", ".join(str(p) for p in args.paths)
        why = f" ({len(skipped)} skipped: {'; '.join(skipped[:3])})" if skipped else ""
        msg = f"found no documents in {paths}{why}: give .txt, .md or .jsonl files, or folders holding them."
        raise ValueError(msg)
    model = _Progressing(_embeddings(args))
    retriever: Any = _parents_retriever(args, model) if args.mode == "parent" else _windows_retriever(args, model)
    retriever.batch_size = args.write_batch  # checked on assignment, as a field
    bar = sys.stderr.isatty() and not args.quiet
    sizes = _units_by_document(args, retriever) if bar else {}  # a first pass, for the bar's total and ETA
    unit = "children" if args.mode == "parent" else "sentences"
    with Progress(*_bar_columns(unit), console=Console(stderr=True), disable=not bar) as progress:
        task = progress.add_task(f"embedding {unit}", total=sum(sizes.values()) if sizes else None)

        def advance(texts: list[str]) -> None:  # inside a document, step by step, each step drawn
            progress.advance(task, len(texts))
            progress.refresh()

        model.advance = advance
        ids: list[str] = []
        written = done = 0
        with _Stop() as stop:
            model.before_step = stop.check
            for batch in itertools.chain([first], batches):
                stop.check()
                result = retriever.index_documents(batch if args.mode == "parent" else [_for_windows(d) for d in batch])
                ids += result.ids
                written += len(result.written)
                done += sum(sizes.get(str(d.id), 0) for d in batch)
                progress.update(task, completed=done)  # unchanged documents count as done too
                if args.verbose:  # a log line per committed batch, for logs and scripts
                    print(f"indexed {_counted(len(ids), 'document')}", file=sys.stderr, flush=True)
    where = f"{args.chroma_host}:{args.chroma_port}" if args.chroma_host else args.home
    stale = sorted(set(_indexed_ids(args, retriever)) - set(ids))
    if args.prune and stale:
        retriever.delete(stale)
    counts = f"{written} embedded, {len(ids) - written} unchanged"
    if stale:
        counts += f", {len(stale)} removed" if args.prune else ""
    print(f"indexed {_counted(len(ids), 'document')} ({args.mode} mode) into {where}: {counts}")
    if stale and not args.prune:
        paths = ", ".join(map(str, args.paths))
        verb = "is" if len(stale) == 1 else "are"
        print(f"{_counted(len(stale), 'document')} in the index {verb} not in {paths} (kept; --prune removes them)")
    for note in skipped:
        print(f"skipped {note}", file=sys.stderr)
    return 0


def _bar_columns(unit: str) -> list[Any]:
    """The progress bar: units embedded of the total, the rate in units a second, the time left."""
    from rich.progress import BarColumn, MofNCompleteColumn, ProgressColumn, TextColumn, TimeRemainingColumn
    from rich.text import Text

    class Rate(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(f"{task.speed:,.0f} {unit}/s" if task.speed else f"? {unit}/s")

    return [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), Rate(), TimeRemainingColumn()]


class _Progressing(Embeddings):
    """The model, telling the progress bar of every ``STEP`` texts embedded.

    The retriever embeds up to ``batch_size`` (4,096) texts a call: a minute of a CPU's time,
    too long for a bar to sit still. The model batches 64 at a time anyway, so asking it for
    ``STEP`` at a time costs nothing.
    """

    STEP = 256

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner
        self.advance: Callable[[list[str]], object] = lambda texts: None
        self.before_step: Callable[[], object] = lambda: None
        """Called before each step: it may raise to stop the run (:class:`_Stop`)."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for at in range(0, len(texts), self.STEP):
            self.before_step()
            step = texts[at : at + self.STEP]
            vectors += self.inner.embed_documents(step)
            self.advance(step)
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def _units_by_document(args: argparse.Namespace, retriever: Any) -> dict[str, int]:
    """How many units (sentences, or children) each document of the corpus embeds: split once, not kept.

    Splitting costs a few percent of embedding; a corpus it cannot read whole (bad input is
    left to indexing) gets a bar without a total.
    """
    try:
        return {
            str(d.id): retriever.embedded_units(d)
            for d in read_corpus(args.paths, skip_bad=True, skipped=[], root=_root(args))  # reported by the index
        }
    except ValueError:
        return {}


def _root(args: argparse.Namespace) -> Path:
    """What file ids are relative to: ``--root``, else the folder holding ``--home``.

    Not the working directory: the same file indexed from two folders into one home would be
    two documents, and a query would send its text twice.
    """
    return Path(args.root) if args.root is not None else Path(args.home).resolve().parent


def _indexed_ids(args: argparse.Namespace, retriever: Any) -> list[str]:
    """Every document id the index of this mode holds."""
    if args.mode == "parent":
        return [key[: -len(".p0")] for key in retriever.docstore.yield_keys() if key.endswith(".p0")]
    from langchain_expand.store.adapters import adapt

    heads = adapt(retriever.vectorstore, "The CLI").where({STORED_INDEX: 0}, vectors=False) or []
    return [str(head.metadata[STORED_DOC]) for head, _ in heads if STORED_DOC in head.metadata]


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
            msg = (
                f"{', '.join(window_only)} only apply to window mode; parents come whole from the document's "
                "structure. Drop them, or query without --mode parent."
            )
            raise ValueError(msg)
        _check_indexed(args)
        retriever: Any = _parents_retriever(args)
        docs = retriever.invoke(args.question, k=args.k, max_tokens=args.budget)
    else:
        for flag, value in (("--before", args.before), ("--after", args.after)):
            if value is not None and value < 0:
                msg = f"{flag} must be 0 or more sentences, got {value}."
                raise ValueError(msg)
        _check_indexed(args)
        retriever = _windows_retriever(args)
        docs = retriever.invoke(
            args.question,
            k=args.k,
            before=args.before,
            after=args.after,
            merge=True if args.merge is None else args.merge,
            max_tokens=args.budget,
            window=args.window,
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
    committed = len(_indexed_ids(args, retriever))
    if committed == 0:
        return (
            f"the {args.mode} index in {where} holds no complete document: an `index` run was interrupted "
            "before its first batch was committed. Run the same `langchain-expand index` command again to resume."
        )
    budget = f", or --budget {args.budget} holds no whole sentence or parent" if args.budget is not None else ""
    return f"no unit answered the question among {_counted(committed, 'indexed document')}{budget}."


def _check_indexed(args: argparse.Namespace) -> None:
    """A query needs an index of its mode: say how to build one instead of answering "0 units"."""
    collection = "children" if args.mode == "parent" else "sentences"
    from langchain_expand.store.adapters import adapt

    if args.chroma_host:
        empty = adapt(_store(args, collection), "The CLI").count() == 0
    else:
        import chromadb

        path = args.home / "chroma"
        names = (
            {c.name for c in chromadb.PersistentClient(path=str(path)).list_collections()} if path.exists() else set()
        )
        empty = collection not in names or adapt(_store(args, collection), "The CLI").count() == 0
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
    retriever = _windows_retriever(argparse.Namespace(**{**vars(args), "home": home, "chroma_host": None}))
    corpus = [DEMO_DATA / "qmsum" / "docs.jsonl", DEMO_DATA / "emanual" / "docs.jsonl"]
    docs = [_for_windows(d) for d in read_corpus(corpus)]
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
        result = measure(index=_windows_retriever(args), corpus_name=where)
    else:
        documents = list(read_corpus([args.corpus]))
        result = measure(documents, embeddings=_embeddings(args), corpus_name=args.corpus.name)
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
    commands = {"index": _index, "query": _query, "demo": _demo, "report": _report}
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
        return 128 + (exc.signum if isinstance(exc, _Stopped) else signal.SIGINT)


def _counted(n: int, noun: str) -> str:
    """``1 document``, ``2 documents``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


if __name__ == "__main__":
    sys.exit(main())
