"""Reading a corpus from files: one id per file, however the path was written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from langchain_expand.tools.corpus import read_corpus, read_queries


def test_a_file_has_one_id_however_its_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 15, finding 9: docs/, an absolute path and docs/../docs/ indexed the same file three times."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\nText.")
    monkeypatch.chdir(tmp_path)
    spellings = ["docs", "./docs/", "docs/../docs", str(tmp_path / "docs"), os.path.join("docs", "a.md")]
    ids = {doc.id for spelling in spellings for doc in read_corpus([spelling])}
    assert ids == {os.path.join("docs", "a.md")}


def test_a_skipped_file_is_reported_once_by_whoever_collects_the_notes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # issue #52, finding 11: --skip-bad listed each skipped file twice (a warning, then the summary)
    (tmp_path / "good.txt").write_text("A sentence.")
    (tmp_path / "latin1.txt").write_bytes("Caf\xe9 notes.".encode("latin-1"))
    notes: list[str] = []
    with caplog.at_level("WARNING"):
        assert [d.id for d in read_corpus([tmp_path], skip_bad=True, skipped=notes, root=tmp_path)] == ["good.txt"]
    assert len(notes) == 1
    assert "latin1.txt: not valid UTF-8" in notes[0]
    assert "skipped" not in caplog.text  # the caller reports it
    with caplog.at_level("WARNING"):
        list(read_corpus([tmp_path], skip_bad=True, root=tmp_path))
    assert caplog.text.count("latin1.txt: not valid UTF-8") == 1  # no one collects: logged


def test_a_file_named_twice_is_read_once_and_a_copy_is_skipped_with_a_note(tmp_path: Path) -> None:
    # issue #52, finding 11: the same file indexed under two paths returned its sentences twice
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\nText.")
    (tmp_path / "docs" / "b.md").write_text("# B\nOther text.")
    os.link(tmp_path / "docs" / "a.md", tmp_path / "linked.md")
    (tmp_path / "copy.md").write_text("# A\nText.")
    notes: list[str] = []
    paths = [tmp_path / "docs", tmp_path / "docs" / "a.md", tmp_path / "linked.md", tmp_path / "copy.md"]
    ids = [d.id for d in read_corpus(paths, skipped=notes, root=tmp_path)]
    assert ids == [os.path.join("docs", "a.md"), os.path.join("docs", "b.md")]
    assert notes == [
        f"linked.md: the same text as {os.path.join('docs', 'a.md')}, read already",
        f"copy.md: the same text as {os.path.join('docs', 'a.md')}, read already",
    ]


def test_a_broken_link_in_a_folder_is_skipped_with_a_note(tmp_path: Path) -> None:
    # it was passed over without one: a file the user meant to index went missing unsaid
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\nText.")
    (tmp_path / "docs" / "gone.md").symlink_to(tmp_path / "moved.md")
    (tmp_path / "docs" / "loop.md").symlink_to(tmp_path / "docs" / "loop.md")
    notes: list[str] = []
    ids = [d.id for d in read_corpus([tmp_path / "docs"], skipped=notes, root=tmp_path)]
    assert ids == [os.path.join("docs", "a.md")]
    assert notes == [
        f"{tmp_path / 'docs' / 'gone.md'}: a link to {tmp_path / 'moved.md'}, which leads to no file",
        f"{tmp_path / 'docs' / 'loop.md'}: a link to {tmp_path / 'docs' / 'loop.md'}, which leads to no file",
    ]


def test_a_blank_file_or_row_stops_reading_naming_it_or_is_skipped_with_skip_bad(tmp_path: Path) -> None:
    # An empty file in a folder stopped `index` with the retriever's error, and --skip-bad,
    # which skips what cannot be indexed, did not skip it.
    (tmp_path / "good.txt").write_text("A sentence.")
    (tmp_path / "empty.md").write_text(" \n\n")
    (tmp_path / "rows.jsonl").write_text('{"doc_id": "r1", "text": "Text."}\n{"doc_id": "r2", "text": ""}\n')
    with pytest.raises(ValueError, match=r"empty\.md: no text to index .*--skip-bad"):
        list(read_corpus([tmp_path / "empty.md"], root=tmp_path))
    with pytest.raises(ValueError, match=r"rows\.jsonl:2: a document row needs 'doc_id' and a 'text' string"):
        list(read_corpus([tmp_path / "rows.jsonl"], root=tmp_path))
    notes: list[str] = []
    assert [d.id for d in read_corpus([tmp_path], skip_bad=True, skipped=notes, root=tmp_path)] == ["good.txt", "r1"]
    assert [n.split(":")[0] for n in notes] == [str(tmp_path / "empty.md"), str(tmp_path / "rows.jsonl")]
    assert not any("--skip-bad" in n for n in notes)  # it was passed: the note does not ask for it


def test_a_row_no_store_can_write_stops_reading_naming_its_line_or_is_skipped_with_skip_bad(tmp_path: Path) -> None:
    # JSON escapes can hold a lone surrogate, and JSON's NaN reads as a float: indexing refused
    # such a row with the document's name only, and --skip-bad stopped on it instead of skipping it.
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        '{"doc_id": "a", "text": "Fine text."}\n'
        '{"doc_id": "b", "text": "Half \\ud800 a pair."}\n'
        '{"doc_id": "c", "text": "Fine too.", "score": NaN}\n'
        '{"doc_id": "d", "text": "Last.", "lcx_doc": "x"}\n'
    )
    with pytest.raises(ValueError, match=r"rows\.jsonl:2: Document 'b': its text holds a lone surrogate"):
        list(read_corpus([rows], root=tmp_path))
    notes: list[str] = []
    assert [d.id for d in read_corpus([rows], skip_bad=True, skipped=notes, root=tmp_path)] == ["a"]
    assert [n.split(": ")[0] for n in notes] == [f"{rows}:2", f"{rows}:3", f"{rows}:4"]
    assert "lone surrogate" in notes[0]
    assert "'score' is nan" in notes[1]
    assert "reserved" in notes[2]


def test_a_file_that_starts_with_a_byte_order_mark_is_read_without_it(tmp_path: Path) -> None:
    # A file saved on Windows may start with U+FEFF: a JSON Lines file's first row was "not valid
    # JSON", a queries file so saved was read as documents, and a text file's mark was returned.
    bom = "\ufeff".encode()
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "a.md").write_bytes(bom + b"# Setup\n\nInstall it.\n")
    assert [d.page_content for d in read_corpus([tmp_path / "text"], root=tmp_path)] == ["# Setup\n\nInstall it.\n"]
    (tmp_path / "rows").mkdir()
    (tmp_path / "rows" / "docs.jsonl").write_bytes(
        bom + b'{"doc_id": "a", "text": "First."}\n{"doc_id": "b", "text": "Two."}\n'
    )
    (tmp_path / "rows" / "queries.jsonl").write_bytes(bom + b'{"query": "what is first?"}\n')
    assert [d.id for d in read_corpus([tmp_path / "rows"], root=tmp_path)] == ["a", "b"]
    assert read_queries(tmp_path / "rows" / "queries.jsonl") == [{"query": "what is first?"}]


def test_a_suffix_is_read_in_any_case_and_markdown_by_its_long_name(tmp_path: Path) -> None:
    # notes.TXT and README.MD (as Windows and exports name them) were skipped as "only .txt, .md, .jsonl"
    (tmp_path / "notes.TXT").write_text("Ana owns the release.")
    (tmp_path / "README.MD").write_text("# Setup\n\nRun make.")
    (tmp_path / "guide.markdown").write_text("# Guide\n\nRead this first.")
    (tmp_path / "rows.JSONL").write_text('{"doc_id": "r1", "text": "A row."}\n')
    (tmp_path / "paper.pdf").write_bytes(b"%PDF-1.4")
    notes: list[str] = []
    docs = {d.id: d for d in read_corpus([tmp_path], skipped=notes, root=tmp_path)}
    assert sorted(docs) == ["README.MD", "guide.markdown", "notes.TXT", "r1"]
    assert docs["README.MD"].metadata["format"] == docs["guide.markdown"].metadata["format"] == "markdown"
    assert "format" not in docs["notes.TXT"].metadata
    assert notes == [f"{tmp_path / 'paper.pdf'}: only .txt, .md, .jsonl files are read"]
