"""What the command line opens: the model, the store, either retriever over ``--home``, and its documents.

Shared by indexing (:mod:`.indexing`) and the other commands (:mod:`.cli`): one place that says
where an index lives (``--home``, a Chroma server, a SQL docstore) and how each retriever is
built over it, so ``index`` writes what ``query`` and ``report`` open.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings

from langchain_expand.units import STORED_DOC, STORED_INDEX
from langchain_expand.windows.performance import Performance

if TYPE_CHECKING:
    from langchain_core.vectorstores import VectorStore

    from langchain_expand.parents.retriever import BudgetedParentDocumentRetriever
    from langchain_expand.store.lexical import BaseLexicalIndex
    from langchain_expand.windows.retriever import SentenceWindowRetriever

__all__ = [
    "counted",
    "embeddings_of",
    "indexed_ids",
    "lexical_of",
    "parents_retriever",
    "root_of",
    "store_of",
    "windows_retriever",
]


def embeddings_of(args: argparse.Namespace) -> Embeddings:
    """The model; its loading bar ("Loading weights") only with ``index --verbose``."""
    from langchain_expand.store.defaults import default_embeddings

    if not getattr(args, "verbose", False):
        import transformers

        transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    return default_embeddings(device=args.device, batch_size=args.embed_batch)


def store_of(args: argparse.Namespace, collection: str, embeddings: Embeddings | None = None) -> VectorStore:
    """The Chroma collection ``collection``: on the ``--chroma-host`` server, else embedded under ``--home``."""
    import chromadb

    from langchain_expand.store.defaults import chroma_store

    embeddings = embeddings or embeddings_of(args)
    if args.chroma_host:
        client = chromadb.HttpClient(host=args.chroma_host, port=args.chroma_port)
        return chroma_store(collection, client=client, embeddings=embeddings)
    return chroma_store(collection, persist_directory=args.home / "chroma", embeddings=embeddings)


def windows_retriever(
    args: argparse.Namespace, embeddings: Embeddings | None = None, write_batch: int = 4096
) -> SentenceWindowRetriever:
    """The window retriever over ``--home``: its sentences, and BM25 over them (:func:`lexical_of`)."""
    from langchain_expand.windows.retriever import SentenceWindowRetriever

    store = store_of(args, "sentences", embeddings)
    lexical = lexical_of(args, "sentences")
    return SentenceWindowRetriever(vectorstore=store, lexical=lexical, performance=Performance(batch_size=write_batch))


def lexical_of(args: argparse.Namespace, units: str) -> BaseLexicalIndex | None:
    """BM25 over a mode's ``units`` (``sentences``, ``children``), a table each; None with ``--no-lexical``.

    A SQLite file under ``--home`` is seen by one machine: with a shared Chroma server the lexical
    index lives in the ``--docstore`` database when that is PostgreSQL, and is off otherwise.
    """
    from langchain_expand.store.pglexical import PostgresLexicalIndex
    from langchain_expand.store.sqlite import LexicalIndex

    if args.lexical and not args.chroma_host:
        return LexicalIndex(args.home / "lexical.sqlite", table=units)
    if args.lexical and (args.docstore or "").startswith("postgresql"):
        return PostgresLexicalIndex(args.docstore, table=f"langchain_expand_{units}")
    return None


def parents_retriever(
    args: argparse.Namespace, embeddings: Embeddings | None = None, write_batch: int = 4096
) -> BudgetedParentDocumentRetriever:
    """The parent retriever over ``--home``: children in Chroma, parents in the SQL docstore, BM25 over the children."""
    from langchain_expand.parents.retriever import BudgetedParentDocumentRetriever
    from langchain_expand.store.docstore import SQLDocStore
    from langchain_expand.text.sections import MarkdownSectionSplitter, SectionSplitter

    url = args.docstore or f"sqlite:///{args.home / 'docstore.sqlite'}"
    return BudgetedParentDocumentRetriever(
        vectorstore=store_of(args, "children", embeddings),
        docstore=SQLDocStore(url),
        parent_splitter=SectionSplitter(fallback=MarkdownSectionSplitter(max_level=2)),
        lexical=lexical_of(args, "children"),
        batch_size=write_batch,
    )


def root_of(args: argparse.Namespace) -> Path:
    """What file ids are relative to: ``--root``, else the folder holding ``--home``.

    Not the working directory: the same file indexed from two folders into one home would be
    two documents, and a query would send its text twice.
    """
    return Path(args.root) if args.root is not None else Path(args.home).resolve().parent


def indexed_ids(args: argparse.Namespace, retriever: Any) -> list[str]:
    """Every document id the index of this mode holds."""
    if args.mode == "parent":
        return [key[: -len(".p0")] for key in retriever.docstore.yield_keys() if key.endswith(".p0")]
    from langchain_expand.store.adapters import adapt

    heads = adapt(retriever.vectorstore, "The CLI").where({STORED_INDEX: 0}, vectors=False) or []
    return [str(head.metadata[STORED_DOC]) for head, _ in heads if STORED_DOC in head.metadata]


def counted(n: int, noun: str) -> str:
    """``1 document``, ``2 documents``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
