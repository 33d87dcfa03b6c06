"""Parent-document retrieval that counts parents, keeps scores and stays inside a budget.

A parent's size comes from the document's structure, a long-tailed distribution you
inherit: two large sections in one result clear any budget without either being unusual.
``BudgetedParentDocumentRetriever`` swaps in for LangChain's ``ParentDocumentRetriever``
and fixes what it lacks: ``k`` counts parents, not children; each parent keeps its score
and its matched children (ids and char offsets); ``max_parent_tokens`` and ``max_tokens``
bound what it returns; and its default docstore survives a restart.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_classic.retrievers import ParentDocumentRetriever
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.stores import BaseStore
from langchain_text_splitters import RecursiveCharacterTextSplitter, TextSplitter
from pydantic import Field, model_validator

from langchain_expand.budget import check_max_tokens, fit_to_budget, trim
from langchain_expand.docstore import SQLDocStore
from langchain_expand.records import PREFIX, decode_metadata, document_ids, encode_metadata, revision, unit_id
from langchain_expand.sentences import SentenceSplitter, Span
from langchain_expand.spans import grow, largest_fitting
from langchain_expand.tokens import TokenCounter
from langchain_expand.windows import check_query

__all__ = ["BudgetedParentDocumentRetriever", "MarkdownSectionSplitter", "SectionSplitter"]

logger = logging.getLogger(__name__)

_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class _StructureSplitter(TextSplitter):
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
                meta = {k: v for k, v in doc.metadata.items() if k != "sections"}
                meta.update(extra, start_index=start, end_index=end)
                out.append(Document(doc.page_content[start:end], metadata=meta))
        return out


def _trimmed(text: str, start: int, end: int) -> tuple[int, int] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if start < end else None


class MarkdownSectionSplitter(_StructureSplitter):
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
                out.append((*span, {"headings": headings, "title": headings[-1] if headings else ""}))
        return out


class SectionSplitter(_StructureSplitter):
    """Parents from sections given as char offsets in the document's metadata.

    ``metadata[key]`` holds ``[{"title": str, "start": int, "end": int}, ...]``, as in
    the shared corpora. Text that no section covers becomes an untitled parent, so
    nothing is lost; a section that overlaps the one before it is clipped to start where
    that one ends (real annotations overlap), so no text is in two parents.
    """

    def __init__(self, key: str = "sections", *, fallback: _StructureSplitter | None = None) -> None:
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
                    f"Document {document.id!r}: section {section.get('title')!r} has offsets "
                    f"{start}-{end}, outside the text ({len(text)} chars). Fix its offsets."
                )
                raise ValueError(msg)
            start = max(start, at)  # overlapping sections are clipped: no text in two parents
            if start >= end:
                continue
            gap = _trimmed(text, at, start)
            if gap:
                out.append((*gap, {"title": ""}))
            span = _trimmed(text, start, end)
            if span:
                out.append((*span, {"title": section.get("title", "")}))
            at = end
        tail = _trimmed(text, at, len(text))
        if tail:
            out.append((*tail, {"title": ""}))
        return out


@dataclass
class _Parent:
    parent_id: str
    children: list[tuple[Document, float]]
    score: float


def _default_child_splitter() -> TextSplitter:
    return RecursiveCharacterTextSplitter(chunk_size=400, chunk_overlap=0)


class BudgetedParentDocumentRetriever(ParentDocumentRetriever):
    """``ParentDocumentRetriever`` where ``k`` counts parents, scores stay, and size is bounded.

    Children are over-fetched until ``k`` distinct parents are found (or the store runs
    out); parents are ranked by their children's scores (``max``, ``mean`` or ``sum``).
    Each returned parent carries ``parent_id``, ``doc_id`` (the source document),
    ``score``, ``children`` (matched children, best first: ``id``, ``score``,
    ``start_index``/``end_index`` in the source and ``in_parent`` offsets into the
    stored parent), ``start_index``/``end_index`` in the source, and ``tokens``.

    ``max_parent_tokens`` turns a parent over the cap into a span of it around its
    matched children (whole sentences, tables and code blocks); ``max_tokens`` bounds the
    joined context as ``FitToBudget`` does. Both are off by default; ``k``, ``filter`` and
    ``max_tokens`` also change per call: ``invoke(query, k=4, max_tokens=8000)``.

    The default docstore is a :class:`SQLDocStore` (a SQLite file), so a restart loses
    nothing. Ids are deterministic: the ids passed to ``add_documents`` name the
    *source* documents (else ``Document.id``, else a content hash); with a
    ``parent_splitter``, parent ``j`` of document ``d`` is ``"d.p{j}"``, without one the
    parent id is the document id. Re-adding an id replaces its parents and children.

    Example:
        .. code-block:: python

            from langchain_expand import BudgetedParentDocumentRetriever, MarkdownSectionSplitter, chroma_store

            retriever = BudgetedParentDocumentRetriever(
                vectorstore=chroma_store("children", persist_directory=".langchain-expand/chroma"),
                parent_splitter=MarkdownSectionSplitter(max_level=2),
                k=4,
                max_parent_tokens=1500,
                max_tokens=4000,
            )
            retriever.add_documents(docs)
            retriever.invoke("how do I reset the remote?")
    """

    docstore: BaseStore[str, Document] = Field(default=None)  # type: ignore[arg-type]
    """Where parents live; a SQLite-backed ``SQLDocStore`` by default."""
    child_splitter: TextSplitter = Field(default_factory=_default_child_splitter)
    """Splits each parent into the children that get embedded."""
    k: int = 4
    """The number of distinct parents returned."""
    aggregate: Literal["max", "mean", "sum"] = "max"
    """How a parent's score comes from its matched children's scores."""
    score_threshold: float | None = None
    """Ignore children whose relevance is below this."""
    max_parent_tokens: int | None = None
    """Cap on each returned parent; a parent over it becomes a span around its children."""
    max_tokens: int | None = None
    """Cap on the joined context of all returned parents (``"\\n\\n"`` between them)."""
    token_counter: Callable[[str], int] = Field(default_factory=TokenCounter)
    """Counts tokens for ``tokens`` and both budgets."""
    batch_size: int = 4096
    """Children embedded and written per call to the vector store."""

    @model_validator(mode="before")
    @classmethod
    def _default_docstore(cls, values: dict[str, Any]) -> Any:
        if isinstance(values, dict) and values.get("docstore") is None and values.get("byte_store") is None:
            values["docstore"] = SQLDocStore()
        return values

    @model_validator(mode="after")
    def _validate(self) -> BudgetedParentDocumentRetriever:
        if self.k < 1:
            msg = f"`k` must be a positive integer, got {self.k}."
            raise ValueError(msg)
        if self.search_type != "similarity":
            msg = (
                f"`search_type` {self.search_type!r} is not supported: parents are ranked by their "
                "children's relevance scores. Use the default similarity search."
            )
            raise ValueError(msg)
        for name in ("max_parent_tokens", "max_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                msg = f"`{name}` must be >= 1 or None, got {value}."
                raise ValueError(msg)
        return self

    # -- indexing ---------------------------------------------------------------------

    def add_documents(  # type: ignore[override]
        self, documents: Sequence[Document], ids: Sequence[str] | None = None, **kwargs: Any
    ) -> list[str]:
        """Split into parents and children, store them, replace earlier versions.

        Args:
            documents: Source documents.
            ids: One id per source document; else ``Document.id``; else a content hash.
            **kwargs: Passed on to the vector store's ``add_documents``.

        Returns:
            The source document ids.

        Raises:
            ValueError: For an empty document, duplicate ids or unusable metadata;
                nothing is written then.
        """
        doc_ids, parents, children = self._prepare(documents, ids)
        heads = self.docstore.mget([self._head_id(d) for d in doc_ids]) if doc_ids else []
        parents, children, changed = _changed(doc_ids, heads, parents, children)
        stale_children, stale_parents = self._stale(changed, {pid for pid, _ in parents})
        for at in range(0, len(children), self.batch_size):
            batch = children[at : at + self.batch_size]
            self.vectorstore.add_documents([c for _, c in batch], ids=[i for i, _ in batch], **kwargs)
        for group in _heads_last(parents):
            self.docstore.mset(group)
        new_children = {i for i, _ in children}
        gone = [i for i in stale_children if i not in new_children]
        if gone:
            self.vectorstore.delete(gone)
        if stale_parents:
            self.docstore.mdelete(stale_parents)
        return doc_ids

    async def aadd_documents(  # type: ignore[override]
        self, documents: Sequence[Document], ids: Sequence[str] | None = None, **kwargs: Any
    ) -> list[str]:
        """Async twin of :meth:`add_documents`."""
        doc_ids, parents, children = self._prepare(documents, ids)
        heads = await self.docstore.amget([self._head_id(d) for d in doc_ids]) if doc_ids else []
        parents, children, changed = _changed(doc_ids, heads, parents, children)
        stale_children, stale_parents = await self._astale(changed, {pid for pid, _ in parents})
        for at in range(0, len(children), self.batch_size):
            batch = children[at : at + self.batch_size]
            await self.vectorstore.aadd_documents([c for _, c in batch], ids=[i for i, _ in batch], **kwargs)
        for group in _heads_last(parents):
            await self.docstore.amset(group)
        new_children = {i for i, _ in children}
        gone = [i for i in stale_children if i not in new_children]
        if gone:
            await self.vectorstore.adelete(gone)
        if stale_parents:
            await self.docstore.amdelete(stale_parents)
        return doc_ids

    def delete(self, ids: Sequence[str]) -> None:
        """Remove the source documents ``ids``: their parents and all their children."""
        stale_children, stale_parents = self._stale(list(ids), set())
        if stale_children:
            self.vectorstore.delete(stale_children)
        if stale_parents:
            self.docstore.mdelete(stale_parents)

    async def adelete(self, ids: Sequence[str]) -> None:
        """Async twin of :meth:`delete`."""
        stale_children, stale_parents = await self._astale(list(ids), set())
        if stale_children:
            await self.vectorstore.adelete(stale_children)
        if stale_parents:
            await self.docstore.amdelete(stale_parents)

    def _head_id(self, doc_id: str) -> str:
        """The first parent of a document, whose metadata counts its parents (``n_parents``)."""
        return doc_id if self.parent_splitter is None else parent_key(doc_id, 0)

    def _parent_keys(self, doc_ids: list[str], heads: Sequence[Document | None]) -> list[str]:
        """Every parent stored for ``doc_ids``, read off their heads (no key listing needed)."""
        if self.parent_splitter is None:
            return [d for d, head in zip(doc_ids, heads, strict=True) if head is not None]
        return [
            parent_key(d, j)
            for d, head in zip(doc_ids, heads, strict=True)
            if head is not None
            for j in range(int(head.metadata.get("n_parents", 1)))
        ]

    def _stale(self, doc_ids: list[str], keep: set[str]) -> tuple[list[str], list[str]]:
        """Children and parents stored for ``doc_ids`` now (those in ``keep`` are overwritten)."""
        heads = self.docstore.mget([self._head_id(d) for d in doc_ids]) if doc_ids else []
        keys = self._parent_keys(doc_ids, heads)
        stored = self.docstore.mget(keys) if keys else []
        return _stale_ids(keys, stored, keep)

    async def _astale(self, doc_ids: list[str], keep: set[str]) -> tuple[list[str], list[str]]:
        heads = await self.docstore.amget([self._head_id(d) for d in doc_ids]) if doc_ids else []
        keys = self._parent_keys(doc_ids, heads)
        stored = await self.docstore.amget(keys) if keys else []
        return _stale_ids(keys, stored, keep)

    def _prepare(
        self, documents: Sequence[Document], ids: Sequence[str] | None
    ) -> tuple[list[str], list[tuple[str, Document]], list[tuple[str, Document]]]:
        doc_ids = document_ids(documents, ids)
        parents: list[tuple[str, Document]] = []
        children: list[tuple[str, Document]] = []
        for doc, doc_id in zip(documents, doc_ids, strict=True):
            if not isinstance(doc.page_content, str) or not doc.page_content.strip():
                msg = f"Document {doc_id!r} has no text to index (empty or whitespace only). Remove it or give it text."
                raise ValueError(msg)
            doc_parents = self._parents_of(doc, doc_id)
            for j, parent in enumerate(doc_parents):
                parent_id = doc_id if self.parent_splitter is None else parent_key(doc_id, j)
                kids = self._children_of(parent, parent_id, doc_id)
                parent.metadata["n_children"] = len(kids)
                if j == 0:
                    parent.metadata["n_parents"] = len(doc_parents)
                    parent.metadata["revision"] = revision(doc.page_content, self.parent_splitter, self.child_splitter)
                parent.id = parent_id
                parents.append((parent_id, parent))
                children.extend(kids)
        return doc_ids, parents, children

    def _parents_of(self, doc: Document, doc_id: str) -> list[Document]:
        source = Document(doc.page_content, metadata=doc.metadata, id=doc_id)
        if self.parent_splitter is None:
            parents = [Document(doc.page_content, metadata={**doc.metadata})]
            parents[0].metadata.update(start_index=0, end_index=len(doc.page_content))
        elif isinstance(self.parent_splitter, _StructureSplitter):
            parents = self.parent_splitter.split_documents([source])
        else:
            parents = _located(self.parent_splitter, source)
        for parent in parents:
            parent.metadata["doc_id"] = doc_id
        return parents

    def _children_of(self, parent: Document, parent_id: str, doc_id: str) -> list[tuple[str, Document]]:
        chunks = _locate(parent.page_content, self.child_splitter.split_text(parent.page_content), doc_id)
        base = int(parent.metadata["start_index"])
        kept = parent.metadata
        if self.child_metadata_fields is not None:
            kept = {k: v for k, v in kept.items() if k in self.child_metadata_fields}
        shared = encode_metadata({k: v for k, v in kept.items() if k not in ("doc_id", self.id_key)}, doc_id)
        out = []
        for i, (s, e) in enumerate(chunks):
            meta = {
                **shared,
                self.id_key: parent_id,
                PREFIX + "doc": doc_id,
                PREFIX + "i": i,
                PREFIX + "start": base + s,
                PREFIX + "end": base + e,
            }
            out.append((unit_id(parent_id, i), Document(parent.page_content[s:e], metadata=meta)))
        return out

    # -- querying ---------------------------------------------------------------------

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        expand: bool = True,
        filter: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> list[Document]:
        check_query(query)
        check_max_tokens(max_tokens)
        k = self._k(k)
        fetch_k = max(k, self.search_kwargs.get("k", 4))
        while True:
            scored = self.vectorstore.similarity_search_with_relevance_scores(query, k=fetch_k, **self._search(filter))
            ranked = self._rank(scored)
            stored = self.docstore.mget([p.parent_id for p in ranked]) if expand else []
            if self._enough(ranked, stored, k, expand, len(scored), fetch_k):
                break
            fetch_k *= 2
        if not expand:
            return [_child_out(c, s, self.id_key) for p in ranked[:k] for c, s in p.children[:1]]
        return self._expand(ranked, k, stored, max_tokens)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        expand: bool = True,
        filter: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> list[Document]:
        check_query(query)
        check_max_tokens(max_tokens)
        k = self._k(k)
        fetch_k = max(k, self.search_kwargs.get("k", 4))
        while True:
            scored = await self.vectorstore.asimilarity_search_with_relevance_scores(
                query, k=fetch_k, **self._search(filter)
            )
            ranked = self._rank(scored)
            stored = await self.docstore.amget([p.parent_id for p in ranked]) if expand else []
            if self._enough(ranked, stored, k, expand, len(scored), fetch_k):
                break
            fetch_k *= 2
        if not expand:
            return [_child_out(c, s, self.id_key) for p in ranked[:k] for c, s in p.children[:1]]
        return self._expand(ranked, k, stored, max_tokens)

    def expand_hits(self, hits: Sequence[Document]) -> list[Document]:
        """Parents of matched children (``expand=False`` results), in the given order."""
        ranked = self._rank_hits(hits)
        return self._expand(ranked, len(ranked), self.docstore.mget([p.parent_id for p in ranked]))

    async def aexpand_hits(self, hits: Sequence[Document]) -> list[Document]:
        """Async twin of :meth:`expand_hits`."""
        ranked = self._rank_hits(hits)
        return self._expand(ranked, len(ranked), await self.docstore.amget([p.parent_id for p in ranked]))

    def _k(self, k: int | None) -> int:
        k = self.k if k is None else k
        if not isinstance(k, int) or k < 1:
            msg = f"`k` must be a positive integer, got {k!r}."
            raise ValueError(msg)
        return k

    def _enough(
        self, ranked: list[_Parent], stored: Sequence[Document | None], k: int, expand: bool, found: int, asked: int
    ) -> bool:
        """``k`` parents found (present in the docstore, when expanding), or no more to find."""
        have = sum(doc is not None for doc in stored) if expand else len(ranked)
        return have >= k or found < asked or asked >= 64 * k

    def _search(self, metadata_filter: dict[str, Any] | None) -> dict[str, Any]:
        """``search_kwargs`` less what this class handles itself, plus a per-call filter."""
        kwargs = {key: v for key, v in self.search_kwargs.items() if key not in ("k", "score_threshold")}
        if metadata_filter is not None:
            kwargs["filter"] = metadata_filter
        return kwargs

    def _rank(self, scored: list[tuple[Document, float]]) -> list[_Parent]:
        """Group children by parent, score parents, best first."""
        threshold = self.score_threshold
        groups: dict[str, list[tuple[Document, float]]] = {}
        for child, score in scored:
            if threshold is not None and score < threshold:
                continue
            parent_id = child.metadata.get(self.id_key)
            if parent_id is not None:
                groups.setdefault(str(parent_id), []).append((child, score))
        parents = [_Parent(pid, kids, _aggregate(self.aggregate, [s for _, s in kids])) for pid, kids in groups.items()]
        return sorted(parents, key=lambda p: -p.score)

    def _rank_hits(self, hits: Sequence[Document]) -> list[_Parent]:
        groups: dict[str, _Parent] = {}
        for hit in hits:
            parent_id = str(hit.metadata["parent_id"])
            child = Document(hit.page_content, metadata=hit.metadata, id=hit.metadata.get("child_id"))
            if parent_id in groups:
                groups[parent_id].children.append((child, float(hit.metadata["score"])))
            else:
                groups[parent_id] = _Parent(
                    parent_id, [(child, float(hit.metadata["score"]))], float(hit.metadata["score"])
                )
        return list(groups.values())

    def _expand(
        self, ranked: list[_Parent], k: int, stored: Sequence[Document | None], max_tokens: int | None = None
    ) -> list[Document]:
        out: list[Document] = []
        for parent, doc in zip(ranked, stored, strict=True):
            if len(out) == k:
                break
            if doc is None:
                logger.warning(
                    "Skipping parent %r: its children are in the vector store but it is not in the "
                    "docstore (an interrupted add_documents, or stores out of sync). Re-add its document.",
                    parent.parent_id,
                )
                continue
            out.append(self._parent_out(parent, doc))
        if self.max_parent_tokens is not None:
            out = [self._cap(doc) for doc in out]
        limit = self.max_tokens if max_tokens is None else max_tokens
        if limit is not None:
            out, _ = fit_to_budget(out, limit, token_counter=self.token_counter)
        return out

    def _parent_out(self, parent: _Parent, doc: Document) -> Document:
        base = int(doc.metadata.get("start_index", 0))
        children = []
        for child, score in sorted(parent.children, key=lambda cs: -cs[1]):
            m = child.metadata
            start = int(m.get(PREFIX + "start", m.get("start_index", base)))
            end = int(m.get(PREFIX + "end", m.get("end_index", base)))
            children.append(
                {
                    "id": child.id,
                    "start_index": start,
                    "end_index": end,
                    "in_parent": [start - base, end - base],
                    "score": score,
                }
            )
        best = parent.children[0][0].metadata
        extra = {key: best[key] for key in ("rerank_score",) if key in best}
        metadata = {**doc.metadata, **extra, "parent_id": parent.parent_id, "score": parent.score, "children": children}
        metadata["tokens"] = self.token_counter(doc.page_content)
        return Document(doc.page_content, metadata=metadata, id=parent.parent_id)

    def _cap(self, doc: Document) -> Document:
        """A parent over ``max_parent_tokens`` becomes the largest span around its children that fits."""
        cap = self.max_parent_tokens
        assert cap is not None
        if doc.metadata["tokens"] <= cap or not doc.metadata.get("children"):
            return doc
        base = int(doc.metadata["start_index"])
        best = doc.metadata["children"][0]
        focus = (int(best["start_index"]), int(best["end_index"]))

        def fits(units: list[Span], r: tuple[int, int]) -> bool:
            return self.token_counter(doc.page_content[units[r[0]][0] - base : units[r[1] - 1][1] - base]) <= cap

        # Whole tables and code blocks first; if not even the child's own units fit,
        # finer units (table rows, code lines) from a splitter capped at ``cap``.
        for unit_cap, seed in ((None, focus), (cap, (focus[0], focus[0] + 1))):
            splitter = SentenceSplitter(max_tokens=unit_cap, token_counter=self.token_counter)
            units: list[Span] = [(base + s, base + e) for s, e in splitter(doc.page_content)]
            ranges = grow(units, seed)
            fit = largest_fitting(ranges, lambda r, units=units: fits(units, r))  # type: ignore[misc]
            if fit is not None:
                return trim(doc, units, ranges[fit], self.token_counter)
        return trim(doc, units, ranges[0], self.token_counter)


def parent_key(doc_id: str, index: int) -> str:
    """The docstore key of parent ``index`` of document ``doc_id``.

    Only characters that every LangChain store accepts (``LocalFileStore`` allows
    letters, digits and ``_.-/``) are added to the document id.
    """
    return f"{doc_id}.p{index}"


def _aggregate(how: str, scores: list[float]) -> float:
    if how == "mean":
        return sum(scores) / len(scores)
    if how == "sum":
        return sum(scores)
    return max(scores)


def _child_out(child: Document, score: float, id_key: str) -> Document:
    """A matched child as a match-only result, in source coordinates."""
    m = child.metadata
    metadata = {
        **{k: v for k, v in decode_metadata(m).items() if k != id_key},
        "doc_id": m.get(PREFIX + "doc"),
        "parent_id": m.get(id_key),
        "child_id": child.id,
        "start_index": m.get(PREFIX + "start"),
        "end_index": m.get(PREFIX + "end"),
        "score": score,
    }
    return Document(child.page_content, metadata=metadata, id=child.id)


def _changed(
    doc_ids: list[str],
    heads: Sequence[Document | None],
    parents: list[tuple[str, Document]],
    children: list[tuple[str, Document]],
) -> tuple[list[tuple[str, Document]], list[tuple[str, Document]], list[str]]:
    """Drop documents whose stored head has the same revision: nothing to re-embed."""
    revisions = {p.metadata["doc_id"]: p.metadata["revision"] for _, p in parents if "revision" in p.metadata}
    same = {
        d
        for d, head in zip(doc_ids, heads, strict=True)
        if head is not None and head.metadata.get("revision") == revisions[d]
    }
    return (
        [(i, p) for i, p in parents if p.metadata["doc_id"] not in same],
        [(i, c) for i, c in children if c.metadata[PREFIX + "doc"] not in same],
        [d for d in doc_ids if d not in same],
    )


def _heads_last(parents: list[tuple[str, Document]]) -> list[list[tuple[str, Document]]]:
    """Write each document's first parent last: it is the commit marker a re-run checks."""
    body = [(i, p) for i, p in parents if "n_parents" not in p.metadata]
    heads = [(i, p) for i, p in parents if "n_parents" in p.metadata]
    return [group for group in (body, heads) if group]


def _stale_ids(keys: list[str], stored: Sequence[Document | None], keep: set[str]) -> tuple[list[str], list[str]]:
    children, parents = [], []
    for key, doc in zip(keys, stored, strict=True):
        if doc is None:
            continue
        children += [unit_id(key, i) for i in range(int(doc.metadata.get("n_children", 0)))]
        if key not in keep:
            parents.append(key)
    return children, parents


def _locate(text: str, chunks: list[str], doc_id: str) -> list[Span]:
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


def _located(splitter: TextSplitter, source: Document) -> list[Document]:
    """Parents from any ``TextSplitter``, with their offsets into the source."""
    texts = splitter.split_text(source.page_content)
    spans = _locate(source.page_content, texts, str(source.id))
    return [
        Document(source.page_content[s:e], metadata={**source.metadata, "start_index": s, "end_index": e})
        for s, e in spans
    ]
