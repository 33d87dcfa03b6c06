"""The unit contract: the metadata every returned unit carries, and what is stored per record.

Every ``Document`` this library returns (a window, a merged unit, a trimmed unit, a parent,
a matched sentence or child) is a *unit*: a stretch of one source document with
``page_content == source[start_index:end_index]``. Its metadata is the source document's
own, plus the keys below. They are named here once; every other module uses these names,
never the strings (``tests/test_units.py`` pins that).

Keys of a returned unit:

- every unit: :data:`DOC_ID`, :data:`START`, :data:`END`, :data:`SCORE`, :data:`TOKENS`;
- a window (:class:`WindowMetadata`): :data:`HIT`, :data:`HITS`, :data:`SPAN`,
  :data:`SENTENCES`, :data:`N_SENTENCES`;
- a parent (:class:`ParentMetadata`): :data:`PARENT_ID`, :data:`CHILDREN` (each a
  :class:`ChildRef`), and from structural splitters :data:`TITLE` and :data:`HEADINGS`;
- a matched child (``expand=False`` on the parent retriever): :data:`PARENT_ID`, :data:`CHILD_ID`;
- after the budget: :data:`TRUNCATED`, :data:`BUDGET`; after a reranker: :data:`RERANK_SCORE`.

Keys starting with :data:`PREFIX` are the library's own storage fields (``lcx_doc`` and so
on, below); they never reach a returned unit, and a source document may not use them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, TypedDict

from langchain_core.documents import Document

__all__ = [
    "BUDGET",
    "CHILDREN",
    "CHILD_ID",
    "DOC_ID",
    "END",
    "HEADINGS",
    "HIT",
    "HITS",
    "N_SENTENCES",
    "PARENT_ID",
    "RERANK_SCORE",
    "SCORE",
    "SENTENCES",
    "SPAN",
    "START",
    "TITLE",
    "TOKENS",
    "TRUNCATED",
    "ChildRef",
    "ParentMetadata",
    "WindowMetadata",
    "check_match",
    "check_served_keys",
    "checked_units",
]

# -- every unit ---------------------------------------------------------------------------
DOC_ID: Final = "doc_id"
"""The source document's id."""
START: Final = "start_index"
"""Char offset of the unit's first character in the source text."""
END: Final = "end_index"
"""Char offset just past the unit's last character: ``source[START:END] == page_content``."""
SCORE: Final = "score"
"""Relevance of the unit's best match, higher is better (cosine similarity by default)."""
TOKENS: Final = "tokens"
"""Exact token count of ``page_content`` with the retriever's counter."""

# -- windows ------------------------------------------------------------------------------
HIT: Final = "hit"
"""Index of the best matched sentence in the document."""
HITS: Final = "hits"
"""Every matched sentence inside the unit, best first (several after merging)."""
SPAN: Final = "span"
"""``[first, last + 1)`` in sentence indices."""
SENTENCES: Final = "sentences"
"""``[start, end]`` char offsets of each sentence of the unit, in order."""
N_SENTENCES: Final = "n_sentences"
"""How many sentences the whole document has."""
CROSSED: Final = "crossed"
"""How many Markdown headings a window runs down across (0: it holds one section's text)."""

# -- parents ------------------------------------------------------------------------------
PARENT_ID: Final = "parent_id"
"""The parent's docstore key."""
CHILD_ID: Final = "child_id"
"""A matched child's vector-store id."""
CHILDREN: Final = "children"
"""The parent's matched children, best first, each a :class:`ChildRef`."""
TITLE: Final = "title"
"""A structural parent's heading or section title ("" for untitled text)."""
HEADINGS: Final = "headings"
"""A Markdown parent's heading path, e.g. ``["Setup", "Install"]``."""
SOURCE: Final = "source"
"""Where a document was read from (a file path), as LangChain's loaders and the CLI set it."""
SECTIONS: Final = "sections"
"""Input only: a source document's sections as ``[{"title", "start", "end"}]`` char offsets."""
REF_ID: Final = "id"
"""In a :class:`ChildRef`: the child's id."""
IN_PARENT: Final = "in_parent"
"""In a :class:`ChildRef`: ``[start, end]`` offsets into the parent's text."""

# -- added on the way out -----------------------------------------------------------------
TRUNCATED: Final = "truncated"
"""True when the budget cut the unit down from its edges."""
BUDGET: Final = "budget"
"""What fitting did, as :meth:`BudgetReport.as_dict` (``max_tokens``, ``used``, ...)."""
RERANK_SCORE: Final = "rerank_score"
"""The reranker's score of the unit's match, where one ran."""
RELEVANCE_SCORE: Final = "relevance_score"
"""Where LangChain's document compressors put their score; read as :data:`RERANK_SCORE`."""
CARRIED: Final = (RERANK_SCORE,)
"""Metadata a match may gain between matching and expanding; kept on its unit."""

# -- stored with a parent in the docstore -------------------------------------------------
N_PARENTS: Final = "n_parents"
"""On a document's first parent (its commit marker): how many parents it has."""
N_CHILDREN: Final = "n_children"
"""On every parent: how many children were embedded from it."""
REVISION: Final = "revision"
"""On a document's first parent: the document's revision (see ``records.revision``)."""

# -- stored with each record in the vector store (never returned) -------------------------
PREFIX: Final = "lcx_"
"""Reserved prefix of the library's storage fields."""
STORED_DOC: Final = "lcx_doc"
"""The record's document id."""
STORED_INDEX: Final = "lcx_i"
"""The record's position: sentence index, or child index within its parent."""
STORED_COUNT: Final = "lcx_n"
"""How many sentences the record's document has."""
STORED_START: Final = "lcx_start"
"""Char offset of the record's text in the source."""
STORED_END: Final = "lcx_end"
"""Char offset just past the record's text in the source."""
STORED_GAP: Final = "lcx_gap"
"""The source text between this sentence and the next, so windows are rebuilt exactly."""
STORED_REV: Final = "lcx_rev"
"""The document's revision; the head's is the committed one."""
STORED_JSON: Final = "lcx_json"
"""Comma-joined names of metadata keys stored as JSON text."""
STORED_NONE: Final = "lcx_none"
"""Comma-joined names of metadata keys whose value was ``None``."""


# -- what each retriever sets on the units it serves ------------------------------------
SERVED: Final = frozenset({DOC_ID, START, END, SCORE, TOKENS, TRUNCATED, BUDGET, RERANK_SCORE, RELEVANCE_SCORE})
"""Keys every retriever sets on each unit it returns (the last four after a budget or reranker)."""
SERVED_BY_WINDOWS: Final = SERVED | {HIT, HITS, SPAN, SENTENCES, N_SENTENCES, CROSSED}
"""Keys :class:`~langchain_expand.SentenceWindowRetriever` sets on a window."""
SERVED_BY_PARENTS: Final = SERVED | {PARENT_ID, CHILD_ID, CHILDREN}
"""Keys :class:`~langchain_expand.BudgetedParentDocumentRetriever` sets on a parent or a matched
child; a structural parent splitter adds :data:`TITLE` and :data:`HEADINGS`."""


def check_served_keys(metadata: Mapping[str, Any], doc_id: str, served: frozenset[str], owner: str) -> None:
    """Refuse a source document's metadata key that ``owner`` would overwrite on every unit it serves.

    The unit contract's keys mean one thing on every returned unit (``score`` is the match's
    relevance, ``start_index`` an offset into this document), so a source value under one of
    them would come back replaced without a word. ``doc_id`` equal to the document's own id is
    accepted: it says what the retriever says.

    Raises:
        ValueError: Naming the document, the key and the fix.
    """
    for key in sorted(served & metadata.keys()):
        if key == DOC_ID and str(metadata[key]) == doc_id:
            continue
        msg = (
            f"Document {doc_id!r}: metadata key {key!r} is one {owner} sets on every unit it returns "
            f"(the unit contract, langchain_expand.units), so the document's value "
            f"{metadata[key]!r} would be overwritten. Rename the key, e.g. to 'source_{key}'."
        )
        raise ValueError(msg)


def checked_units(documents: object, owner: str) -> list[Document]:
    """``documents`` as a list of units; anything else refused, naming what was given and the fix.

    A chain that pipes a string, a dict or a single ``Document`` where a retriever's list of
    Documents belongs would otherwise fail deep inside, on a missing attribute.

    Raises:
        TypeError: Naming ``owner`` and the first thing that is not a ``Document``.
    """
    if not isinstance(documents, Sequence) or isinstance(documents, str | bytes):
        raise _not_units(owner, "it was given", documents)
    for i, unit in enumerate(documents):
        if not isinstance(unit, Document):
            raise _not_units(owner, f"item {i} is", unit)
    return list(documents)


def check_match(unit: Document, keys: Sequence[str]) -> None:
    """Refuse a unit given to ``expand_hits`` without the ``keys`` of its retriever's match-only results, naming one.

    Raises:
        ValueError: Naming the unit, the key it lacks and how to get matches (``expand=False``).
    """
    missing = [key for key in keys if key not in unit.metadata]
    if missing:
        msg = (
            f"expand_hits needs the metadata of a match-only result ({', '.join(keys)}); document {unit.id!r} "
            f"lacks {missing[0]!r}. Retrieve it with expand=False."
        )
        raise ValueError(msg)


def _not_units(owner: str, what: str, given: object) -> TypeError:
    return TypeError(
        f"{owner} takes a list of Documents (a retriever's output), but {what} a "
        f"{type(given).__name__}: {given!r:.80}. Give it the list a retriever returns."
    )


class ChildRef(TypedDict):
    """A matched child inside a parent's :data:`CHILDREN`."""

    id: str | None
    start_index: int
    end_index: int
    in_parent: list[int]
    score: float


class WindowMetadata(TypedDict, total=False):
    """The library's keys on a window (the source document's own keys come along too)."""

    doc_id: str
    hit: int
    hits: list[int]
    span: list[int]
    start_index: int
    end_index: int
    score: float
    tokens: int
    n_sentences: int
    sentences: list[list[int]]
    truncated: bool
    budget: dict[str, int]
    rerank_score: float


class ParentMetadata(TypedDict, total=False):
    """The library's keys on a parent (the source document's own keys come along too)."""

    doc_id: str
    parent_id: str
    start_index: int
    end_index: int
    score: float
    tokens: int
    children: list[ChildRef]
    title: str
    headings: list[str]
    truncated: bool
    budget: dict[str, int]
    rerank_score: float


def located(metadata: Mapping[str, Any]) -> bool:
    """Whether the metadata places its unit in a source: a document id and char offsets."""
    return (
        isinstance(metadata.get(DOC_ID), str)
        and isinstance(metadata.get(START), int)
        and isinstance(metadata.get(END), int)
    )


def is_window(metadata: Mapping[str, Any]) -> bool:
    """Whether a unit can be trimmed by sentences: it knows its sentences and its hit."""
    return bool(metadata.get(SENTENCES)) and HIT in metadata and SPAN in metadata
