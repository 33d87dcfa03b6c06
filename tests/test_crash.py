"""The crash harness: an update killed at every write it makes, for both retrievers.

An update from version 1 to version 2 of a small corpus is run once to count its writes
(each ``add_documents``/``delete`` on the vector store, ``mset``/``mdelete`` on the
docstore, ``replace``/``delete`` on the lexical index). Then, for every one of those
points, a fresh store holding version 1 is updated again and the process "dies" (an
exception no code catches) just before that write. At each point:

1. nothing wrong is served: every window is one whole version of its document, every
   parent is a parent of one version and its matched children are of that same version;
2. re-adding either version (the edit replayed, or reverted) leaves a store equal, record
   for record, to a clean index of that version;
3. deleting the documents instead leaves no record of them, committed or not.

The same is done for a first ``add_documents`` into an empty store (version 1 written, killed
before each of its writes): a document that never got its head must still replay and delete
cleanly (issue #34, finding 5).

Real Chroma, real MiniLM, a real SQLite docstore and lexical index; only the kill is staged.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    LexicalIndex,
    MarkdownSectionSplitter,
    Performance,
    SentenceWindowRetriever,
    SQLDocStore,
    chroma_store,
)

from .conftest import CountingEmbeddings

pytestmark = pytest.mark.integration  # the embedding model

V1 = {
    "plan": "# Plan\nThe remote costs 25 euros. It is yellow.\n\n# Design\nButtons are round. The case is rubber.",
    "notes": "# Notes\nThe meeting starts at nine. Marketing reports first. Then design speaks.",
    "memo": "The warranty lasts two years.",
}
V2 = {
    "plan": "# Plan\nThe remote costs 30 euros now. It is blue. It ships in May.\n\n"
    "# Design\nButtons are square.\n\n# Risks\nCall 555-0100 about the chips.",
    "notes": "The meeting starts at ten.",
    "memo": "The Zurich office closes in May.",
}
"""Issue #34, finding 4: "notes" shrinks to one sentence and "memo" is one sentence in both
versions; a one-sentence version has no body, so its update writes the lexical index and then
the head, and a kill between the two, then a revert, left the index on the killed version."""
QUERIES = ["what does the remote cost", "which colour is it", "buttons", "when does the meeting start", "chips risk"]
_names = itertools.count()


class Died(BaseException):
    """The process died: nothing in the library catches a BaseException."""


class Killer:
    """Counts writes; raises :class:`Died` just before write number ``at`` (never with None)."""

    def __init__(self, at: int | None) -> None:
        self.at = at
        self.count = 0

    def arm(self, owner: Any, *methods: str) -> None:
        for name in methods:
            original = getattr(owner, name)

            def wrapped(*args: Any, _original: Callable[..., Any] = original, **kwargs: Any) -> Any:
                if self.count == self.at:
                    raise Died
                self.count += 1
                return _original(*args, **kwargs)

            object.__setattr__(owner, name, wrapped)


def documents(version: dict[str, str]) -> list[Document]:
    return [
        Document(text, id=doc_id, metadata={"version": 1 if version is V1 else 2}) for doc_id, text in version.items()
    ]


# -- windows ------------------------------------------------------------------------------------


def windows(folder: Path, minilm: Embeddings, killer: Killer) -> SentenceWindowRetriever:
    n = next(_names)
    retriever = SentenceWindowRetriever(
        vectorstore=chroma_store(f"crash-{n}", embeddings=minilm),
        lexical=LexicalIndex(folder / f"lexical-{n}.sqlite"),
        performance=Performance(batch_size=2),
    )
    # the adapter: sentences embedded with their context are written past the store's add_documents
    killer.arm(retriever._vectors, "add_documents", "delete")
    killer.arm(retriever.lexical, "replace", "delete")
    killer.arm(retriever._vectors, "mark")  # the change mark, written last: readers' snapshots follow it
    return retriever


def window_records(retriever: SentenceWindowRetriever) -> dict[str, tuple[str, dict]]:
    got = retriever.vectorstore._collection.get(include=["documents", "metadatas"])  # type: ignore[attr-defined]
    return {i: (text, meta) for i, text, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)}


def lexical_rows(retriever: SentenceWindowRetriever | BudgetedParentDocumentRetriever) -> list[tuple]:
    lexical = retriever.lexical
    assert lexical is not None
    ranked = lexical._db.execute(f"SELECT doc_id, i, rev, text FROM {lexical.table}").fetchall()
    copies = lexical._db.execute(
        f"SELECT doc_id, i, rev, start, end, gap, text, tokens, vector IS NOT NULL FROM {lexical.table}_records"
    ).fetchall()
    return sorted(ranked) + sorted(copies)


def served_windows_are_whole(retriever: SentenceWindowRetriever) -> None:
    for query in QUERIES:
        for call in ({"k": 6, "before": 1, "after": 1}, {"max_tokens": 60}):
            for unit in retriever.invoke(query, **call):
                m = unit.metadata
                sources = [version[m["doc_id"]] for version in (V1, V2)]
                assert any(s[m["start_index"] : m["end_index"]] == unit.page_content for s in sources), unit


def test_windows_killed_at_every_write(tmp_path: Path, minilm: Embeddings) -> None:
    def snapshot(retriever: Any) -> object:
        return window_records(retriever), lexical_rows(retriever)

    kill_at_every_write(lambda killer: windows(tmp_path, minilm, killer), snapshot, served_windows_are_whole)


def kill_at_every_write(
    make: Callable[[Killer], Any], snapshot: Callable[[Any], object], check: Callable[[Any], None]
) -> None:
    """The harness: count a write's steps, then kill a fresh store before each one.

    Two writes are killed: the first ``add_documents`` (of version 1, into an empty store) and
    the update (version 1 to version 2). After each kill the store is replayed with version 1,
    with version 2, or the documents are deleted; each outcome must equal a clean store.
    """
    clean = {}
    for version in (V1, V2, None):
        reference = make(Killer(None))
        if version is not None:
            reference.add_documents(documents(version))
        clean[name(version)] = snapshot(reference)
    assert clean["deleted"] == snapshot(emptied(make(Killer(None))))  # a delete leaves what a fresh store holds

    for before, after in ((None, V1), (V1, V2)):
        counting = Killer(None)
        retriever = make(counting)
        if before is not None:
            retriever.add_documents(documents(before))
        start = counting.count
        retriever.add_documents(documents(after))
        writes = counting.count - start
        assert writes >= 4  # body batches, deletions, heads at least

        for at, outcome in itertools.product(range(writes), (V1, V2, None)):
            killer = Killer(None)
            retriever = make(killer)
            if before is not None:
                retriever.add_documents(documents(before))
            killer.at = killer.count + at
            with pytest.raises(Died):
                retriever.add_documents(documents(after))
            check(retriever)
            killer.at = None
            if outcome is None:
                retriever.delete(list(V1))
            else:
                retriever.add_documents(documents(outcome))
            # Equal, record for record, to a clean store: it serves what a clean store serves.
            assert snapshot(retriever) == clean[name(outcome)], (
                f"{name(after)} killed at write {at} of {writes}, then {name(outcome)}"
            )


def name(version: dict[str, str] | None) -> str:
    return "deleted" if version is None else "v1" if version is V1 else "v2"


def emptied(retriever: Any) -> Any:
    """A store that held version 1 and had it deleted."""
    retriever.add_documents(documents(V1))
    retriever.delete(list(V1))
    return retriever


# -- parents ------------------------------------------------------------------------------------


def parents(folder: Path, minilm: Embeddings, killer: Killer) -> BudgetedParentDocumentRetriever:
    n = next(_names)
    retriever = BudgetedParentDocumentRetriever(
        vectorstore=chroma_store(f"crash-parents-{n}", embeddings=minilm),
        docstore=SQLDocStore(f"sqlite:///{folder}/docstore-{n}.sqlite"),
        parent_splitter=MarkdownSectionSplitter(max_level=1),
        lexical=LexicalIndex(folder / f"lexical-parents-{n}.sqlite"),
        batch_size=2,
    )
    # The adapter: every child passes it, also those written with their context's vector (Chroma's upsert).
    killer.arm(retriever._vectors, "add_documents", "delete")
    killer.arm(retriever.docstore, "mset", "mdelete")
    killer.arm(retriever.lexical, "replace", "delete")
    return retriever


def parent_records(retriever: BudgetedParentDocumentRetriever) -> tuple[dict, dict, list[tuple]]:
    children = retriever.vectorstore._collection.get(include=["documents", "metadatas"])  # type: ignore[attr-defined]
    keys = sorted(retriever.docstore.yield_keys())
    stored = retriever.docstore.mget(keys)
    return (
        {i: (t, m) for i, t, m in zip(children["ids"], children["documents"], children["metadatas"], strict=True)},
        {k: (d.page_content, d.metadata) for k, d in zip(keys, stored, strict=True) if d is not None},
        lexical_rows(retriever) if retriever.lexical is not None else [],
    )


def served_parents_are_one_version(retriever: BudgetedParentDocumentRetriever) -> None:
    for query in QUERIES:
        for parent in retriever.invoke(query, k=3):
            doc_id = parent.metadata["doc_id"]
            versions = [v[doc_id] for v in (V1, V2) if parent.page_content in v[doc_id]]
            assert versions, parent
            for child in parent.metadata["children"]:
                a, b = child["in_parent"]
                assert any(parent.page_content[a:b] == v[child["start_index"] : child["end_index"]] for v in versions)


def test_parents_killed_at_every_write(tmp_path: Path, minilm: Embeddings) -> None:
    kill_at_every_write(
        lambda killer: parents(tmp_path, minilm, killer), parent_records, served_parents_are_one_version
    )


def test_long_lived_readers_in_every_mode_serve_the_committed_text_after_a_writer_dies_before_its_mark(
    tmp_path: Path, minilm: Embeddings
) -> None:
    # issue #51, finding 1: a writer killed after its heads but before renewing the change mark
    # left readers that had built their snapshot (or read heads) at the old mark serving the
    # old text, and a deleted document, until another writer finished
    store = chroma_store("died-before-mark", embeddings=minilm)
    lexical = tmp_path / "lexical.sqlite"
    modes: list[dict[str, Any]] = [
        {},
        {"performance": Performance(snapshot_limit=0)},
        {"performance": Performance(in_memory=False)},
    ]
    readers = [SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(lexical), **mode) for mode in modes]
    writer = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(lexical))
    writer.add_documents(documents(V1))

    def served(retriever: SentenceWindowRetriever) -> list[Document]:
        return [u for q in QUERIES for call in ({"k": 2}, {"max_tokens": 60}) for u in retriever.invoke(q, **call)]

    for reader in readers:
        for _ in range(2):  # the snapshot, BM25 and heads built and read at the mark
            assert {u.metadata["doc_id"] for u in served(reader)} == set(V1)
    Killer(0).arm(writer._vectors, "mark")
    with pytest.raises(Died):
        writer.add_documents(documents(V2))  # every head now commits version 2; the mark is the old one
    for reader in readers:
        for unit in served(reader):
            m = unit.metadata
            assert V2[m["doc_id"]][m["start_index"] : m["end_index"]] == unit.page_content, (m, unit.page_content)
    with pytest.raises(Died):
        writer.delete(["memo"])
    for reader in readers:
        assert "memo" not in {u.metadata["doc_id"] for u in served(reader)}


# -- a long document, stopped between its batches ------------------------------------------------

LONG = "\n\n".join(
    f"# Part {p}\n" + " ".join(f"Item {p}-{i} of the plan is due in week {i + p}." for i in range(12)) for p in range(6)
)
"""78 sentences (six headings and 72 items), 8 batches of 10: a long document at ``batch_size=10``."""


@pytest.mark.parametrize("kind", ["windows", "parents"])
def test_a_long_document_stopped_between_batches_embeds_only_the_rest_when_added_again(
    kind: str, tmp_path: Path, minilm: Embeddings
) -> None:
    # issue #52, finding 1: a document is written a batch at a time, but a run stopped inside it
    # embedded it again from the start, so a large file never finished under repeated stops
    def make(name: str, killer: Killer) -> tuple[Any, CountingEmbeddings]:
        model = CountingEmbeddings(minilm)
        store = chroma_store(f"long-{kind}-{name}", embeddings=model)
        retriever: Any
        if kind == "windows":
            retriever = SentenceWindowRetriever(
                vectorstore=store,
                lexical=LexicalIndex(tmp_path / f"{name}.sqlite"),
                performance=Performance(batch_size=10),
            )
        else:
            retriever = BudgetedParentDocumentRetriever(
                vectorstore=store,
                docstore=SQLDocStore(f"sqlite:///{tmp_path}/{name}-docstore.sqlite"),
                child_splitter=RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=0),
                parent_splitter=MarkdownSectionSplitter(max_level=1),
                batch_size=10,
            )
        killer.arm(retriever._vectors, "add_documents")
        return retriever, model

    records = window_records if kind == "windows" else parent_records
    reference, clean_model = make("clean", Killer(None))
    reference.add_documents([Document(LONG, id="long")])
    units = clean_model.documents_embedded
    assert units > 50

    killer = Killer(3)  # three batches written, the fourth never
    retriever, model = make("stopped", killer)
    with pytest.raises(Died):
        retriever.add_documents([Document(LONG, id="long")])
    assert model.documents_embedded == 30  # the process died as the fourth batch began
    killer.at = None
    model.documents_embedded = 0
    retriever.add_documents([Document(LONG, id="long")])
    assert model.documents_embedded == units - 30  # the three batches written are not embedded again
    assert records(retriever) == records(reference)
    if kind == "windows":
        assert lexical_rows(retriever) == lexical_rows(reference)
    for query in QUERIES:
        assert retriever.invoke(query) == reference.invoke(query)
