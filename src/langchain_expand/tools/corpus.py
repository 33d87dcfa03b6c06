"""Reading a user's corpus: folders of ``.txt``/``.md`` files, or JSON Lines.

JSON Lines rows follow the shared data sets: ``{"doc_id": str, "text": str,
"sections": [{"title", "start", "end"}]?}``; other keys become metadata. Files are
read one at a time, so a large corpus streams.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path

from langchain_core.documents import Document

from langchain_expand.store.records import checked_text, encode_metadata, revision
from langchain_expand.text.markdown import BOM
from langchain_expand.units import DOC_ID, SOURCE

__all__ = ["SUFFIXES", "read_corpus", "read_queries"]

SUFFIXES = (".txt", ".md", ".jsonl")

_ALSO = {".markdown": ".md"}
"""Other names of a kind read: a file's suffix is compared in lower case, then named so."""


def _kind(path: Path) -> str:
    """The file's kind: its suffix in lower case, ``.markdown`` as ``.md`` (``notes.TXT`` is ``.txt``)."""
    suffix = path.suffix.lower()
    return _ALSO.get(suffix, suffix)


logger = logging.getLogger(__name__)

_BOM = BOM.encode()
"""The byte-order mark in UTF-8: not part of a file's text, nor of its first row."""


def read_corpus(
    paths: Sequence[Path | str],
    *,
    skip_bad: bool = False,
    skipped: list[str] | None = None,
    root: Path | str | None = None,
) -> Iterator[Document]:
    """Documents from files and folders, in a stable order.

    In a folder, JSON Lines files of queries (rows with ``query`` and no ``text``) are
    skipped, so a data set's ``docs.jsonl`` and ``queries.jsonl`` can sit together.

    A file named twice is read once, and a file with the text of one read before (a copy,
    a hard link) is skipped with a note: its sentences would come back twice, from two
    sources, and read as corroboration. ``.txt``/``.md`` files become one document each, with the path as id and
    ``source``: relative to ``root`` (by default the working directory) where the file lies
    below it, else absolute, so one file has one id however it is named; ``.md`` files are
    marked ``format: markdown``. JSON Lines rows keep
    their ``doc_id`` and their ``sections`` (as metadata, for ``SectionSplitter``).

    Args:
        paths: Files and folders.
        skip_bad: Skip a file that is not UTF-8 text or holds none, or a malformed JSON Lines row,
            instead of raising.
        skipped: Collects ``"where: why"`` for each file or row skipped, for the caller to
            report; without it, each is logged as a warning.
        root: The folder file ids are relative to; the working directory by default.

    Raises:
        ValueError: For a file that is not UTF-8 text or holds none, a malformed JSON Lines row (unless
            ``skip_bad``), or a document id seen before (ids compare as text: ``1`` and ``"1"`` are one id),
            naming the file (and line) and the fix. Raised before that document is yielded,
            so nothing already indexed is replaced.
    """
    seen: dict[str, str] = {}
    texts: dict[str, str] = {}
    notes = skipped if skipped is not None else _Logged()
    base = Path.cwd() if root is None else Path(root)
    for origin, doc in _documents(paths, skip_bad, notes, base.resolve()):
        if origin == doc.id:  # a file (a JSON Lines file's rows are its data set's to judge)
            if seen.get(origin) == origin:
                continue  # one file named twice (``docs`` and ``docs/a.md``): read once
            same = texts.setdefault(revision(doc.page_content), origin)
            if same != origin:  # a copy, a hard link: its sentences would be sent twice, as two sources
                _skip(notes, f"{origin}: the same text as {same}, read already")
                continue
        first = seen.setdefault(str(doc.id), origin)
        if first != origin:
            msg = (
                f"{origin}: doc_id {doc.id!r} repeats the id of {first} (ids compare as text, so 1 and "
                '"1" are one id). Give each document its own doc_id; the documents before this one '
                "are indexed and none was replaced."
            )
            raise ValueError(msg)
        yield doc


def _documents(
    paths: Sequence[Path | str], skip_bad: bool, skipped: list[str], root: Path
) -> Iterator[tuple[str, Document]]:
    """Each document with where it came from (``path`` or ``path:line``)."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            entries = sorted(p for p in path.rglob("*") if not p.name.startswith("."))
            for broken in (p for p in entries if p.is_symlink() and not p.exists()):  # a loop too
                _skip(skipped, f"{broken}: a link to {broken.readlink()}, which leads to no file")
            found = [p for p in entries if p.is_file()]
            for other in (p for p in found if _kind(p) not in SUFFIXES):
                _skip(skipped, f"{other}: only {', '.join(SUFFIXES)} files are read")
            files = [p for p in found if _kind(p) in SUFFIXES]
            yield from _documents([p for p in files if not _is_query_file(p)], skip_bad, skipped, root)
        elif _kind(path) == ".jsonl":
            yield from _jsonl(path, skip_bad, skipped)
        elif not path.exists():
            msg = f"{path}: no such file or folder."
            raise ValueError(msg)
        else:
            name = _path_id(path, root)
            meta: dict[str, object] = {SOURCE: name}
            if _kind(path) == ".md":
                meta["format"] = "markdown"
            try:
                text = _text(path)
            except ValueError as exc:
                if not skip_bad:
                    raise
                _skip(skipped, str(exc))
                continue
            yield name, Document(text, id=name, metadata=meta)


def _path_id(path: Path, root: Path) -> str:
    """One id per file however it was named (``docs/a.md``, ``./docs/../docs/a.md``, absolute).

    Relative to ``root`` where the file lies below it, else absolute, with ``..``, ``.`` and
    symlinks resolved.
    """
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(root))
    except ValueError:
        return str(resolved)


class _Logged(list[str]):
    """Notes of what was skipped, each logged as it is added: for a caller that does not report them."""

    def append(self, note: str) -> None:
        logger.warning("skipped %s", note)
        super().append(note)


_SKIP_HINT = " (or pass --skip-bad)"
"""What an error that ``skip_bad`` would skip past ends with; a note of one skipped leaves it out."""


def _skip(skipped: list[str], note: str) -> None:
    skipped.append(note.replace(_SKIP_HINT, ""))


def read_queries(path: Path | str) -> list[dict[str, object]]:
    """Rows of ``{"query": str, ...}`` from a JSON Lines file."""
    rows = []
    for line_no, row in _rows(Path(path)):
        query = row.get("query")
        if not isinstance(query, str) or not query.strip():
            msg = f"{path}:{line_no}: a query row needs a non-empty 'query' string."
            raise ValueError(msg)
        rows.append(row)
    return rows


def _is_query_file(path: Path) -> bool:
    """A JSON Lines file of queries (``{"query": ...}`` rows) found in a corpus folder."""
    if _kind(path) != ".jsonl":
        return False
    with path.open("rb") as f:
        first = f.readline().removeprefix(_BOM)
    try:
        row = json.loads(first)
    except ValueError:
        return False
    return isinstance(row, dict) and "query" in row and "text" not in row


def _text(path: Path) -> str:
    data = path.read_bytes().removeprefix(_BOM)
    if b"\x00" in data[:8192]:
        msg = f"{path}: looks binary (NUL bytes), not text. Convert it to UTF-8 text or leave it out."
        raise ValueError(msg)
    text = _utf8(data, str(path), "it")
    if not text.strip():
        msg = f"{path}: no text to index (empty or whitespace only). Give it text or leave it out{_SKIP_HINT}."
        raise ValueError(msg)
    return text


def _utf8(data: bytes, where: str, what: str) -> str:
    """``data`` as UTF-8; else an error naming ``where``, the first bad bytes and how to re-encode ``what``."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = (
            f"{where}: not valid UTF-8 (byte {exc.start}: {data[exc.start : exc.start + 4]!r}). "
            f"Re-encode {what} as UTF-8, e.g. `iconv -f latin1 -t utf-8`."
        )
        raise ValueError(msg) from None


def _rows(
    path: Path, skip_bad: bool = False, skipped: list[str] | None = None
) -> Iterator[tuple[int, dict[str, object]]]:
    """Rows one line at a time, so a large JSON Lines file is never held in memory whole."""
    with path.open("rb") as f:
        for line_no, raw in enumerate(f, 1):
            raw = raw.removeprefix(_BOM) if line_no == 1 else raw
            if not raw.strip():
                continue
            try:
                row = _row(path, line_no, _utf8(raw, f"{path}:{line_no}", "the file"))
            except ValueError as exc:
                if not skip_bad:
                    raise
                _skip(skipped if skipped is not None else _Logged(), str(exc))
                continue
            yield line_no, row


def _row(path: Path, line_no: int, line: str) -> dict[str, object]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        msg = f"{path}:{line_no}: not valid JSON ({exc.msg}). Fix or remove the line{_SKIP_HINT}."
        raise ValueError(msg) from None
    if not isinstance(row, dict):
        msg = f"{path}:{line_no}: each line must be a JSON object."
        raise ValueError(msg)
    return row


def _jsonl(path: Path, skip_bad: bool, skipped: list[str]) -> Iterator[tuple[str, Document]]:
    for line_no, row in _rows(path, skip_bad, skipped):
        try:
            doc = _row_document(path, row)
        except ValueError as exc:
            msg = f"{path}:{line_no}: {exc}"
            if not skip_bad:
                raise ValueError(msg) from None
            _skip(skipped, msg)
            continue
        yield f"{path}:{line_no}", doc


def _row_document(path: Path, row: dict[str, object]) -> Document:
    """A JSON Lines row as a document; refused here, as indexing would refuse it, so ``--skip-bad`` can skip it.

    JSON can hold what no store writes (a lone surrogate as an escape, NaN, a reserved key).
    """
    text, doc_id = row.get("text"), row.get(DOC_ID)
    if not isinstance(doc_id, str | int) or not isinstance(text, str) or not text.strip():
        msg = "a document row needs 'doc_id' and a 'text' string that is not blank."
        raise ValueError(msg)
    meta = {SOURCE: str(path), **{k: v for k, v in row.items() if k not in {DOC_ID, "text"}}}
    checked_text(text, str(doc_id))
    encode_metadata(meta, str(doc_id))
    return Document(text, id=str(doc_id), metadata=meta)
