"""Parents from a document's own structure, each with its char offsets in the source.

A parent's size comes from the document's structure: Markdown headings
(:class:`MarkdownSectionSplitter`) or sections given as char offsets
(:class:`SectionSplitter`). Any LangChain ``TextSplitter`` can make parents too; its chunks
are located in the source (:func:`locate`), so every parent knows where it stands.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from langchain_expand.sentences import Span
from langchain_expand.units import END, HEADINGS, SECTIONS, START, TITLE

__all__ = ["MarkdownSectionSplitter", "SectionSplitter", "StructureSplitter", "locate", "located_parents"]

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class StructureSplitter(TextSplitter):
    """A parent splitter whose parents carry their char offsets in the source."""

    def __init__(self) -> None:
        super().__init__(chunk_size=1 << 30, chunk_overlap=0)

    def sections(self, document: Document) -> list[tuple[int, int, dict[str, Any]]]:
        """``(start, end, metadata)`` of each parent of ``document``."""
        raise NotImplementedError

    def split_text(self, text: str) -> list[str]:
        """The parents' texts."""
        return [text[s:e] for s, e, _ in self.sections(Document(text))]

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        """Parents with ``start_index``/``end_index`` into their source and its metadata."""
        out = []
        for doc in documents:
            for start, end, extra in self.sections(doc):
                meta = {k: v for k, v in doc.metadata.items() if k != SECTIONS}
                meta.update(extra)
                meta[START], meta[END] = start, end
                out.append(Document(doc.page_content[start:end], metadata=meta))
        return out


def _trimmed(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


class MarkdownSectionSplitter(StructureSplitter):
    """Parents from Markdown headings: each section runs from its heading to the next.

    Headings inside fenced code blocks are not headings. Each parent carries
    ``headings`` (the path, e.g. ``["Setup", "Install"]``) and ``title``. Text before
    the first heading is a parent of its own.
    """

    def __init__(self, max_level: int = 6) -> None:
        """Split at headings of level ``max_level`` and above (``#`` is level 1)."""
        if not 1 <= max_level <= 6:
            msg = f"`max_level` must be between 1 and 6, got {max_level}."
            raise ValueError(msg)
        super().__init__()
        self.max_level = max_level

    def sections(self, document: Document) -> list[tuple[int, int, dict[str, Any]]]:
        """One section per heading of level ``max_level`` or above."""
        text = document.page_content
        cuts: list[tuple[int, list[str]]] = [(0, [])]
        path: list[tuple[int, str]] = []
        fence: str | None = None
        pos = 0
        for line in text.splitlines(keepends=True):
            fence_match = _FENCE.match(line)
            if fence_match:
                mark = fence_match.group(1)
                if fence is None:
                    fence = mark
                elif mark[0] == fence[0] and len(mark) >= len(fence):
                    fence = None
            elif fence is None:
                heading = _HEADING.match(line.rstrip("\r\n"))
                if heading and len(heading.group(1)) <= self.max_level:
                    level = len(heading.group(1))
                    path = [(lv, t) for lv, t in path if lv < level] + [(level, heading.group(2))]
                    cuts.append((pos, [t for _, t in path]))
            pos += len(line)
        out = []
        for (start, headings), (end, _) in zip(cuts, [*cuts[1:], (len(text), [])], strict=True):
            span = _trimmed(text, start, end)
            if span:
                out.append((*span, {HEADINGS: headings, TITLE: headings[-1] if headings else ""}))
        return out


class SectionSplitter(StructureSplitter):
    """Parents from sections given as char offsets in the document's metadata.

    ``metadata[key]`` holds ``[{"title": str, "start": int, "end": int}, ...]``, as in
    the shared corpora. Text that no section covers becomes an untitled parent, so
    nothing is lost; a section that overlaps the one before it is clipped to start where
    that one ends (real annotations overlap), so no text is in two parents.
    """

    def __init__(self, key: str = SECTIONS, *, fallback: StructureSplitter | None = None) -> None:
        """Read the sections from ``metadata[key]``.

        Args:
            key: The metadata key holding the sections.
            fallback: Splits documents that have no sections (e.g. a
                ``MarkdownSectionSplitter``); without one they are a single parent.
        """
        super().__init__()
        self.key = key
        self.fallback = fallback

    def sections(self, document: Document) -> list[tuple[int, int, dict[str, Any]]]:
        """The given sections, plus untitled parents for uncovered text."""
        text = document.page_content
        if not document.metadata.get(self.key) and self.fallback is not None:
            return self.fallback.sections(document)
        given = sorted(document.metadata.get(self.key) or [], key=lambda s: s["start"])
        out: list[tuple[int, int, dict[str, Any]]] = []
        at = 0
        for section in given:
            start, end = int(section["start"]), int(section["end"])
            if not 0 <= start <= end <= len(text):
                msg = (
                    f"Document {document.id!r}: section {section.get(TITLE)!r} has offsets "
                    f"{start}-{end}, outside the text ({len(text)} chars). Fix its offsets."
                )
                raise ValueError(msg)
            start = max(start, at)  # overlapping sections are clipped: no text in two parents
            if start >= end:
                continue
            gap = _trimmed(text, at, start)
            if gap:
                out.append((*gap, {TITLE: ""}))
            span = _trimmed(text, start, end)
            if span:
                out.append((*span, {TITLE: section.get(TITLE, "")}))
            at = end
        tail = _trimmed(text, at, len(text))
        if tail:
            out.append((*tail, {TITLE: ""}))
        return out


def locate(text: str, chunks: list[str], doc_id: str) -> list[Span]:
    """Char offsets of consecutive chunks of ``text``, found in order."""
    spans = []
    at = 0
    for chunk in chunks:
        start = text.find(chunk, at)
        if start < 0:
            start = text.find(chunk)
        if start < 0 or not chunk:
            msg = (
                f"Document {doc_id!r}: the splitter returned a chunk that is not a substring of its "
                "input, so its offsets are unknown. Use a splitter that keeps the text verbatim."
            )
            raise ValueError(msg)
        spans.append((start, start + len(chunk)))
        at = start + 1
    return spans


def located_parents(splitter: TextSplitter, source: Document) -> list[Document]:
    """Parents from any ``TextSplitter``, with their offsets into the source."""
    texts = splitter.split_text(source.page_content)
    spans = locate(source.page_content, texts, str(source.id))
    return [Document(source.page_content[s:e], metadata={**source.metadata, START: s, END: e}) for s, e in spans]
