"""``langchain-expand index``: the corpus streamed in committed batches, with a bar, stoppable at any step.

Each batch of documents is committed before the next is read, so a run stopped anywhere
(Ctrl-C, SIGTERM, a kill) resumes where it stopped; a large document resumes from the write
batches it wrote. What the index holds and the corpus does not is reported, or removed with
``--prune``.
"""

from __future__ import annotations

import argparse
import itertools
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand.tools.corpus import read_corpus
from langchain_expand.tools.opening import (
    counted,
    embeddings_of,
    indexed_ids,
    parents_retriever,
    root_of,
    windows_retriever,
)
from langchain_expand.units import SECTIONS

__all__ = ["Stopped", "for_windows", "index"]


def _batches(items: Iterable[Document], size: int) -> Iterator[list[Document]]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch


def for_windows(doc: Document) -> Document:
    """Section offsets matter to parent splitting, not to sentences: don't copy them onto each."""
    meta = {k: v for k, v in doc.metadata.items() if k != SECTIONS}
    return Document(doc.page_content, metadata=meta, id=doc.id)


class Stopped(KeyboardInterrupt):
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
        """Raise :class:`Stopped` once a signal has come."""
        if self.signum is not None:
            raise Stopped(self.signum)


def index(args: argparse.Namespace) -> int:
    """Stream the corpus in batches; each batch is committed, so a re-run resumes."""
    from rich.console import Console
    from rich.progress import Progress

    skipped: list[str] = []
    documents = read_corpus(args.paths, skip_bad=args.skip_bad, skipped=skipped, root=root_of(args))
    batches = _batches(documents, args.batch_docs)
    first = next(batches, None)
    if first is None:  # before any model loads or store opens
        paths = ", ".join(str(p) for p in args.paths)
        why = f" ({len(skipped)} skipped: {'; '.join(skipped[:3])})" if skipped else ""
        msg = f"found no documents in {paths}{why}: give .txt, .md or .jsonl files, or folders holding them."
        raise ValueError(msg)
    model = _Progressing(embeddings_of(args))
    build = parents_retriever if args.mode == "parent" else windows_retriever
    retriever: Any = build(args, model, args.write_batch)
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
                result = retriever.index_documents(batch if args.mode == "parent" else [for_windows(d) for d in batch])
                ids += result.ids
                written += len(result.written)
                done += sum(sizes.get(str(d.id), 0) for d in batch)
                progress.update(task, completed=done)  # unchanged documents count as done too
                if args.verbose:  # a log line per committed batch, for logs and scripts
                    print(f"indexed {counted(len(ids), 'document')}", file=sys.stderr, flush=True)
    where = f"{args.chroma_host}:{args.chroma_port}" if args.chroma_host else args.home
    stale = sorted(set(indexed_ids(args, retriever)) - set(ids))
    if args.prune and stale:
        retriever.delete(stale)
    counts = f"{written} embedded, {len(ids) - written} unchanged"
    if stale:
        counts += f", {len(stale)} removed" if args.prune else ""
    print(f"indexed {counted(len(ids), 'document')} ({args.mode} mode) into {where}: {counts}")
    if stale and not args.prune:
        paths = ", ".join(map(str, args.paths))
        verb = "is" if len(stale) == 1 else "are"
        print(f"{counted(len(stale), 'document')} in the index {verb} not in {paths} (kept; --prune removes them)")
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
            for d in read_corpus(args.paths, skip_bad=True, skipped=[], root=root_of(args))  # reported by the index
        }
    except ValueError:
        return {}
