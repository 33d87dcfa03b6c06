"""The shared core: parameter rules, over-fetch, and the indexing protocol both retrievers use.

These run on LangChain's real ``InMemoryVectorStore`` and ``InMemoryStore`` with
deterministic fake embeddings: what they claim (write order, what is stored, what is
removed) does not depend on what the vectors mean.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    MarkdownSectionSplitter,
    Performance,
    SentenceWindowRetriever,
)
from langchain_expand.rules import check_flag, check_non_negative, check_optional_positive, check_positive, check_query
from langchain_expand.store.search import overfetch
from langchain_expand.units import STORED_COUNT, STORED_START

from .conftest import as_documents, load_docs, run_python


class RecordingStore(InMemoryVectorStore):
    """The real in-memory store, remembering the ids of each write and counting embeddings."""

    def __init__(self) -> None:
        super().__init__(embedding=DeterministicFakeEmbedding(size=16))
        self.writes: list[list[str]] = []
        self.embedded = 0
        self.fail_on_write: int | None = None

    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        if self.fail_on_write is not None and len(self.writes) == self.fail_on_write:
            raise KeyboardInterrupt  # the process dies mid-index
        self.writes.append(list(kwargs["ids"]))
        self.embedded += len(documents)
        return super().add_documents(documents, **kwargs)


TEXT = "One sentence here. Two sentences now. Three of them. Four and more. Five at last."
SHORT = "One sentence here. Two sentences now."


def windows(store: RecordingStore) -> SentenceWindowRetriever:
    return SentenceWindowRetriever(vectorstore=store, performance=Performance(batch_size=2))


def test_window_indexing_writes_every_head_last() -> None:
    store = RecordingStore()
    windows(store).add_documents([Document(TEXT, id="a"), Document(SHORT, id="b")])
    *body, heads = store.writes
    assert sorted(heads) == ["a::0", "b::0"]
    assert sorted(i for batch in body for i in batch) == ["a::1", "a::2", "a::3", "a::4", "b::1"]


def test_re_adding_a_shorter_version_leaves_no_orphans_and_unchanged_embeds_nothing() -> None:
    store = RecordingStore()
    retriever = windows(store)
    retriever.add_documents([Document(TEXT, id="a")])
    retriever.add_documents([Document(SHORT, id="a")])
    assert sorted(store.store) == ["a::0", "a::1"]
    embedded = store.embedded
    retriever.add_documents([Document(SHORT, id="a")])
    assert store.embedded == embedded


def test_an_interrupted_window_index_is_completed_by_the_next_run() -> None:
    clean = RecordingStore()
    windows(clean).add_documents([Document(TEXT, id="a")])
    store = RecordingStore()
    retriever = windows(store)
    retriever.add_documents([Document(SHORT, id="a")])
    store.fail_on_write = len(store.writes) + 1  # the first body batch lands, then the process dies
    with pytest.raises(KeyboardInterrupt):
        retriever.add_documents([Document(TEXT, id="a")])
    assert store.get_by_ids(["a::0"])[0].page_content == "One sentence here."  # old head: still v1
    store.fail_on_write = None
    retriever.add_documents([Document(TEXT, id="a")])
    assert sorted(store.store) == sorted(clean.store)
    assert [d.page_content for d in store.get_by_ids(sorted(store.store))] == [
        d.page_content for d in clean.get_by_ids(sorted(clean.store))
    ]


def test_deleting_a_document_finds_sentences_an_interrupted_run_left_past_its_end() -> None:
    store = RecordingStore()
    retriever = windows(store)
    retriever.add_documents([Document(SHORT, id="a"), Document(SHORT, id="keep")])
    store.fail_on_write = len(store.writes) + 2  # body written, head not
    with pytest.raises(KeyboardInterrupt):
        retriever.add_documents([Document(TEXT, id="a")])
    assert "a::4" in store.store
    retriever.delete(["a", "never-added"])
    assert sorted(store.store) == ["keep::0", "keep::1"]


MARKDOWN = "# A\nAlpha text here.\n\n# B\nBeta text here.\n\n# C\nGamma text here."


def parents(store: RecordingStore, docstore: InMemoryStore) -> BudgetedParentDocumentRetriever:
    return BudgetedParentDocumentRetriever(
        vectorstore=store, docstore=docstore, parent_splitter=MarkdownSectionSplitter(max_level=1), batch_size=2
    )


def test_parent_indexing_writes_the_head_parent_last_and_replaces_without_orphans() -> None:
    store, docstore = RecordingStore(), InMemoryStore()
    retriever = parents(store, docstore)
    written: list[list[str]] = []
    original = docstore.mset

    def mset(pairs: Any) -> None:
        written.append([key for key, _ in pairs])
        original(pairs)

    object.__setattr__(docstore, "mset", mset)
    retriever.add_documents([Document(MARKDOWN, id="m")])
    assert written[-1] == ["m.p0"]
    assert sorted(docstore.yield_keys()) == ["m.p0", "m.p1", "m.p2"]
    retriever.add_documents([Document("# A\nAlpha text here.", id="m")])
    assert sorted(docstore.yield_keys()) == ["m.p0"]
    assert sorted(store.store) == ["m.p0::0"]
    retriever.delete(["m"])
    assert list(docstore.yield_keys()) == []
    assert store.store == {}


def test_an_interrupted_parent_index_is_completed_by_the_next_run() -> None:
    clean_store, clean_docstore = RecordingStore(), InMemoryStore()
    parents(clean_store, clean_docstore).add_documents([Document(MARKDOWN, id="m")])
    store, docstore = RecordingStore(), InMemoryStore()
    retriever = parents(store, docstore)
    retriever.add_documents([Document("# A\nOld alpha.\n\n# Z\nOld zeta.\n\n# Y\nOld y.\n\n# X\nOld x.", id="m")])
    store.fail_on_write = len(store.writes) + 1
    with pytest.raises(KeyboardInterrupt):
        retriever.add_documents([Document(MARKDOWN, id="m")])
    store.fail_on_write = None
    retriever.add_documents([Document(MARKDOWN, id="m")])
    assert sorted(docstore.yield_keys()) == sorted(clean_docstore.yield_keys())
    assert sorted(store.store) == sorted(clean_store.store)
    keys = sorted(docstore.yield_keys())
    assert [d.page_content for d in docstore.mget(keys)] == [d.page_content for d in clean_docstore.mget(keys)]


def test_overfetch_doubles_until_the_caller_has_enough_or_the_store_runs_out() -> None:
    asked: list[int] = []

    def search(k: int) -> list[tuple[Document, float]]:
        asked.append(k)
        return [(Document(str(i)), 1.0) for i in range(min(k, 50))]

    for scored in overfetch(search, 4, need=4):
        if len(scored) >= 30:
            break
    assert asked == [4, 8, 16, 32]
    asked.clear()
    assert sum(1 for _ in overfetch(search, 4, need=4)) == 5  # 4, 8, 16, 32, then 64 finds only 50
    assert asked == [4, 8, 16, 32, 64]
    assert len(list(overfetch(lambda k: [(Document("x"), 1.0)] * k, 1, need=1))) == 7  # 1 .. 64: the limit


@pytest.mark.parametrize(
    ("rule", "value", "message"),
    [
        (check_positive, 0, "`n` must be a positive integer, got 0."),
        (check_positive, True, "`n` must be a positive integer, got True."),
        (check_positive, 2.0, "`n` must be a positive integer, got 2.0."),
        (check_non_negative, -1, "`n` must be an integer >= 0, got -1."),
        (check_optional_positive, 0, "`n` must be a positive integer or None \\(no limit\\), got 0."),
        (  # a NumPy count is an integer, but not a Python int: the message says what to pass
            check_optional_positive,
            np.int64(3),
            "`n` must be a positive integer or None \\(no limit\\), got np.int64\\(3\\) \\(a numpy.int64: pass int",
        ),
        (check_flag, "no", "`n` must be True or False, got 'no'."),
        (check_flag, 0, "`n` must be True or False, got 0."),
    ],
)
def test_each_rule_has_one_wording_that_names_the_parameter(rule: Any, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rule("n", value)


def test_valid_values_pass_every_rule() -> None:
    check_positive("n", 1)
    check_non_negative("n", 0)
    check_optional_positive("n", None)
    check_optional_positive("n", 5)
    check_flag("n", False)
    check_query("a question")
    with pytest.raises(ValueError, match="The query is empty"):
        check_query("  ")


def test_a_flag_given_per_call_is_a_bool_on_both_retrievers() -> None:
    # invoke(q, merge="no") merged ("no" is truthy) where the field, through pydantic, read "no" as False
    store = RecordingStore()
    window, parent = windows(store), parents(RecordingStore(), InMemoryStore())
    window.add_documents([Document(TEXT, id="a")])
    parent.add_documents([Document(MARKDOWN, id="m")])
    for call in ({"merge": "no"}, {"expand": 0}):
        with pytest.raises(ValueError, match=f"`{next(iter(call))}` must be True or False"):
            window.invoke("alpha", **call)
    with pytest.raises(ValueError, match="`expand` must be True or False, got 'false'"):
        parent.invoke("alpha", expand="false")
    assert window.invoke("alpha", merge=False, expand=True)
    assert parent.invoke("alpha", expand=False)


def test_expand_hits_names_what_is_not_a_match_of_its_own_retriever() -> None:
    # parents' expand_hits failed with KeyError('parent_id') on another retriever's matches, and
    # both with AttributeError on a string
    window, parent = windows(RecordingStore()), parents(RecordingStore(), InMemoryStore())
    window.add_documents([Document(TEXT, id="a")])
    parent.add_documents([Document(MARKDOWN, id="m")])
    sentences, children = window.invoke("alpha", expand=False), parent.invoke("alpha", expand=False)
    assert window.expand_hits(sentences)
    assert parent.expand_hits(children)
    with pytest.raises(ValueError, match=r"needs the metadata of a match-only result \(parent_id, score\); .* lacks"):
        parent.expand_hits(sentences)
    with pytest.raises(ValueError, match=r"needs the metadata of a match-only result \(doc_id, hit, .* lacks 'hit'"):
        window.expand_hits(children)
    for retriever in (window, parent):
        with pytest.raises(TypeError, match=r"expand_hits takes a list of Documents .* a str: 'alpha'"):
            retriever.expand_hits("alpha")  # type: ignore[arg-type]


def test_a_match_whose_text_was_changed_is_skipped_saying_so(caplog: pytest.LogCaptureFixture) -> None:
    # the warning named only a deleted document or a running write: a compressor had rewritten the match
    window = windows(RecordingStore())
    window.add_documents([Document(TEXT, id="a")])
    (hit,) = window.invoke("alpha", k=1, expand=False)
    assert window.expand_hits([hit])  # as matched: expanded
    rewritten = Document(hit.page_content.upper(), metadata=hit.metadata)
    with caplog.at_level("WARNING"):
        assert window.expand_hits([rewritten]) == []
    assert "or the match's text was changed after it was matched" in caplog.text


def test_expand_hits_makes_fixed_windows_on_a_retriever_whose_windows_are_guided() -> None:
    # window="guided" on the retriever refused expand_hits without a budget ("give max_tokens"),
    # and with before/after ("sets the fixed window's shape"): RerankThenExpand could not expand
    window = SentenceWindowRetriever(vectorstore=RecordingStore(), window="guided", max_tokens=500)
    fixed = window.model_copy(update={"window": "fixed", "max_tokens": None})
    window.add_documents([Document(TEXT, id="a")])
    hits = window.invoke("Three of them", k=1, expand=False)
    unbudgeted = window.model_copy(update={"max_tokens": None})  # each call gives its budget
    for shape in ({}, {"before": 1, "after": 0}, {"before": 0, "after": 2, "max_tokens": 40}):
        expected = [d.metadata["span"] for d in fixed.expand_hits(hits, **shape)]
        for guided in (window, unbudgeted):
            assert [d.metadata["span"] for d in guided.expand_hits(hits, **shape)] == expected
    spans = [window.expand_hits(hits, **shape)[0].metadata["span"] for shape in ({}, {"before": 1, "after": 0})]
    hit = hits[0].metadata["hit"]
    assert spans == [[max(0, hit - 2), min(5, hit + 3)], [max(0, hit - 1), hit + 1]]


def test_expand_hits_builds_no_window_around_another_sentence_a_rewrite_put_at_the_hits_index() -> None:
    # Found probing rerank-then-expand with a writer: a document rewritten between the match and
    # its expansion had its window built around whatever sentence then stood at the hit's index,
    # labelled as the hit. Parents already refused a child of another revision.
    window = windows(RecordingStore())
    window.add_documents([Document(TEXT, id="a")])
    hits = window.invoke("Three of them", k=1, expand=False)
    matched = hits[0].page_content
    window.add_documents([Document(TEXT + " Six to end.", id="a")])  # the hit stays where it was
    assert [d.page_content for d in window.expand_hits(hits, before=0, after=0)] == [matched]
    window.add_documents([Document("A new first line. " + TEXT, id="a")])  # every sentence moves down one
    assert window.expand_hits(hits, before=1, after=1) == []
    again = window.invoke(matched, k=4, expand=False)
    again = [d for d in again if d.page_content == matched]
    assert [d.page_content for d in window.expand_hits(again, before=0, after=0)] == [matched]


# -- issue 15, finding 9: bad input is refused before anything is written ------------------------


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"": 1}, "metadata key '' is reserved or unusable"),
        ({"rating": float("nan")}, "metadata 'rating' is nan"),
        ({"rating": float("inf")}, "metadata 'rating' is inf"),
    ],
)
def test_unusable_metadata_is_refused_before_anything_is_written(metadata: dict, message: str) -> None:
    for retriever_of in (windows, lambda s: parents(s, InMemoryStore())):
        store = RecordingStore()
        retriever = retriever_of(store)
        with pytest.raises(ValueError, match=f"Document 'bad': {message}"):
            retriever.add_documents([Document(MARKDOWN, id="fine"), Document(MARKDOWN, id="bad", metadata=metadata)])
        assert store.writes == []  # "fine" was not written either: the call is all or nothing


def test_an_id_too_long_for_a_docstore_key_is_refused_before_anything_is_written() -> None:
    store, docstore = RecordingStore(), InMemoryStore()
    with pytest.raises(ValueError, match="ids are text of at most 400 characters without NUL"):
        parents(store, docstore).add_documents([Document(MARKDOWN, id="d" * 600)])
    assert store.writes == []
    assert list(docstore.yield_keys()) == []


def test_an_id_with_a_lone_surrogate_is_refused_naming_the_document_before_anything_is_written() -> None:
    # issue #51, finding 6: Chroma's binding raised a bare UnicodeEncodeError that named no document
    for retriever_of in (windows, lambda s: parents(s, InMemoryStore())):
        store = RecordingStore()
        with pytest.raises(ValueError, match=r"Document 1 has the id 'a\\ud800b', which holds a lone surrogate"):
            retriever_of(store).add_documents([Document(MARKDOWN, id="fine"), Document(MARKDOWN, id="a\ud800b")])
        assert store.writes == []


def test_a_huge_query_is_cut_before_it_is_embedded(caplog: pytest.LogCaptureFixture) -> None:
    from langchain_expand.store.search import MAX_QUERY_CHARS

    seen: list[int] = []

    class Recording(DeterministicFakeEmbedding):
        def embed_query(self, text: str) -> list[float]:
            seen.append(len(text))
            return super().embed_query(text)

    retriever = SentenceWindowRetriever(vectorstore=InMemoryVectorStore(Recording(size=16)))
    retriever.add_documents([Document(TEXT, id="a")])
    with caplog.at_level("WARNING"):
        assert retriever.invoke("one sentence " * 1_000_000, k=1)  # 13 MB
    assert seen == [MAX_QUERY_CHARS]
    assert "searching with its first 32000" in caplog.text


def live_documents() -> int:
    return sum(type(o) is Document for o in gc.get_objects())  # type(): isinstance wakes lazy torch attributes


@pytest.mark.parametrize("retriever_of", ["windows", "parents"])
def test_a_large_document_is_built_into_records_one_batch_at_a_time(retriever_of: str) -> None:
    """Issue 15, finding 9: one 50 MB document was held whole in memory, as records, before its first write.

    Every sentence (or child) became a Document with its metadata, about 1.2 KB each, twenty
    times the text. Now records are built as their batch is written: at the first write, no
    more of them exist than one batch. (Memory itself is measured in benchmarks/memory.py.)
    """
    text = "# Part\n" + " ".join(f"Sentence number {i} is here." for i in range(3000))
    store = RecordingStore()
    if retriever_of == "windows":
        retriever: Any = SentenceWindowRetriever(vectorstore=store, performance=Performance(batch_size=50))
    else:
        retriever = BudgetedParentDocumentRetriever(
            vectorstore=store,
            docstore=InMemoryStore(),
            parent_splitter=MarkdownSectionSplitter(max_level=1),
            child_splitter=RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=0),
            batch_size=50,
        )
    before = live_documents()
    at_first_write: list[int] = []

    def count_then_die(documents: list[Document], **kwargs: Any) -> list[str]:
        at_first_write.append(live_documents() - before)
        raise KeyboardInterrupt

    object.__setattr__(store, "add_documents", count_then_die)
    with pytest.raises(KeyboardInterrupt):
        retriever.add_documents([Document(text, id="big")])
    assert at_first_write[0] <= 50 + 5  # one batch, the parent, the input document


def test_a_large_text_is_hashed_in_pieces_to_the_digest_of_the_whole() -> None:
    """Hashing a text in pieces (no whole copy of a 50 MB text) must not change any stored revision."""
    import hashlib

    from langchain_expand.store.records import revision

    text = "héllo \ud800 wörld, " * 200_000  # over two chunks, non-ASCII and a lone surrogate
    whole = hashlib.sha256((text + "\x00" + "None").encode("utf-8", "surrogatepass")).hexdigest()[:16]
    assert revision(text, None) == whole


# -- a real restart ----------------------------------------------------------------------------

_ASK = """
def asked(windows, parents):
    found = windows.invoke("the cost of the remote control", before=3, after=1)
    return {
        "windows": [[d.page_content, d.metadata["span"], round(d.metadata["score"], 5)] for d in found],
        "parents": [[d.metadata["parent_id"], d.page_content] for d in parents.invoke("pair the remote")],
    }
"""
_OPEN = """
from langchain_expand import (
    BudgetedParentDocumentRetriever, MarkdownSectionSplitter, SentenceWindowRetriever, SQLDocStore, chroma_store,
)

def opened(path, embeddings=None):
    windows = SentenceWindowRetriever(
        vectorstore=chroma_store("windows", persist_directory=f"{path}/windows", embeddings=embeddings), k=4
    )
    parents = BudgetedParentDocumentRetriever(
        vectorstore=chroma_store("parents", persist_directory=f"{path}/parents", embeddings=embeddings),
        docstore=SQLDocStore(f"sqlite:///{path}/docstore.sqlite"),
        parent_splitter=MarkdownSectionSplitter(max_level=2),
        k=3,
    )
    return windows, parents
"""


@pytest.mark.integration  # a second process: one for both retrievers, the model loads once there
def test_a_restarted_process_gives_the_same_windows_and_parents(tmp_path: Path, minilm: Embeddings) -> None:
    scope: dict[str, Any] = {}
    exec(_ASK + _OPEN, scope)  # opened and asked the same way in both processes
    windows, parents = scope["opened"](tmp_path, minilm)
    windows.add_documents(as_documents(load_docs("qmsum")))
    parents.add_documents(as_documents(load_docs("emanual"), key="source"))  # title: the sections'
    here = json.loads(json.dumps(scope["asked"](windows, parents)))
    restart = "import json, sys\n" + _ASK + _OPEN + "print(json.dumps(asked(*opened(sys.argv[1]))))"
    restarted = json.loads(run_python(restart, str(tmp_path)))
    assert len(here["windows"]) == 4
    assert len(here["parents"]) == 3
    assert restarted == here


def _split_every(text: str, n: int) -> list[tuple[int, int]]:
    """``n``-char pieces of the text (a custom splitter)."""
    return [(at, min(at + n, len(text))) for at in range(0, len(text), n)]


def test_a_custom_splitter_changed_by_its_arguments_or_body_re_splits() -> None:
    """Issue #34, finding 6: two partials (or two lambdas) with other settings kept the old sentences."""
    import functools

    text = "The warranty lasts two years. Returns take thirty days."
    store = RecordingStore()
    for splitter, written in (  # every one splits the 55 chars in two, at another place
        (functools.partial(_split_every, n=28), True),
        (functools.partial(_split_every, n=28), False),  # the same settings: nothing to do
        (functools.partial(_split_every, n=30), True),
        (lambda t: _split_every(t, 30), True),
        (lambda t: _split_every(t, 30), False),  # another lambda, the same code: the same splitter
        (lambda t: _split_every(t, 29), True),
    ):
        retriever = SentenceWindowRetriever(vectorstore=store, splitter=splitter)
        done = retriever.index_documents([Document(text, id="a")])
        assert bool(done.written) is written, splitter
        assert len(splitter(text)) == int(store.get_by_ids(["a::0"])[0].metadata[STORED_COUNT]) == 2
        assert store.get_by_ids(["a::1"])[0].metadata[STORED_START] == splitter(text)[1][0]


@pytest.mark.parametrize("design", ["windows", "parents"])
def test_wrong_arguments_are_answered_with_what_was_expected(design: str) -> None:
    """Issue #35, finding 12: add_documents(["text"]), delete(None) and invoke(42) raised AttributeError,
    TypeError from deep inside, or "the query is empty"."""
    from langchain_core.stores import InMemoryStore

    store = RecordingStore()
    retriever: Any = (
        SentenceWindowRetriever(vectorstore=store)
        if design == "windows"
        else BudgetedParentDocumentRetriever(vectorstore=store, docstore=InMemoryStore())
    )
    retriever.add_documents([Document("The warranty lasts two years. Returns take thirty days.", id="a")])
    with pytest.raises(TypeError, match=r"item 0 is a str\. Wrap each text: Document\(page_content=text"):
        retriever.add_documents(["text"])
    with pytest.raises(TypeError, match="add_documents takes a list of Documents, got a Document"):
        retriever.add_documents(Document("text"))
    with pytest.raises(ValueError, match="delete takes a list of document ids, got None"):  # DocumentIndex's rule
        retriever.delete(None)
    with pytest.raises(TypeError, match=r"got the str 'a': pass \['a'\]"):
        retriever.delete("a")
    with pytest.raises(TypeError, match="The query must be text, got int 42"):
        retriever.invoke(42)
    assert retriever.invoke("warranty")  # nothing was lost
