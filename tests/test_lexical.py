"""The lexical ranking: BM25 in SQLite FTS5, kept in step with the vector store.

The index tests run on real SQLite; the retriever tests on LangChain's real in-memory store
with deterministic fake embeddings, since what they claim (which rows exist, and when) does
not depend on what the vectors mean. Hybrid retrieval with the real model is in
tests/test_windows.py.
"""

from __future__ import annotations

import collections
import gc
import os
import re
import signal
import sqlite3
import time
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    LexicalIndex,
    Performance,
    SentenceSplitter,
    SentenceWindowRetriever,
    SQLDocStore,
    TokenCounter,
    chroma_store,
)
from langchain_expand.store.adapters.chroma import ChromaAdapter
from langchain_expand.store.lexical import LexicalHit, LocalSentence, Within
from langchain_expand.store.search import fuse_scores
from langchain_expand.store.words import fts_text, fts_words, words
from langchain_expand.windows import bm25 as bm25_module
from langchain_expand.windows import layout
from langchain_expand.windows.bm25 import Bm25

from .conftest import load_docs, load_queries, tracked_slots
from .memory import ranked_bm25
from .test_core import RecordingStore

_ZIPF = ["the"] * 12 + ["of"] * 6 + ["price"] * 3 + ["cat", "mat", "sat", "contract", "2019", "x"]
"""Words drawn as often as they appear here: a few common, most rare (repeats make ties)."""

ROWS = [
    "Fixed Price sales were $ 1,452.4 million in 2019.",
    "Other contract types represent cost plus and time and material contracts.",
    "On a fixed-price type contract, we agree to perform the work for a predetermined price.",
]


def rows(index: LexicalIndex) -> list[tuple[str, int, str]]:
    return sorted((h.doc_id, h.index, h.rev) for h in index.search("the a of for on in price sales contract", 100))


def copies(index: LexicalIndex) -> list[tuple[str, int, str]]:
    """Every local copy the index holds: document, position, revision."""
    return sorted(index._db.execute(f"SELECT doc_id, i, rev FROM {index.table}_records").fetchall())


def test_bm25_puts_the_sentence_with_the_rare_exact_term_first() -> None:
    index = LexicalIndex()
    index.replace([("report", "r1", ROWS)])
    found = index.search("what were the 1,452.4 sales", 3)
    assert (found[0].doc_id, found[0].index, found[0].rev) == ("report", 0, "r1")
    assert [h.score for h in found] == sorted((h.score for h in found), reverse=True)
    assert found[-1].score > 0
    assert index.search("zebra", 3) == []


def test_a_path_that_is_not_a_sqlite_file_is_an_error_naming_it(tmp_path: Path) -> None:
    # a folder, or a file of another kind, was sqlite3's bare "unable to open database file" /
    # "file is not a database", without the path
    (tmp_path / "notes.txt").write_text("not a database " * 100)
    for path in (tmp_path, tmp_path / "notes.txt"):
        with pytest.raises(ValueError, match=rf"LexicalIndex cannot open {re.escape(str(path))} as a SQLite file"):
            LexicalIndex(path)
    assert (tmp_path / "notes.txt").read_text().startswith("not a database")  # left as it was
    assert LexicalIndex(tmp_path / "new" / "index.sqlite").count() == 0


def test_query_text_is_never_fts_syntax() -> None:
    index = LexicalIndex()
    index.replace([("report", "r1", ROWS)])
    for query in ['"unbalanced', "price AND NOT sales", "pri*", "(contract) OR", "NEAR(a b)", "-", "::", ""]:
        index.search(query, 5)  # no sqlite3.OperationalError
    assert index.search("", 5) == []


def test_replace_is_whole_and_delete_leaves_nothing() -> None:
    index = LexicalIndex()
    index.replace([("a", "r1", ROWS), ("b", "r1", ROWS[:1])])
    index.replace([("a", "r2", ROWS[:2])])
    assert [r for r in rows(index) if r[0] == "a"] == [("a", 0, "r2"), ("a", 1, "r2")]
    index.delete(["a", "never-added"])
    assert index.documents() == {"b"}


def test_copies_of_many_documents_are_read_in_one_call_as_each_alone() -> None:
    index = LexicalIndex()
    index.replace(
        (
            f"d{n}",
            f"r{n}",
            [LocalSentence(i, f"Sentence {i} of {n}.", i, i + 1, " ", i, "c", [float(i)]) for i in range(9)],
        )
        for n in range(60)
    )
    wanted = {(f"d{n}", f"r{n}"): [8, 0, 3, 99] for n in range(0, 60, 2)}  # 99: never written
    wanted[("d1", "r0")] = [1, 2]  # another revision: left out
    wanted[("d3", "r3")] = list(range(9))
    wanted.update({(f"d{n}", f"r{n}"): list(range(9)) for n in range(20, 60)})  # over one statement's worth
    found = index.sentences_of(wanted)
    alone = {key: index.sentences(*key, indices) for key, indices in wanted.items()}
    assert found == {key: copies for key, copies in alone.items() if copies}
    assert ("d1", "r0") not in found
    assert sorted(s.i for s in found[("d0", "r0")]) == [0, 3, 8]
    assert sum(len(copies) for copies in found.values()) == 10 * 3 + 9 + 40 * 9  # d0..d18 even, d3, d20..d59


def test_local_copies_are_served_only_at_the_revision_asked_and_replaced_whole() -> None:
    index = LexicalIndex()
    vector = [0.25] * 4
    kept = [
        LocalSentence(i, text, 10 * i, 10 * i + 5, " ", 7, "tiktoken/cl100k_base", vector)
        for i, text in enumerate(ROWS)
    ]
    index.replace([("a", "r1", kept)])
    found = index.sentences("a", "r1", [2, 1, 9])
    assert sorted(s.i for s in found) == [1, 2]  # 9 was never written
    one = next(s for s in found if s.i == 1)
    assert (one.text, one.start, one.end, one.gap, one.tokens, one.counter) == (
        ROWS[1],
        10,
        15,
        " ",
        7,
        kept[1].counter,
    )
    assert one.vector is not None
    assert one.vector.tolist() == vector
    assert index.search("predetermined", 1)[0].index == 2  # ranked at its own position too
    assert index.sentences("a", "r0", [1, 2]) == []  # another revision: the caller reads the store
    index.replace([("a", "r2", kept[:1])])
    assert copies(index) == [("a", 0, "r2")]
    index.delete(["a"])
    assert copies(index) == []


def test_a_file_index_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "lexical.sqlite"
    LexicalIndex(path).replace([("report", "r1", ROWS)])
    reopened = LexicalIndex(path)
    assert reopened.search("1,452.4", 1)[0].doc_id == "report"
    assert LexicalIndex(path, table="other").documents() == set()  # tables are separate
    with pytest.raises(ValueError, match="`table` must be a plain identifier"):
        LexicalIndex(path, table="x; DROP TABLE sentences")


def test_fusion_by_scores_weighs_where_each_candidate_lies_in_both_ranges() -> None:
    # issue #50: both retrievers' candidates by 0.6 x dense + 0.4 x BM25, each min-max normalised
    dense = [0.80, 0.79, 0.78, 0.40, 0.41]
    bm25 = [0.0, 0.0, 9.0, 12.0, 0.0]
    # 2: 0.6 x 0.95 + 0.4 x 0.75 leads; 0 and 1 on dense alone (0.6, 0.585) pass BM25's best,
    # last in dense (0.4), as reciprocal rank fusion would not; 4 is weak in both
    assert fuse_scores(dense, bm25) == [2, 0, 1, 3, 4]
    assert fuse_scores(dense, bm25, weight=0.5) == [2, 0, 3, 1, 4]  # 3 ties 0 (0.5), and follows it
    assert fuse_scores([0.5, 0.5], [0.0, 0.0]) == [0, 1]  # no range: ties keep the candidates' order
    assert fuse_scores([0.2, 0.9], [3.0, 3.0]) == [1, 0]  # BM25 alike: dense decides
    assert fuse_scores([], []) == []


TEXT = "One sentence here. Two sentences now. Three of them. Four and more. Five at last."


def test_the_retriever_keeps_the_lexical_index_in_step_without_orphans(tmp_path: Path) -> None:
    store = RecordingStore()
    lexical = LexicalIndex(tmp_path / "lexical.sqlite")
    retriever = SentenceWindowRetriever(vectorstore=store, performance=Performance(batch_size=2), lexical=lexical)
    retriever.add_documents([Document(TEXT, id="a"), Document("Only one.", id="b")])
    assert lexical.documents() == {"a", "b"}
    found = sorted((h.doc_id, h.index) for h in lexical.search("one two three four five", 99))
    assert found == [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("a", 4), ("b", 0)]
    assert [(d, i) for d, i, _ in copies(lexical)] == found
    retriever.add_documents([Document("A shorter one. Now.", id="a")])
    assert sorted(store.store) == ["a::0", "a::1", "b::0"]
    assert sorted((h.doc_id, h.index) for h in lexical.search("one now shorter", 99)) == [("a", 0), ("a", 1), ("b", 0)]
    assert [(d, i) for d, i, _ in copies(lexical)] == [("a", 0), ("a", 1), ("b", 0)]
    retriever.delete(["a"])
    assert lexical.documents() == {"b"}
    assert [(d, i) for d, i, _ in copies(lexical)] == [("b", 0)]


class CountingFake(DeterministicFakeEmbedding):
    """Deterministic vectors, counting the texts embedded."""

    embedded: int = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += len(texts)
        return super().embed_documents(texts)


def test_local_copies_hold_what_the_store_holds_and_the_counters_counts(tmp_path: Path) -> None:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))  # hands its vectors back, as Chroma does
    lexical = LexicalIndex(tmp_path / "lexical.sqlite")
    counter = TokenCounter()
    retriever = SentenceWindowRetriever(
        vectorstore=store, performance=Performance(batch_size=2), lexical=lexical, token_counter=counter
    )
    retriever.add_documents([Document(TEXT, id="a", metadata={"source": "x"}), Document("Only one.", id="b")])
    head = store.get_by_ids(["a::0"])[0]
    rev = head.metadata["lcx_rev"]
    for copy in lexical.sentences("a", rev, [1, 2, 3, 4]):
        record = store.store[f"a::{copy.i}"]
        meta = record["metadata"]
        assert copy.text == record["text"] == TEXT[copy.start : copy.end]
        assert (copy.start, copy.end, copy.gap) == (meta["lcx_start"], copy.start + len(copy.text), meta["lcx_gap"])
        assert "lcx_end" not in meta  # the end is the start plus the text (records.sentence_span)
        assert (copy.tokens, copy.counter) == (counter(copy.text), "tiktoken/cl100k_base")
        after = store.store.get(f"a::{copy.i + 1}")
        if after is None:
            assert copy.joined is None  # the last sentence
        else:
            assert copy.joined == counter(TEXT[copy.start : after["metadata"]["lcx_start"] + len(after["text"])])
        assert copy.vector is not None
        assert copy.vector.tolist() == pytest.approx(record["vector"], abs=1e-6)  # kept as float32
    assert lexical.sentences("a", rev, [0])[0].vector is None  # the head is written after: read from the store


class RecordingCounter(TokenCounter):
    """``cl100k_base``, recording every text it counts."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: collections.Counter[str] = collections.Counter()

    def __call__(self, text: str) -> int:
        self.texts[text] += 1
        return super().__call__(text)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        self.texts.update(texts)
        return super().count_many(texts)


def test_indexing_counts_each_sentence_once(tmp_path: Path) -> None:
    # The splitter's cap counts every unit; the copies take those counts instead of counting again.
    counter = RecordingCounter()
    lexical = LexicalIndex(tmp_path / "lexical.sqlite")
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=lexical, token_counter=counter)
    retriever.add_documents([Document(TEXT, id="a")])
    counted = dict(counter.texts)
    rev = store.get_by_ids(["a::0"])[0].metadata["lcx_rev"]
    copies = lexical.sentences("a", rev, range(5))
    assert [counted.get(c.text) for c in copies] == [1] * 5
    assert [c.tokens for c in copies] == [counter(c.text) for c in copies]


def test_on_chroma_the_copies_keep_the_vectors_written_without_reading_them_back(
    make_retriever: Callable[..., SentenceWindowRetriever], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Indexing hands the copies the vectors it wrote, as float32; a cosine collection of
    # Chroma hands them back within 2 units in the last place. Written a few sentences at a
    # time, each part's copies go in before the next part. A document longer than a part
    # (issue #51, finding 9: a 20 MB document held every vector until its copies were written)
    # holds none: its copies read them back, a batch at a time.
    reads: list[int] = []
    read = ChromaAdapter.vectors
    monkeypatch.setattr(ChromaAdapter, "vectors", lambda self, ids: reads.append(len(ids)) or read(self, ids))
    monkeypatch.setattr(layout, "_HELD", 3)
    lexical = LexicalIndex()
    retriever = make_retriever(lexical=lexical, performance=Performance(batch_size=2))
    short = "One two. Three four. Five six."
    docs = [Document(short, id="a"), Document("Only one.", id="b"), Document(short.replace("One", "Six"), id="c")]
    retriever.add_documents(docs)
    assert reads == []
    retriever.add_documents([Document(TEXT, id="long")])  # five sentences: four in its body, over a part
    assert reads == [2, 2]
    collection = retriever.vectorstore._collection  # type: ignore[attr-defined]
    for doc_id in ("a", "c", "long"):
        rev = collection.get(ids=[f"{doc_id}::0"])["metadatas"][0]["lcx_rev"]
        body = [1, 2, 3, 4] if doc_id == "long" else [1, 2]
        copies = lexical.sentences(doc_id, rev, body)
        stored = collection.get(ids=[f"{doc_id}::{c.i}" for c in copies], include=["embeddings"])
        held = dict(zip(stored["ids"], stored["embeddings"], strict=True))
        assert [c.i for c in copies] == body
        for copy in copies:
            assert copy.vector is not None
            np.testing.assert_allclose(copy.vector, held[f"{doc_id}::{copy.i}"], rtol=1e-6, atol=1e-9)


def test_an_index_written_before_joined_counts_were_kept_opens_and_keeps_them_from_then_on(tmp_path: Path) -> None:
    path = tmp_path / "lexical.sqlite"
    with sqlite3.connect(path) as db:  # the table as the previous version created it
        db.execute(
            "CREATE TABLE sentences_records (doc_id TEXT NOT NULL, i INTEGER NOT NULL, "
            "rev TEXT NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL, gap TEXT NOT NULL, "
            "text TEXT NOT NULL, tokens INTEGER, counter TEXT, vector BLOB, PRIMARY KEY (doc_id, i))"
        )
        db.execute("INSERT INTO sentences_records VALUES ('a', 1, 'r1', 0, 5, ' ', 'Hello', 1, 'c', NULL)")
    lexical = LexicalIndex(path)
    assert [(d, s.text, s.tokens, s.joined) for d, _, s in lexical.copies()] == [("a", "Hello", 1, None)]
    lexical.replace([("b", "r1", [LocalSentence(1, "Two.", 0, 4, " ", 1, "c", None, 3)])])
    assert LexicalIndex(path).sentences("b", "r1", [1])[0].joined == 3


def test_a_custom_counters_counts_are_not_kept() -> None:
    lexical = LexicalIndex()
    retriever = SentenceWindowRetriever(vectorstore=RecordingStore(), lexical=lexical, token_counter=lambda t: len(t))
    retriever.add_documents([Document(TEXT, id="a")])
    rev = lexical._db.execute(f"SELECT rev FROM {lexical.table}_records").fetchone()[0]
    assert {(s.tokens, s.counter) for s in lexical.sentences("a", rev, [1, 2])} == {(None, None)}


def test_an_interrupted_run_leaves_lexical_rows_that_readers_reject_until_the_rerun() -> None:
    store = RecordingStore()
    lexical = LexicalIndex()
    retriever = SentenceWindowRetriever(vectorstore=store, performance=Performance(batch_size=50), lexical=lexical)
    retriever.add_documents([Document("Old text. Old end.", id="a")])
    (old,) = {h.rev for h in lexical.search("old", 9)}
    store.fail_on_write = len(store.writes) + 1  # body written, head not
    with pytest.raises(KeyboardInterrupt):
        retriever.add_documents([Document(TEXT, id="a")])
    head_rev = store.get_by_ids(["a::0"])[0].metadata["lcx_rev"]
    assert head_rev == old  # still committed: v1
    assert {h.rev for h in lexical.search("sentence", 9)} != {head_rev}  # v2 rows, which a reader skips
    store.fail_on_write = None
    retriever.add_documents([Document(TEXT, id="a")])
    new_head = store.get_by_ids(["a::0"])[0].metadata["lcx_rev"]
    assert {h.rev for h in lexical.search("sentence five", 9)} == {new_head}


def test_a_run_killed_between_parts_leaves_each_document_served_at_its_committed_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Documents are written a part at a time, each part's copies committed before the next
    # part's bodies. Killed in the second part: the first part's copies are at a version no
    # head holds yet, and no reader serves them (nor its half-written body); the re-run
    # completes both.
    monkeypatch.setattr(layout, "_HELD", 3)
    store = RecordingStore()
    lexical = LexicalIndex()
    retriever = SentenceWindowRetriever(
        vectorstore=store, performance=Performance(batch_size=50), lexical=lexical, k=2, before=4, after=4
    )
    old = [Document(TEXT, id="a"), Document(TEXT.replace("One", "Uno"), id="b")]
    new = [Document(d.page_content.replace("sentence", "line"), id=d.id) for d in old]
    retriever.add_documents(old)
    store.fail_on_write = len(store.writes) + 1  # a's body and copies written, b's body not
    with pytest.raises(KeyboardInterrupt):
        retriever.add_documents(new)
    heads = {d: store.get_by_ids([f"{d}::0"])[0].metadata["lcx_rev"] for d in ("a", "b")}
    assert lexical.revisions(["a", "b"]) != {d: {rev} for d, rev in heads.items()}  # a's copies moved on
    assert lexical.revisions(["b"]) == {"b": {heads["b"]}}
    served = [w.page_content for w in retriever.invoke("Two lines now")]  # a is half-written: left out
    assert served == [old[1].page_content]
    store.fail_on_write = None
    retriever.add_documents(new)
    heads = {d: store.get_by_ids([f"{d}::0"])[0].metadata["lcx_rev"] for d in ("a", "b")}
    assert lexical.revisions(["a", "b"]) == {d: {rev} for d, rev in heads.items()}
    assert sorted(w.page_content for w in retriever.invoke("Two lines now")) == sorted(d.page_content for d in new)


def test_documents_stored_before_the_lexical_index_existed_are_added_to_it_without_embedding() -> None:
    embeddings = CountingFake(size=16)
    store = InMemoryVectorStore(embeddings)
    SentenceWindowRetriever(vectorstore=store).add_documents([Document(TEXT, id="a")])
    embedded = embeddings.embedded
    lexical = LexicalIndex()
    SentenceWindowRetriever(vectorstore=store, lexical=lexical).add_documents([Document(TEXT, id="a")])
    assert embeddings.embedded == embedded
    assert lexical.documents() == {"a"}
    rev = store.get_by_ids(["a::0"])[0].metadata["lcx_rev"]
    assert all(s.vector is not None for s in lexical.sentences("a", rev, [1, 2, 3, 4]))  # read back, not embedded


def test_an_index_written_before_the_local_copies_existed_gets_them_on_the_next_add_without_embedding() -> None:
    embeddings = CountingFake(size=16)
    store = InMemoryVectorStore(embeddings)
    lexical = LexicalIndex()
    retriever = SentenceWindowRetriever(vectorstore=store, lexical=lexical)
    retriever.add_documents([Document(TEXT, id="a")])
    with lexical._db:
        lexical._db.execute(f"DELETE FROM {lexical.table}_records")  # as an older version wrote it: BM25 rows only
    assert lexical.documents() == {"a"}
    assert lexical.documents(copied=True) == set()
    embedded = embeddings.embedded
    retriever.add_documents([Document(TEXT, id="a")])
    assert embeddings.embedded == embedded
    assert [(d, i) for d, i, _ in copies(lexical)] == [("a", i) for i in range(5)]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_process_still_runs_the_lexical_search_beside_the_dense_one() -> None:
    retriever = SentenceWindowRetriever(vectorstore=RecordingStore(), lexical=LexicalIndex())
    retriever.add_documents([Document(TEXT, id="a")])
    assert retriever.invoke("three of them", max_tokens=30)  # the parent's pool has a thread now
    pid = os.fork()
    if pid == 0:  # the child: answers, or hangs on a pool whose thread stayed in the parent
        os._exit(0 if retriever.invoke("four and more", max_tokens=30) else 1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child never answered")


def test_the_snapshots_bm25_ranks_every_query_as_fts5_does() -> None:
    """The ranking in memory (the snapshot's) reads the words SQLite's tokenizer reads and scores them alike."""
    texts = [
        "Café au lait costs $ 3.50 at the École.",
        "A naïve résumé: CAFE, cafe and café are one word.",
        "snake_case and x-ray split where FTS5 splits; C++ is just c.",
        "Revenue was 1,452.4 million in 2019, up from 1,310.2.",
        "Straße and STRASSE differ; Ørsted and Orsted too.",
        "OK .",
        "OK .",
        "",
        *["The cat sat on the mat."] * 40,  # ties that a small k cuts through
        "The cat.",
    ]
    for doc in load_docs("emanual")[:2] + load_docs("friendsqa")[:4]:
        texts += [doc["text"][s:e] for s, e in SentenceSplitter()(doc["text"])]
    index = LexicalIndex()
    index.replace([("d", "r", copied(texts))])
    bm25 = Bm25.of(texts, lambda row, score: LexicalHit("d", row, "r", score))
    queries = [q["query"] for q in load_queries("emanual")[:10] + load_queries("friendsqa")[:10]]
    queries += ["cafe", "CAFÉ", "snake_case", "x ray", "1,452.4", "strasse", "orsted", "ok", "", "?!"]
    queries += ["cat", "the cat mat"]
    listed = ranked_bm25(index)  # from the copies the index lists, as a build at a change mark reads them
    assert listed is not None
    for query in queries:
        for k in (1, 7, 30):
            assert bm25.search(query, k) == index.search(query, k) == listed.search(query, k), (query, k)
    assert words("Snake_case CAFÉ x-ray 3.50") == ["snake", "case", "cafe", "x", "ray", "3", "50"]


def test_bm25_within_some_documents_ranks_as_fts5_does() -> None:
    # issue #49: a filtered query's BM25 keeps the filter's documents, scored with the whole
    # index's idf (as a store's filter narrows its search), in SQLite and in memory alike
    docs = load_docs("emanual")[:1] + load_docs("friendsqa")[:2] + load_docs("tatqa")[:3]
    index = LexicalIndex()
    rows: list[tuple[str, int, str]] = []
    for doc in docs:
        sentences = [doc["text"][s:e] for s, e in SentenceSplitter()(doc["text"])]
        index.replace([(doc["doc_id"], "r", sentences)])
        rows += [(doc["doc_id"], i, text) for i, text in enumerate(sentences)]
    bm25 = Bm25.of([t for *_, t in rows], lambda row, score: LexicalHit(rows[row][0], rows[row][1], "r", score))
    queries = [q["query"] for q in load_queries("emanual")[:5] + load_queries("friendsqa")[:5]]
    queries += [q["query"] for q in load_queries("tatqa")[:5]] + ["the", "revenue 2019", ""]
    ids = [d["doc_id"] for d in docs]
    for within in ([ids[0]], ids[1:3], ids[3:], ids, []):
        mask = np.array([doc_id in within for doc_id, _, _ in rows])
        for query in queries:
            for k in (1, 10, 40):
                expected = index.search(query, k, within)
                assert bm25.search(query, k, mask) == expected, (within, query, k)
                assert {hit.doc_id for hit in expected} <= set(within)
    assert index.search("revenue", 40, ids) == index.search("revenue", 40)


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(_ZIPF), min_size=0, max_size=12).map(" ".join), min_size=1, max_size=80),
    query=st.lists(st.sampled_from(_ZIPF), min_size=0, max_size=6).map(" ".join),
    k=st.integers(1, 40),
    seeds=st.integers(1, 30),
)
def test_bm25_lists_only_what_can_be_among_the_best_and_ranks_as_fts5_does(
    texts: list[str], query: str, k: int, seeds: int
) -> None:
    # Common words hold most rows; the floor from the rarest terms' rows leaves the rest
    # unlisted. Few seed rows make the floor land anywhere: under k of them, at a tie, above
    # a common word's rows. FTS5 itself is the oracle.
    index = LexicalIndex()
    index.replace([("d", "r", texts)])
    bm25 = Bm25.of(texts, lambda row, score: LexicalHit("d", row, "r", score))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bm25_module, "_SEEDS", seeds)
        assert bm25.search(query, k) == index.search(query, k)


def test_bm25_past_the_limit_holds_no_python_object_per_sentence() -> None:
    # A full collection walks every tracked list's items: a ranking that held a name per
    # sentence made each one 15 ms longer at a million sentences. Ten times the sentences of
    # the same documents must leave what the collector walks about the same.
    def walked(copies: int) -> int:
        index = LexicalIndex()
        index.replace([(f"d{j}", "r", [f"sentence {n} of {j}" for n in range(copies)]) for j in range(5)])
        gc.collect()  # untracks what holds only atoms, as a full collection does
        bm25 = ranked_bm25(index)
        gc.collect()
        return tracked_slots(bm25)

    small, large = walked(200), walked(2000)
    assert large < small + 100, (small, large)


def _work_to_replace_one_document(documents: int) -> int:
    """SQLite's virtual-machine steps (in thousands) to replace one document among ``documents``."""
    lexical = LexicalIndex()
    lexical.replace(
        (f"d{n}", "r1", [f"Sentence {j} of document {n} about prices." for j in range(10)]) for n in range(documents)
    )
    steps = 0

    def step() -> int:
        nonlocal steps
        steps += 1
        return 0

    lexical._db.set_progress_handler(step, 1000)
    lexical.replace([("d7", "r2", ["A new first sentence.", "A new second one."])])
    lexical.delete(["d9"])
    lexical._db.set_progress_handler(None, 0)
    return steps


def test_replacing_or_deleting_a_document_costs_the_same_however_many_others_are_indexed() -> None:
    # Counted in SQLite's own steps, not in time: FTS5 keeps doc_id unindexed, and a delete by
    # it scanned every row (4x the steps for 4x the documents) until rows were found by key.
    small, large = _work_to_replace_one_document(300), _work_to_replace_one_document(1200)
    assert large <= 1.5 * small + 2, (small, large)


def test_an_index_written_before_rows_were_mapped_to_documents_opens_and_replaces_them(tmp_path: Path) -> None:
    path = tmp_path / "lexical.sqlite"
    with sqlite3.connect(path) as db:  # the FTS5 table as the previous version created it, without the map
        db.execute(
            "CREATE VIRTUAL TABLE sentences USING fts5(doc_id UNINDEXED, i UNINDEXED, rev UNINDEXED, text, "
            "tokenize='unicode61')"
        )
        db.executemany(
            "INSERT INTO sentences (doc_id, i, rev, text) VALUES (?, ?, 'r1', ?)",
            [("a", 0, "Old prices rose."), ("b", 0, "Prices fell."), ("a", 1, "Old prices again.")],
        )
    lexical = LexicalIndex(path)
    assert lexical.documents() == {"a", "b"}
    lexical.replace([("a", "r2", ["New prices."])])
    assert sorted((h.doc_id, h.index, h.rev) for h in lexical.search("prices", 9)) == [("a", 0, "r2"), ("b", 0, "r1")]
    lexical.delete(["b"])
    reopened = LexicalIndex(path)
    assert [(h.doc_id, h.rev) for h in reopened.search("prices", 9)] == [("a", "r2")]
    assert reopened.documents(among=["a", "b"]) == {"a"}


def test_a_writer_waits_for_another_and_says_what_to_do_when_it_waited_too_long(tmp_path: Path) -> None:
    """Issue #34, finding 7: concurrent writers got SQLite's raw "database is locked" after 5 s."""
    path = tmp_path / "lexical.sqlite"
    holder, waiter = LexicalIndex(path), LexicalIndex(path, timeout=0.2)
    waiter.replace([("b", "r1", ["Kept text."])])
    holder._db.execute("BEGIN IMMEDIATE")  # another writer, mid-write
    with pytest.raises(RuntimeError, match=r"stayed locked by another writer for 0\.2 s.*PostgresLexicalIndex"):
        waiter.replace([("a", "r1", ["Some text."])])
    assert [h.doc_id for h in waiter.search("kept text", 5)] == ["b"]  # reads go on meanwhile
    holder._db.commit()
    waiter.replace([("a", "r1", ["Some text."])])  # its turn
    assert {h.doc_id for h in LexicalIndex(path).search("text", 5)} == {"a", "b"}


def test_writers_in_several_processes_take_turns_on_one_file(tmp_path: Path) -> None:
    """Four processes, each replacing its own large document three times, all at once."""
    import multiprocessing

    path = tmp_path / "lexical.sqlite"
    LexicalIndex(path)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        pool.starmap(_write_large, [(str(path), n) for n in range(4)])
    index = LexicalIndex(path)
    assert index.documents() == {f"d{n}" for n in range(4)}
    assert index.count() == 4 * 6_000


def _write_large(path: str, n: int) -> None:
    index = LexicalIndex(path)
    for rev in range(3):
        sentences = [
            LocalSentence(i, f"Sentence {i} of document {n}.", 0, 1, " ", 1, "c", None, 2) for i in range(6_000)
        ]
        index.replace([(f"d{n}", f"r{rev}", sentences)])


SCRIPTS = {
    "latin": ("Le café de la rue Saint-Éloi ouvre à sept heures; naïve crème brûlée.", "Éloi brûlée"),
    "greek": ("Ο Σίσυφος κυλά την πέτρα στην κορυφή του βουνού.", "Σίσυφος πέτρα"),
    "cyrillic": ("Мой брат ест йогурт под ёлкой каждое утро.", "йогурт ёлка"),
    "turkish": ("İstanbul Boğazı iki kıtayı birbirinden ayırır.", "İSTANBUL"),
    "vietnamese": ("Tiếng Việt rất hay và có sáu thanh điệu.", "Tiếng Việt"),
    "korean": ("한국어 문장은 조사를 사용하여 뜻을 나타냅니다.", "한국어"),
    "cjk": ("東京の天気は晴れです。北京烤鸭很好吃。", "北京烤鸭很好吃"),
    "arabic": ("اللغة العربية تكتب من اليمين إلى اليسار.", "العربية"),
    "hebrew": ("עִבְרִית נכתבת מימין לשמאל.", "עברית"),
    "thai": ("ภาษาไทย ไม่มี การเว้นวรรค ระหว่างคำ", "ภาษาไทย"),
    "devanagari": ("हिन्दी भाषा देवनागरी लिपि में लिखी जाती है।", "हिन्दी लिपि"),
    "tamil": ("தமிழ் மொழி மிகவும் பழமையானது.", "தமிழ்"),
}
"""A sentence in each of twelve scripts, and a query that names words of it only (accents, case and
marks as a user might type them)."""


def test_bm25_finds_the_words_of_every_script_alike_in_fts5_in_memory_and_past_the_limit() -> None:
    # FTS5's tokenizer once folded its own way: Greek, Cyrillic, Korean, Vietnamese and Turkish
    # queries found nothing in SQLite while the ranking in memory found them, so an answer
    # depended on the memory setting. Each script's query must find its own sentence first
    # in all three, and the three must rank alike.
    names = list(SCRIPTS)
    texts = [SCRIPTS[name][0] for name in names] + ["An English sentence about xray machines and cafés."] * 3
    index = LexicalIndex()
    index.replace([("d", "r", copied(texts))])
    bm25 = Bm25.of(texts, lambda row, score: LexicalHit("d", row, "r", score))
    listed = ranked_bm25(index)
    assert listed is not None
    for row, name in enumerate(names):
        query = SCRIPTS[name][1]
        found = index.search(query, 5)
        assert found, (name, query)
        assert found[0].index == row, (name, query, found)
        assert bm25.search(query, 5) == found == listed.search(query, 5), name
    assert index.search("xray cafe", 5) == bm25.search("xray cafe", 5) != []


def test_words_keep_a_script_whole_and_read_back_as_they_were() -> None:
    assert words("İstanbul Straße ΣΊΣΥΦΟΣ café") == ["istanbul", "strasse", "σισυφοσ", "cafe"]
    assert words("हिन्दी भाषा") == ["हिनदी", "भाषा"]  # one word each: not cut at the vowel signs
    assert words("한국어") == ["한국", "국어"]  # pairs of Hangul syllables, not their letters
    for text, _ in SCRIPTS.values():
        found = words(text)
        assert words(" ".join(found)) == found  # what the lexical indexes store and read back
        assert fts_words(fts_text(found)) == found


def test_words_read_back_as_they_were_for_every_character() -> None:
    # the lexical indexes store a text's words joined by spaces and split them again (and an index
    # of an earlier format is migrated so): words(" ".join(words(t))) must be words(t) for any text,
    # though NFKC may turn one character into several ("½" is "1⁄2") and pairs cut runs apart
    assigned = [chr(c) for c in range(0x20, 0x32000) if unicodedata.category(chr(c)) not in ("Cs", "Co", "Cn")]
    for at in range(0, len(assigned), 128):
        block = assigned[at : at + 128]
        for text in ("".join(block), "a".join(block), "".join(c * 3 for c in block)):
            found = words(text)
            assert words(" ".join(found)) == found, block[0]
            assert fts_words(fts_text(found)) == found, block[0]


def test_an_index_written_before_fts5_was_handed_words_opens_and_finds_every_script(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    names = list(SCRIPTS)
    LexicalIndex(path).replace([("d", "r", [SCRIPTS[name][0] for name in names] + ["Plain ASCII text."])])
    db = sqlite3.connect(path)  # as an earlier version left it: each row's own text, and no marker
    db.execute("DROP TABLE sentences_words")
    for row, name in enumerate(names):
        db.execute("UPDATE sentences SET text = ? WHERE rowid = ?", (SCRIPTS[name][0], row + 1))
    db.commit()
    greek = fts_text(words("Σίσυφος"))
    assert db.execute("SELECT rowid FROM sentences WHERE sentences MATCH ?", (f'"{greek}"',)).fetchall() == []
    db.close()
    reopened = LexicalIndex(path)
    for row, name in enumerate(names):
        assert reopened.search(SCRIPTS[name][1], 1)[0].index == row, name
    assert reopened.search("plain ascii", 1)[0].index == len(names)


UNSPACED = [
    "我们今天去北京吃烤鸭，哈哈哈。",
    "東京の天気は晴れです。",
    "저는 한국어를 공부합니다.",
    "Roast duck in Beijing, and the weather in Tokyo.",
    "売上は２０１９年に増えました。",
]
"""Chinese, Japanese and Korean sentences whose words run on without a space (or with a particle joined),
one with full-width digits."""
UNSPACED_QUERIES = {"烤鸭": 0, "北京": 0, "天気": 1, "한국어": 2, "2019": 4}
"""A word inside each run, and the sentence it is in."""


def test_a_chinese_japanese_or_korean_word_inside_a_run_finds_its_sentence_alike_in_fts5_and_in_memory() -> None:
    # words() kept a run of Han, kana or Hangul whole, so "烤鸭" matched no sentence that says
    # more than "烤鸭": hybrid search was dense only in these languages. A run is now counted
    # in pairs of characters, and FTS5 and both BM25s in memory find the same sentences.
    assert words("北京烤鸭") == ["北京", "京烤", "烤鸭"]
    assert words("哈哈哈") == ["哈哈", "哈哈"]
    assert words("京") == ["京"]
    assert words("iPhone手机") == ["iphone", "手机"]
    assert words("ｉＰｈｏｎｅ ２０１９") == ["iphone", "2019"]  # full-width letters and digits as typed in ASCII
    index = LexicalIndex()
    index.replace([("d", "r", copied(UNSPACED))])
    bm25 = Bm25.of(UNSPACED, lambda row, score: LexicalHit("d", row, "r", score))
    listed = ranked_bm25(index)
    assert listed is not None
    for query, row in UNSPACED_QUERIES.items():
        found = index.search(query, 4)
        assert [hit.index for hit in found] == [row], query
        assert bm25.search(query, 4) == found == listed.search(query, 4), query


def whole_runs(text: str) -> list[str]:
    """The words of ``text`` as format 1 made them: each run of Han, kana or Hangul one word."""
    return [w for run in re.findall(r"\w+", text.casefold()) for w in (words(run) if run.isascii() else [run])]


def test_an_index_whose_words_kept_runs_whole_splits_them_again_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    LexicalIndex(path).replace([("d", "r", copied(UNSPACED)), ("bare", "r", UNSPACED)])
    db = sqlite3.connect(path)  # as format 1 left it: each run one word, in the FTS5 rows
    for row, i in db.execute("SELECT rowid, i FROM sentences").fetchall():
        db.execute("UPDATE sentences SET text = ? WHERE rowid = ?", (fts_text(whole_runs(UNSPACED[i])), row))
    db.execute("UPDATE sentences_words SET format = 1")
    db.commit()
    pair = fts_text(["烤鸭"])
    assert db.execute("SELECT rowid FROM sentences WHERE sentences MATCH ?", (f'"{pair}"',)).fetchall() == []
    db.close()
    reopened = LexicalIndex(path)
    assert sqlite3.connect(path).execute("SELECT format FROM sentences_words").fetchall() == [(2,)]
    fresh = LexicalIndex()
    fresh.replace([("d", "r", copied(UNSPACED)), ("bare", "r", UNSPACED)])
    for query in UNSPACED_QUERIES:
        assert reopened.search(query, 8) == fresh.search(query, 8) != [], query
    assert reopened.scores("烤鸭 北京", [("bare", 0, "r")]) == fresh.scores("烤鸭 北京", [("bare", 0, "r")])


def test_an_index_written_before_its_rows_table_gets_it_on_open_and_deletes_by_it(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    LexicalIndex(path).replace([("a", "r", ["Apples are red.", "Pears are green."]), ("b", "r", ["Plums are blue."])])
    db = sqlite3.connect(path)  # as an earlier version left it: no table of each document's rows
    db.execute("DROP TABLE sentences_rows")
    db.commit()
    db.close()
    reopened = LexicalIndex(path)
    rows = sqlite3.connect(path).execute("SELECT doc_id, COUNT(*) FROM sentences_rows GROUP BY doc_id").fetchall()
    assert sorted(rows) == [("a", 2), ("b", 1)]
    reopened.delete(["a"])
    assert [hit.doc_id for hit in reopened.search("apples pears plums", 5)] == ["b"]


def test_a_query_in_any_script_finds_its_document_alike_in_every_memory_mode(
    tmp_path: Path, minilm: Embeddings
) -> None:
    # MiniLM reads English: in most of these scripts only BM25 tells the sentences apart, and
    # fusion by both scores must still put the query's own sentence among the 4 best. In
    # memory, past the snapshot's limit and with nothing in memory (FTS5 ranks and scores),
    # every answer is the same.
    store = chroma_store("scripts", persist_directory=tmp_path / "chroma", embeddings=minilm)
    lexical_path = tmp_path / "lexical.sqlite"
    SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(lexical_path)).add_documents(
        [Document(text, id=name) for name, (text, _) in SCRIPTS.items()]
    )
    answers: dict[str, list[list[tuple[str, list[int]]]]] = {}
    for mode in ({}, {"performance": Performance(snapshot_limit=0)}, {"performance": Performance(in_memory=False)}):
        retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(lexical_path), k=4, **mode)
        for run in range(2):  # before and after the rankings in memory are built
            found = [retriever.invoke(query, expand=False) for _, query in SCRIPTS.values()]
            for name, docs in zip(SCRIPTS, found, strict=True):
                assert name in [d.metadata["doc_id"] for d in docs], (mode, run, name)
            answers[f"{mode} {run}"] = [[(d.metadata["doc_id"], d.metadata["span"]) for d in docs] for docs in found]
    assert len({repr(a) for a in answers.values()}) == 1, answers  # (scores differ in float32's last places)


def copied(texts: list[str]) -> list[LocalSentence]:
    """``texts`` as one document's local copies: ranked, and listed for BM25 in memory."""
    return [LocalSentence(i, text, 0, len(text), " ") for i, text in enumerate(texts)]


def test_a_named_sentences_bm25_score_is_the_one_search_gives_it_in_fts5_and_in_memory() -> None:
    # issue #50: fusion weighs every candidate by its BM25 score, not only BM25's best, so the
    # score of a sentence named by the dense ranking must be the one a search gives it, to
    # the last bit, wherever BM25 is read; one without the query's words, at another
    # revision or unknown, scores nothing
    # (SQLite reads FTS5's counts and scores each from its words: from its copy, or from its row
    # where the index keeps no copies, as for parents' children; words outside ASCII too)
    docs = load_docs("emanual")[:1] + load_docs("friendsqa")[:2]
    docs.append({"doc_id": "accents", "text": "Le café de la Straße. Σίσυφος au café. Un café crème, café noir."})
    index, bare = LexicalIndex(), LexicalIndex()
    for doc in docs:
        sentences = [doc["text"][s:e] for s, e in SentenceSplitter()(doc["text"])]
        index.replace([(doc["doc_id"], "r", copied(sentences))])
        bare.replace([(doc["doc_id"], "r", sentences)])
    listed = ranked_bm25(index)
    queries = [q["query"] for q in load_queries("emanual")[:5] + load_queries("friendsqa")[:5]] + ["the", ""]
    for query in [*queries, "Café STRASSE σίσυφος"]:
        everything = {(h.doc_id, h.index, h.rev): h.score for h in index.search(query, 100_000)}
        named = [*list(everything)[::7], (docs[0]["doc_id"], 0, "another"), ("unknown", 0, "r")]
        named += [(d["doc_id"], i, "r") for d in docs for i in range(3)]  # some hold no word of the query
        expected = {key: everything[key] for key in named if key in everything}
        assert index.scores(query, named) == expected == listed.scores(query, named), query
        assert bare.scores(query, named) == expected, query
        assert Within(index, frozenset([docs[1]["doc_id"]])).scores(query, named) == expected
    assert index.search("Café STRASSE σίσυφος", 3)  # the last query found the accented sentences
    emptied = LexicalIndex()
    assert emptied.scores("the café", [("accents", 0, "r")]) == {}  # nothing written yet
    emptied.replace([("accents", "r", copied(["Le café."]))])
    assert emptied.scores("the café", [("accents", 0, "r")]) == {
        ("accents", 0, "r"): emptied.search("café", 1)[0].score
    }
    emptied.delete(["accents"])
    assert emptied.scores("the café", [("accents", 0, "r")]) == {}  # every row deleted
    assert index.scores("the", []) == {} == listed.scores("", [(docs[0]["doc_id"], 0, "r")])


MANUAL = [
    Document("The remote pairs with the TV. Hold the back and return buttons for three seconds.", id="m1"),
    Document("Clean the screen with a dry cloth. Do not spray water on it. Unplug the TV first.", id="m2"),
]


def test_a_window_and_a_parents_retriever_cannot_share_a_lexical_table_and_lose_nothing(
    tmp_path: Path, minilm: Embeddings
) -> None:
    # Both wrote the table "sentences" of one file: the parents' add replaced the windows' rows of
    # the same documents (their copies gone, children ranked as sentences), silently.
    path = tmp_path / "lexical.sqlite"

    def windows(table: str = "sentences") -> SentenceWindowRetriever:
        store = chroma_store("windows", persist_directory=tmp_path / "chroma", embeddings=minilm)
        return SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path, table=table), k=2)

    def parents(table: str = "sentences") -> BudgetedParentDocumentRetriever:
        store = chroma_store("children", persist_directory=tmp_path / "chroma", embeddings=minilm)
        docstore = SQLDocStore(f"sqlite:///{tmp_path}/parents.sqlite")
        return BudgetedParentDocumentRetriever(
            vectorstore=store, docstore=docstore, lexical=LexicalIndex(path, table=table)
        )

    windows().add_documents(MANUAL)
    before = [(d.page_content, d.metadata["span"]) for d in windows().invoke("spray water")]
    copies = LexicalIndex(path).count()
    with pytest.raises(ValueError, match=r"holds a SentenceWindowRetriever's sentences.*table='children'"):
        parents()
    parents(table="children").add_documents(MANUAL)  # a table of its own, in the same file
    assert [(d.page_content, d.metadata["span"]) for d in windows().invoke("spray water")] == before
    assert LexicalIndex(path).count() == copies == 5
    with pytest.raises(ValueError, match=r"holds a BudgetedParentDocumentRetriever's children.*table='sentences'"):
        windows(table="children")
    # an index written before tables were claimed is told by its rows: copies are sentences
    sqlite3.connect(path).execute("DELETE FROM sentences_units").connection.commit()
    with pytest.raises(ValueError, match="holds a SentenceWindowRetriever's sentences"):
        parents()
    assert LexicalIndex(path).claim(None) == "sentences"
