"""A window's text from its run of sentences (``windows/assembly.py``): checked against its head, counted exactly."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from langchain_expand import LexicalIndex, TokenCounter
from langchain_expand.store.records import unit_id
from langchain_expand.text.sentences import SentenceSplitter
from langchain_expand.text.tokens import counter_key
from langchain_expand.units import END, HIT, HITS, SCORE, SPAN, START, STORED_INDEX, STORED_REV, TOKENS
from langchain_expand.windows.assembly import Runs, assemble, by_sections, joined_text, run_tokens
from langchain_expand.windows.cache import SentenceCache
from langchain_expand.windows.hits import Hit
from langchain_expand.windows.indexing import prepare
from langchain_expand.windows.layout import SentenceRecords
from langchain_expand.windows.plan import Unit
from langchain_expand.windows.reads import Reads

COUNTER = TokenCounter("cl100k_base")
TEXT = (
    "# Remote\n\nThe remote pairs over Bluetooth.  Hold the home key for five seconds. "
    "The light blinks twice when it is paired.\n\n## Batteries\n\nOpen the cover at the back. "
    "Insert two AAA cells, minus side first."
)


def records(text: str = TEXT, doc_id: str = "manual") -> SentenceRecords:
    """The document's sentence records, as indexing builds them (the splitter, tiktoken's counts)."""
    prepared = prepare(
        Document(text),
        doc_id,
        splitter=SentenceSplitter(token_counter=COUNTER),
        token_counter=COUNTER,
        sentence_prefix=None,
        max_sentence_tokens=None,
        keep_counts=True,
        check_metadata=lambda metadata, doc_id: None,
    )
    body = prepared.payload
    assert isinstance(body, SentenceRecords)
    return body


def stored(body: SentenceRecords) -> list[Document]:
    """Every record as the store holds it, with its id."""
    return [
        Document(r.page_content, metadata=r.metadata, id=unit_id(body.doc_id, i))
        for i, r in enumerate(body.record(i) for i in range(body.n))
    ]


class Stored:
    """Records as a store holds them, read by id: all a query's reads ask of a store to build windows."""

    def __init__(self, records: list[Document]) -> None:
        self.by_id = {r.id: r for r in records}
        self.asked: list[str] = []

    def get_by_ids(self, ids: list[str]) -> list[Document]:
        self.asked += ids
        return [self.by_id[i] for i in ids if i in self.by_id]

    def with_vectors(self, ids: list[str]) -> list[tuple[Document, list[float]]]:
        return [(doc, [1.0, float(doc.metadata[STORED_INDEX])]) for doc in self.get_by_ids(ids)]


def record_runs(records: list[Document]) -> Runs:
    """Runs of ``records`` as a query reads them from a store: the head first, then the run's sentences."""
    reads = Reads(Stored(records), SentenceCache(), 0, COUNTER)  # type: ignore[arg-type]

    def run(doc_id: str, first: int, last: int) -> Any:
        reads.sentences([(doc_id, i) for i in (0, *range(first, last))])
        return reads.local_run(doc_id, first, last)

    return run


def unit(body: SentenceRecords, first: int, last: int, hit: int, rev: str | None = None) -> Unit:
    return Unit(body.doc_id, first, last, body.n, [Hit(body.doc_id, hit, body.n, rev, 0.8, {})])


def test_a_window_is_the_source_text_of_its_sentences_gaps_included() -> None:
    body = records()
    run = record_runs(stored(body))(body.doc_id, 1, 4)
    assert run is not None
    (window,) = assemble([unit(body, 1, 4, 2, body.rev)], record_runs(stored(body)), COUNTER)
    assert window.page_content == TEXT[window.metadata[START] : window.metadata[END]]
    assert window.page_content == joined_text(run.sentences)
    assert "Bluetooth.  Hold" in window.page_content  # the gap as it stands, two spaces
    assert window.metadata[SPAN] == [1, 4]
    assert window.metadata[HIT] == 2
    assert window.metadata[HITS] == [2]
    assert window.metadata[SCORE] == 0.8
    assert window.metadata[TOKENS] == COUNTER(window.page_content)


def test_a_run_with_a_sentence_of_another_revision_or_missing_is_skipped_and_named() -> None:
    body = records()
    rewritten = stored(body)
    rewritten[2] = Document(
        rewritten[2].page_content, metadata={**rewritten[2].metadata, STORED_REV: "v2"}, id=rewritten[2].id
    )
    assert record_runs(rewritten)(body.doc_id, 1, 4) is None  # a writer at work: half of another version
    missing = [r for r in stored(body) if r.id != unit_id(body.doc_id, 3)]
    assert record_runs(missing)(body.doc_id, 1, 4) is None
    assert record_runs(stored(body)[1:])(body.doc_id, 1, 4) is None  # no head: not committed
    skipped: set[str] = set()
    kept = assemble([unit(body, 1, 4, 2), unit(body, 4, 6, 4)], record_runs(rewritten), COUNTER, skipped)
    assert skipped == {body.doc_id}
    assert [w.metadata[SPAN] for w in kept] == [[4, 6]]  # the other window of that version stands
    stale = assemble([unit(body, 4, 6, 4, rev="an older revision")], record_runs(stored(body)), COUNTER, skipped)
    assert stale == []  # its hit was matched in another version


def test_a_runs_count_from_its_sentences_counts_is_the_count_of_its_text() -> None:
    # Each sentence's count and each one's joined with the next, kept at indexing, give the
    # window's count without counting its text again: exact, or None where it cannot be.
    long_text = " ".join(f"Sentence number {i} says the remote has {i * 7} buttons on its face." for i in range(40))
    for text in (TEXT, long_text):
        body = records(text)
        copies = list(body.local(lambda i: None, counter_key(COUNTER)))
        for first in range(body.n):
            for last in range(first + 1, min(body.n, first + 12) + 1):
                run = copies[first:last]
                derived = run_tokens(COUNTER, counter_key(COUNTER) or "", run)
                assert derived is None or derived == COUNTER(joined_text(run)), (first, last)
        assert run_tokens(COUNTER, counter_key(COUNTER) or "", copies) == COUNTER(joined_text(copies))
    other = TokenCounter("o200k_base")  # counts kept by another counter are not used
    assert run_tokens(other, counter_key(other) or "", copies) is None


def test_a_window_ending_on_the_next_sections_heading_is_cut_before_it() -> None:
    body = records()
    heading = next(i for i in range(body.n) if body.record(i).page_content.startswith("## Batteries"))
    runs = record_runs(stored(body))
    windows = assemble([unit(body, 1, heading + 1, 1), unit(body, heading, heading + 1, heading)], runs, COUNTER)
    kept, cut = by_sections(windows, COUNTER)
    assert cut
    (window,) = kept  # the heading alone says nothing: left out
    assert window.metadata[SPAN] == [1, heading]
    assert not window.page_content.rstrip().endswith("Batteries")
    assert window.metadata[TOKENS] == COUNTER(window.page_content)
    whole, cut_none = by_sections(assemble([unit(body, 1, heading + 2, 1)], runs, COUNTER), COUNTER)
    assert not cut_none  # a heading with the sentence below it stays
    assert whole[0].metadata[SPAN] == [1, heading + 2]


def test_assembling_reads_each_sentence_once_through_the_runs_given() -> None:
    body = records()
    asked: list[tuple[Any, ...]] = []
    runs = record_runs(stored(body))

    def counted(doc_id: str, first: int, last: int) -> Any:
        asked.append((doc_id, first, last))
        return runs(doc_id, first, last)

    assemble([unit(body, 0, 2, 0), unit(body, 3, 5, 4)], counted, COUNTER)
    assert asked == [(body.doc_id, 0, 2), (body.doc_id, 3, 5)]


def test_a_sentence_is_read_once_as_its_copy_and_a_record_read_later_adds_only_its_vector() -> None:
    # The local copies hold the texts and counts (the head's written without a vector); the
    # store is read for what they lack. One copy a sentence, whatever it was read from.
    body = records()
    store = Stored(stored(body))
    lexical = LexicalIndex()
    lexical.replace([(body.doc_id, body.rev, body.local(lambda i: None, counter_key(COUNTER)))])
    reads = Reads(store, SentenceCache(), 0, COUNTER, lexical)  # type: ignore[arg-type]
    found = reads.sentences([(body.doc_id, i) for i in (1, 2)])
    assert store.asked == [unit_id(body.doc_id, 0)]  # the head alone, for its revision
    assert {p: (r.rev, r.copy.tokens) for p, r in found.items()} == {
        (body.doc_id, i): (body.rev, COUNTER(body.record(i).page_content)) for i in (1, 2)
    }
    with_vectors = reads.sentences([(body.doc_id, i) for i in (0, 1)], vectors=True)
    assert store.asked == [unit_id(body.doc_id, 0), unit_id(body.doc_id, 1)]  # the copies' vectors are None
    assert with_vectors[(body.doc_id, 0)].copy.vector == [1.0, 0.0]  # the head's, read with it
    assert with_vectors[(body.doc_id, 1)].copy.tokens == found[(body.doc_id, 1)].copy.tokens  # the copy kept
    assert reads.sizes([(body.doc_id, i) for i in range(3)]) == {
        (body.doc_id, i): COUNTER(body.record(i).page_content) for i in range(3)
    }
    run = reads.local_run(body.doc_id, 0, 3)
    assert run is not None
    assert joined_text(run.sentences) == TEXT[: run.sentences[-1].end]
