"""Parents from a document's own structure, each with its char offsets in the source.

A parent's size comes from the document's structure: Markdown headings
(:class:`MarkdownSectionSplitter`) or sections given as char offsets
(:class:`SectionSplitter`). Any LangChain ``TextSplitter`` can make parents too; its chunks
are located in the source (:func:`locate`), so every parent knows where it stands.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from langchain_expand.text import markdown
from langchain_expand.text.lines import LINE, Span, stripped
from langchain_expand.units import END, HEADINGS, SECTIONS, START, TITLE

__all__ = ["MarkdownSectionSplitter", "SectionSplitter", "StructureSplitter", "locate", "located_parents"]

"""A line as the Markdown parser counts them."""


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


class MarkdownSectionSplitter(StructureSplitter):
    """Parents from Markdown headings: each section runs from its heading to the next.

    Headings come from a Markdown parser (:mod:`langchain_expand.text.markdown`): a ``#`` line
    inside a fenced code block is not one, wherever the fence is (top level, in a
    blockquote, under a list item), and only top-level headings start a section. Each parent carries
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
        starts = [m.start() for m in LINE.finditer(text) if m.end() > m.start()]
        cuts: list[tuple[int, list[str]]] = [(0, [])]
        path: list[tuple[int, str]] = []
        for heading in markdown.headings(text, self.max_level):
            path = [(lv, t) for lv, t in path if lv < heading.level] + [(heading.level, heading.title)]
            cuts.append((starts[heading.line], [t for _, t in path]))
        out = []
        for (start, headings), (end, _) in zip(cuts, [*cuts[1:], (len(text), [])], strict=True):
            span = stripped(text, start, end)
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
        given = document.metadata.get(self.key) or []
        if not isinstance(given, list | tuple):
            raise _no_section(given, document, self.key)
        out: list[tuple[int, int, dict[str, Any]]] = []
        at = 0
        for start, end, title in sorted((_section(s, document, self.key) for s in given), key=lambda s: s[0]):
            start = max(start, at)  # overlapping sections are clipped: no text in two parents
            if start >= end:
                continue
            gap = stripped(text, at, start)
            if gap:
                out.append((*gap, {TITLE: ""}))
            span = stripped(text, start, end)
            if span:
                out.append((*span, {TITLE: title}))
            at = end
        tail = stripped(text, at, len(text))
        if tail:
            out.append((*tail, {TITLE: ""}))
        return out


def _section(section: object, document: Document, key: str) -> tuple[int, int, Any]:
    """A given section's ``start``, ``end`` and title; an error naming the document where it is none."""
    if not (isinstance(section, dict) and _whole(section.get("start")) and _whole(section.get("end"))):
        raise _no_section(section, document, key)
    start, end, title = int(section["start"]), int(section["end"]), section.get(TITLE, "")
    if not 0 <= start <= end <= len(document.page_content):
        msg = (
            f"Document {document.id!r}: section {title!r} has offsets {start}-{end}, not in order within the "
            f"text ({len(document.page_content)} chars). Fix its offsets."
        )
        raise ValueError(msg)
    return start, end, title


def _no_section(given: object, document: Document, key: str) -> ValueError:
    """The error for what ``metadata[key]`` holds in place of a list of sections, or of one section."""
    return ValueError(
        f"Document {document.id!r}: metadata[{key!r}] holds {given!r:.100}, which is no list of sections. Give "
        "a list of {'title': str, 'start': int, 'end': int}, char offsets into the document's text."
    )


def _whole(value: object) -> bool:
    """Whether ``value`` is a whole number (``5``, or ``5.0`` as JSON may hold it); not a bool, a string or ``1.5``."""
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())


def locate(text: str, chunks: list[str], doc_id: str) -> list[Span]:
    """Char offsets of consecutive chunks of ``text``, found in order.

    Each chunk is looked for first where it can follow the one before: starting after that
    one's start and ending past its end (a splitter's ``chunk_overlap`` repeats the end of one
    chunk at the start of the next, never a whole chunk), so a short chunk (``<img``) is not
    placed where its text also occurs inside the chunk before.
    """
    spans: list[Span] = []
    for chunk in chunks:
        before = spans[-1] if spans else (-1, 0)
        for at in (max(before[0] + 1, before[1] - len(chunk) + 1), before[0] + 1, 0):
            start = text.find(chunk, at)
            if start >= 0:
                break
        if start < 0 or not chunk:
            msg = (
                f"Document {doc_id!r}: the splitter returned a chunk that is not a substring of its "
                "input, so its offsets are unknown. Use a splitter that keeps the text verbatim."
            )
            raise ValueError(msg)
        spans.append((start, start + len(chunk)))
    return spans


def located_parents(splitter: TextSplitter, source: Document) -> list[Document]:
    """Parents from any ``TextSplitter``, with their offsets into the source."""
    texts = splitter.split_text(source.page_content)
    spans = locate(source.page_content, texts, str(source.id))
    return [Document(source.page_content[s:e], metadata={**source.metadata, START: s, END: e}) for s, e in spans]
