"""Reliability: kills in the middle of indexing, concurrent queries, and fuzzed Unicode."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand import (
    FitToBudget,
    Performance,
    SentenceSplitter,
    SentenceWindowRetriever,
    TokenCounter,
    chroma_store,
    fit_to_budget,
    merge_overlaps,
)

from .conftest import as_documents, load_docs

COUNTER = TokenCounter()
Make = Callable[..., SentenceWindowRetriever]

_WORKER = """
import json, sys
import chromadb, sentence_transformers  # the slow imports, done before the word to start
from langchain_core.documents import Document
from langchain_expand import Performance, SentenceWindowRetriever, chroma_store
path, corpus = sys.argv[1], sys.argv[2]
print("ready", flush=True)
sys.stdin.readline()
rows = [json.loads(line) for line in open(corpus)]
store = chroma_store("crash", persist_directory=path)
retriever = SentenceWindowRetriever(vectorstore=store, performance=Performance(batch_size=40))
print("start", flush=True)
retriever.add_documents([Document(r["text"], id=r["doc_id"]) for r in rows])
print("done", flush=True)
"""


def start_worker(path: Path, corpus: Path) -> subprocess.Popen[str]:
    """A process that will index ``corpus`` into ``path``: it imports, then waits for :func:`run_worker`.

    Workers started together import side by side (most of a worker's time), while only one
    at a time writes.
    """
    return subprocess.Popen(
        [sys.executable, "-c", _WORKER, str(path), str(corpus)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def run_worker(process: subprocess.Popen[str], kill_after: float | None) -> bool:
    """Let a started worker index; with ``kill_after``, SIGKILL it that many seconds into add_documents.

    Returns:
        True when the run was killed before it finished.
    """
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    process.stdin.write("go\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "start"
    if kill_after is None:
        assert process.wait(timeout=300) == 0
        return False
    try:
        process.wait(timeout=kill_after)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        return True
    return False


def write_corpus(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps({"doc_id": r["doc_id"], "text": r["text"]}) for r in rows))
    return path


def windows_are_whole(retriever: SentenceWindowRetriever, sources: dict[str, set[str]], queries: list[str]) -> int:
    """Every window served is a slice of one version of its document; returns how many."""
    served = 0
    for q in queries:
        for doc in retriever.invoke(q, k=8, merge=False):  # one window a hit: its size is known
            m = doc.metadata
            assert any(text[m["start_index"] : m["end_index"]] == doc.page_content for text in sources[m["doc_id"]])
            assert m["span"][1] - m["span"][0] == min(m["n_sentences"], m["hit"] + 3) - max(0, m["hit"] - 2)
            served += 1
    return served


QUERIES = ["the remote control price", "who designs the buttons", "next meeting", "the user interface", "OK"]


def test_a_kill_in_the_middle_of_indexing_never_serves_a_half_document(tmp_path: Path, minilm: Embeddings) -> None:
    rows = load_docs("qmsum")
    edited = [{**r, "text": r["text"].replace("remote", "clicker").replace(" .", " !")} for r in rows]
    store_path = tmp_path / "chroma"
    retriever = SentenceWindowRetriever(
        vectorstore=chroma_store("crash", persist_directory=store_path, embeddings=minilm),
        performance=Performance(batch_size=40),
    )
    retriever.add_documents([Document(r["text"], id=r["doc_id"]) for r in rows])  # v1, in this process
    either = {r["doc_id"]: {r["text"], e["text"]} for r, e in zip(rows, edited, strict=True)}

    # Re-index edited versions, killed twice at random points: while the store holds a
    # mix of versions, every window served is still one whole version of its document.
    corpus_v2 = write_corpus(tmp_path / "v2.jsonl", edited)
    delays = [random.uniform(0.2, 1.5) for _ in range(2)]
    workers = [start_worker(store_path, corpus_v2) for _ in delays]
    killed = [run_worker(worker, delay) for worker, delay in zip(workers, delays, strict=True)]
    assert any(killed), f"no run was killed (delays {delays}): the machine indexed faster than expected"
    windows_are_whole(retriever, either, QUERIES)

    retriever.add_documents([Document(e["text"], id=e["doc_id"]) for e in edited])  # the re-run completes them
    latest = {e["doc_id"]: {e["text"]} for e in edited}
    assert windows_are_whole(retriever, latest, QUERIES) == 8 * len(QUERIES)
    stored = retriever.vectorstore._collection.count()  # type: ignore[attr-defined]
    splitter = SentenceSplitter()
    assert stored == sum(len(splitter(e["text"])) for e in edited)  # no orphans, no duplicates


def test_concurrent_queries_in_threads_and_asyncio_while_indexing(tmp_path: Path, uncached_minilm: Embeddings) -> None:
    store = chroma_store("concurrent", persist_directory=tmp_path / "chroma", embeddings=uncached_minilm)
    retriever = SentenceWindowRetriever(vectorstore=store, k=5)  # embeds as slowly as in use: writes overlap queries
    rows = load_docs("qmsum")
    retriever.add_documents(as_documents(rows[:1]))
    sources = {r["doc_id"]: {r["text"]} for r in rows}
    errors: list[BaseException] = []

    def index_more() -> None:
        try:
            retriever.add_documents(as_documents(rows[1:]))
            retriever.add_documents(as_documents(load_docs("emanual")))
        except BaseException as exc:
            errors.append(exc)

    indexer = threading.Thread(target=index_more)
    indexer.start()
    sources.update({d["doc_id"]: {d["text"]} for d in load_docs("emanual")})
    with ThreadPoolExecutor(max_workers=8) as pool:
        counts = list(pool.map(lambda q: windows_are_whole(retriever, sources, [q]), QUERIES * 4))

    async def ask_all() -> list[list[Document]]:
        return await asyncio.gather(*(retriever.ainvoke(q) for q in QUERIES[:4] * 2))

    answers = asyncio.run(ask_all())
    indexer.join(timeout=300)
    assert not errors
    assert all(n > 0 for n in counts)
    for found in answers:
        for doc in found:
            m = doc.metadata
            assert any(t[m["start_index"] : m["end_index"]] == doc.page_content for t in sources[m["doc_id"]])


UNICODE = st.lists(
    st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(
            ["\u0301", "\u05d0", "\u0627", "\u200f", "🚀", "👩‍💻", "\x00", "\r\n", "\r", ". ", "? ", "\n\n"]
        ),
    ),
    min_size=1,
    max_size=150,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(UNICODE, st.integers(min_value=2, max_value=64))
def test_fuzzed_unicode_keeps_splitter_offsets_valid_and_units_capped(text: str, cap: int) -> None:
    spans = SentenceSplitter(max_unit_tokens=cap, token_counter=COUNTER)(text)
    end = 0
    for s, e in spans:
        assert end <= s < e <= len(text)
        assert COUNTER(text[s:e]) <= max(cap, max(COUNTER(ch) for ch in text[s:e]))
        end = e


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(UNICODE, min_size=1, max_size=3), st.integers(0, 3), st.integers(0, 3), st.integers(1, 300))
def test_fuzzed_unicode_windows_merge_and_budget_stay_exact(
    make_retriever: Make, texts: list[str], before: int, after: int, budget: int
) -> None:
    texts = [t for t in texts if t.strip()]
    if not texts:
        return
    retriever = make_retriever(k=4, before=before, after=after)
    docs = [Document(t, id=f"fuzz-{i}") for i, t in enumerate(texts)]
    retriever.add_documents(docs)
    sources = {d.id: d.page_content for d in docs}
    windows = retriever.invoke(texts[0][:50] if texts[0][:50].strip() else "query")
    for unit in [*windows, *merge_overlaps(windows)]:
        m = unit.metadata
        assert sources[m["doc_id"]][m["start_index"] : m["end_index"]] == unit.page_content
    kept, _ = fit_to_budget(windows, budget)
    assert COUNTER("\n\n".join(d.page_content for d in kept)) <= budget
    for unit in kept:
        m = unit.metadata
        assert sources[m["doc_id"]][m["start_index"] : m["end_index"]] == unit.page_content


def test_an_empty_query_is_a_clear_error_and_a_huge_one_is_answered(make_retriever: Make) -> None:
    retriever = make_retriever(k=2)
    retriever.add_documents(as_documents(load_docs("qmsum")[:1]))
    with pytest.raises(ValueError, match="The query is empty"):
        retriever.invoke("   ")
    assert len(retriever.invoke("remote control " * 6000)) == 2  # ~100 KB


def test_a_budget_below_any_unit_drops_everything_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    docs = [Document("A long enough sentence here.", metadata={"doc_id": "d", "start_index": 0, "end_index": 28})]
    with caplog.at_level("WARNING"):
        assert FitToBudget(max_tokens=1).invoke(docs) == []
    assert "kept none of 1 units" in caplog.text
    assert "without offsets" not in caplog.text
    caplog.clear()
    chunks = [Document("A chunk from another retriever. " * 8), Document("Another chunk, as long. " * 8)]
    with caplog.at_level("WARNING"):  # the warning said "not even a matched sentence": chunks have none
        assert FitToBudget(max_tokens=20).invoke(chunks) == []
    assert (
        "(2 without offsets, start_index, as another retriever's chunks, are kept whole or not at all)" in caplog.text
    )


_FORKED = """
import os, signal, sys
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_expand import LexicalIndex, SentenceWindowRetriever, chroma_store

folder = sys.argv[1]
persist = None if sys.argv[2] == "memory" else folder + "/chroma"
store = chroma_store("forked", persist_directory=persist, embeddings=DeterministicFakeEmbedding(size=16))
retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(folder + "/lexical.sqlite"))
retriever.add_documents([Document("One sentence. Two sentences.", id="a")])
assert retriever.invoke("one", max_tokens=50)
pid = os.fork()
if pid == 0:
    signal.alarm(30)  # a hang ends the child, and the parent says so
    refused = []
    for use in (lambda: retriever.invoke("two"), lambda: chroma_store("forked", persist_directory=persist)):
        try:
            use()
        except RuntimeError as exc:
            refused.append("forked from process" in str(exc) and "Chroma server" in str(exc))
    os._exit(0 if refused == [True, True] else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status), len(retriever.invoke("two", max_tokens=50)))
"""


@pytest.mark.integration  # a subprocess
@pytest.mark.parametrize("where", ["folder", "memory"])
def test_an_embedded_chroma_used_after_a_fork_is_refused_at_once_and_the_parent_goes_on(
    where: str, tmp_path: Path
) -> None:
    # issue #51, finding 4: the child's first query blocked in Chroma's Rust binding forever
    # (raw Chroma too); so did a store opened again in the child on the same folder.
    done = subprocess.run(
        [sys.executable, "-c", _FORKED, str(tmp_path), where], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0", "1"]  # the child was refused (never hung: -14), the parent answers


_WRITER = """
import sys
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_expand import LexicalIndex, SentenceWindowRetriever, chroma_store

embeddings = DeterministicFakeEmbedding(size=16)
store = chroma_store("shared", persist_directory=sys.argv[1] + "/chroma", embeddings=embeddings)
retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(sys.argv[1] + "/lexical.sqlite"))
retriever.add_documents([Document("Three new ones arrive. Four more follow them. " * 30, id="b")])
"""


@pytest.mark.integration  # a subprocess
def test_an_embedded_chroma_another_process_wrote_is_opened_again_and_reads_what_it_wrote(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # issue #51, finding 3: once another process added a document to the folder, every query
    # here raised Chroma's "InternalError: Error finding id", in every mode, for new
    # retrievers too, until the process was restarted.
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from langchain_expand import LexicalIndex

    store = chroma_store(
        "shared", persist_directory=tmp_path / "chroma", embeddings=DeterministicFakeEmbedding(size=16)
    )
    modes = ({}, {"performance": Performance(snapshot_limit=0)}, {"performance": Performance(in_memory=False)})
    retrievers = [
        SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(tmp_path / "lexical.sqlite"), **mode)
        for mode in modes
    ]
    retrievers[0].add_documents([Document("One sentence here. Two sentences there. " * 20, id="a")])
    for retriever in retrievers:
        assert retriever.invoke("one", max_tokens=100)
    subprocess.run([sys.executable, "-c", _WRITER, str(tmp_path)], check=True, timeout=120)
    with caplog.at_level("WARNING"):
        for retriever in retrievers:
            for call in ({}, {"max_tokens": 100}):
                assert "b" in {d.metadata["doc_id"] for d in retriever.invoke("three new ones", **call)}
    assert "another process wrote; its client was opened again" in caplog.text
