"""The command line's arguments: the shared options, and each command's own.

Every query flag is one argument of a retriever's ``invoke``, with the retriever's own default
in its help (read from the classes, so the two never disagree). The shared options go before
the command or after it.
"""

from __future__ import annotations

import argparse
import difflib
import json
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["HOME", "parser"]

HOME = Path(".langchain-expand")
"""Where the embedded indexes live unless ``--home`` says otherwise."""


def _defaults() -> tuple[dict[str, Any], dict[str, Any]]:
    """The retrievers' own defaults, so ``--help`` shows what the classes do."""
    from langchain_expand.parents.retriever import BudgetedParentDocumentRetriever
    from langchain_expand.windows.retriever import SentenceWindowRetriever

    def of(cls: Any) -> dict[str, Any]:
        return {name: field.default for name, field in cls.model_fields.items()}

    return of(SentenceWindowRetriever), of(BudgetedParentDocumentRetriever)


def _version() -> str:
    from langchain_expand.version import VERSION

    return VERSION


class _Parser(argparse.ArgumentParser):
    """argparse's parser, which also says what an option it does not know is (``--budgett``, ``query --quiet``)."""

    def error(self, message: str) -> NoReturn:
        """Print the usage and the error, naming for each unknown option its command or the closest known one; exit 2.

        An option of another command (``query --quiet``: ``--quiet`` is ``index``'s) names the
        commands that take it; any other, the closest option any command takes.
        """
        if "unrecognized arguments:" in message:
            parsers = _parsers(self)
            known = [o for p in parsers.values() for o in p._option_string_actions]
            unknown = [a.split("=")[0] for a in message.split(":", 1)[1].split() if a.startswith("--")]
            notes = []
            for option in unknown:
                owners = [name for name, p in parsers.items() if name and option in p._option_string_actions]
                if owners:
                    notes.append(f"{option} is an option of {' and '.join(owners)} only")
                else:
                    notes += [f"did you mean {m}?" for m in difflib.get_close_matches(option, known, n=1)]
            if notes:
                message += f" ({'; '.join(notes)})"
        super().error(message)


def _parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``parser`` (named ``""``) and its subcommands' parsers, by command name."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {"": parser, **{name: p for a in subs for name, p in a.choices.items()}}


def parser() -> argparse.ArgumentParser:
    """The ``langchain-expand`` command's parser: shared options, then ``index``, ``query``, ``demo``, ``report``."""
    top = _Parser(
        prog="langchain-expand",
        description="Index files, query them within a token budget, report on windows against parents, "
        "run the demo. Indexes live under --home unless --chroma-host names a Chroma server.",
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    _global_arguments(top, defaults=True)
    common = _Parser(add_help=False)
    _global_arguments(common, defaults=False)
    sub = top.add_subparsers(dest="command", required=True)
    _index_arguments(sub.add_parser("index", parents=[common], help="index .txt, .md and .jsonl files (resumable)"))
    _query_arguments(sub.add_parser("query", parents=[common], help="ask the index"))
    sub.add_parser("demo", parents=[common], help="index the bundled sample corpus and ask it a few questions")
    _report_arguments(
        sub.add_parser("report", parents=[common], help="measure windows and parents on a corpus against a budget")
    )
    return top


def _global_arguments(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """The options every command reads: where the index lives and how to embed.

    Accepted before the command and after it. Only the top-level parser sets defaults; a
    command's copies leave an option it was not given alone (``argparse.SUPPRESS``), so
    ``--home x query ...`` is not undone by the command's default.
    """
    group = parser if defaults else parser.add_argument_group("shared by every command (also accepted before it)")

    def add(*names: str, default: Any = None, help: str, **kwargs: Any) -> None:
        shown = help.replace("%(default)s", str(default))
        group.add_argument(*names, default=default if defaults else argparse.SUPPRESS, help=shown, **kwargs)

    add("--home", type=Path, default=HOME, help="where embedded indexes live (default: %(default)s)")
    add("--chroma-host", help="use a Chroma server (chroma run) instead of an embedded one")
    add("--chroma-port", type=int, default=8000, help="the Chroma server's port (default: %(default)s)")
    add(
        "--docstore",
        help="SQLAlchemy URL of the parent docstore (default: SQLite under --home); a PostgreSQL one holds the "
        "lexical index too where --chroma-host is given",
    )
    add("--device", default="cpu", help="embedding device: cpu, or cuda where a GPU exists (default: %(default)s)")
    add("--embed-batch", type=int, default=64, help="sentences per embedding forward pass (default: %(default)s)")
    add(
        "--lexical",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fuse a BM25 ranking of the sentences (window mode) or children (parent mode) with the dense one, "
        "in SQLite under --home for the embedded store, in the --docstore database with --chroma-host when that "
        "is PostgreSQL (default: on)",
    )


def _index_arguments(index: argparse.ArgumentParser) -> None:
    index.add_argument("paths", nargs="+", type=Path, help=".txt, .md and .jsonl files, or folders searched for them")
    index.add_argument(
        "--mode",
        choices=["window", "parent"],
        default="window",
        help="embed sentences (window) or section children (parent) (default: %(default)s)",
    )
    index.add_argument("--batch-docs", type=int, default=32, help="documents committed per batch (default: 32)")
    index.add_argument(
        "--write-batch",
        type=int,
        default=4096,
        help="sentences (or children) embedded and written per store call; a stopped run of a large "
        "document resumes after the last one written (default: %(default)s)",
    )
    _skip_bad(index)
    index.add_argument("--prune", action="store_true", help="remove indexed documents that are no longer in PATHS")
    index.add_argument(
        "--root",
        type=Path,
        help="the folder file ids are relative to (default: the folder holding --home, so one file is one document "
        "from any working directory)",
    )
    output = index.add_mutually_exclusive_group()
    output.add_argument("--quiet", action="store_true", help="no progress bar (it shows only on a terminal)")
    output.add_argument(
        "--verbose", action="store_true", help="a line on stderr per committed batch, and the model's loading bar"
    )


def _skip_bad(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--skip-bad",
        action="store_true",
        help="skip (and list) a file that is not UTF-8 text or is blank, or a malformed JSON Lines row, "
        "instead of stopping",
    )


def _query_arguments(query: argparse.ArgumentParser) -> None:
    windows, parents = _defaults()
    query.add_argument("question", help="what to ask, in quotes")
    query.add_argument(
        "--mode",
        choices=["window", "parent"],
        default="window",
        help="ask the sentence index (window) or the section index (parent) (default: %(default)s)",
    )
    from langchain_expand.windows.plan import DEFAULT_K, DEFAULT_SIDE

    fixed = windows["k"] or parents["k"]
    k_help = f"{fixed}" if fixed else f"as many as --budget holds, else {DEFAULT_K}"
    query.add_argument("--k", type=int, help=f"units returned (default: {k_help})")
    side = {name: DEFAULT_SIDE if windows[name] is None else windows[name] for name in ("before", "after")}
    query.add_argument("--before", type=int, help=f"window mode: sentences before each hit (default: {side['before']})")
    query.add_argument("--after", type=int, help=f"window mode: sentences after each hit (default: {side['after']})")
    query.add_argument(
        "--window",
        choices=["guided", "fixed"],
        help="window mode: guided windows grow toward the evidence until --budget is full; fixed ones are "
        "--before/--after around each hit (default: guided with --budget and no --before/--after, else fixed)",
    )
    query.add_argument(
        "--merge",
        action=argparse.BooleanOptionalAction,
        help="window mode: merge overlapping windows, so no text is sent twice (default: merge)",
    )
    query.add_argument(
        "--budget",
        "--max-tokens",
        type=int,
        help="fit the joined context into this many tokens: the retrievers' max_tokens (default: no budget)",
    )
    query.add_argument(
        "--filter",
        type=_json_object,
        help='only units whose metadata match, in the store\'s syntax as JSON: \'{"doc_id": "notes/a.md"}\' for '
        'one document (its id as indexed), \'{"source": {"$in": ["a.md", "b.md"]}}\' (default: none)',
    )
    query.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="text to read, or one JSON object (default: %(default)s)",
    )


def _json_object(given: str) -> dict[str, object]:
    """``--filter``'s value: a JSON object, else an error that says what it takes."""
    try:
        value = json.loads(given)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        msg = f'a JSON object, e.g. \'{{"doc_id": "notes/a.md"}}\'; got {given!r}'
        raise argparse.ArgumentTypeError(msg)
    return value


def _report_arguments(report: argparse.ArgumentParser) -> None:
    report.add_argument(
        "corpus",
        type=Path,
        nargs="?",
        help="a folder of .txt/.md files, or a JSON Lines file, embedded for the report; leave it out to "
        "measure the index under --home, reading its sentences and vectors (no document embedded)",
    )
    report.add_argument(
        "--queries", type=Path, help='JSON Lines of {"query": ...} (default: 200 sentences of the corpus, sampled)'
    )
    report.add_argument("--k", type=int, default=8, help="units per query (default: %(default)s)")
    report.add_argument("--budget", type=int, default=16_000, help="the prompt budget in tokens (default: %(default)s)")
    sweep = report.add_mutually_exclusive_group()
    sweep.add_argument("--radius", default="0,1,2,4,8", help="symmetric radii (default: %(default)s)")
    sweep.add_argument("--windows", help="before:after pairs instead of --radius, e.g. 3:1,2:2")
    report.add_argument(
        "--reserve", type=int, default=0, help="tokens the rest of the prompt needs (default: %(default)s)"
    )
    report.add_argument(
        "--format", choices=["table", "markdown", "json"], default="table", help="(default: %(default)s)"
    )
    report.add_argument("--plots", type=Path, help="write PNG histograms into this folder")
    _skip_bad(report)
