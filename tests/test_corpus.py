"""Reading a corpus from files: one id per file, however the path was written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from langchain_expand.tools.corpus import read_corpus


def test_a_file_has_one_id_however_its_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 15, finding 9: docs/, an absolute path and docs/../docs/ indexed the same file three times."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\nText.")
    monkeypatch.chdir(tmp_path)
    spellings = ["docs", "./docs/", "docs/../docs", str(tmp_path / "docs"), os.path.join("docs", "a.md")]
    ids = {doc.id for spelling in spellings for doc in read_corpus([spelling])}
    assert ids == {os.path.join("docs", "a.md")}
