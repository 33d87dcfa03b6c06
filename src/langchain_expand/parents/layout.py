"""Parents' storage: children in the vector store, parents in the docstore, the first parent the head.

A document's parents are stored under keys :func:`parent_key` makes from its id, its children
under ids from their parent's; the first parent is the document's head, written last, so it
commits the version (:mod:`langchain_expand.store.commit`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langchain_core.documents import Document
from langchain_core.stores import BaseStore

from langchain_expand.store import commit
from langchain_expand.store.adapters import StoreAdapter
from langchain_expand.store.commit import Prepared, Stored
from langchain_expand.store.lexical import BaseLexicalIndex
from langchain_expand.store.records import same_embedded_text, unit_id, unit_owner
from langchain_expand.text.sentences import Span
from langchain_expand.units import (
    N_CHILDREN,
    N_PARENTS,
    REVISION,
    STORED_END,
    STORED_INDEX,
    STORED_REV,
    STORED_START,
)

__all__ = ["LISTED", "Children", "ParentLayout", "ParentRecords", "parent_key"]


@dataclass(frozen=True)
class Children:
    """One parent's children as offsets; their records are built as they are written."""

    parent_id: str
    text: str
    """The parent's text."""
    base: int
    """Where the parent starts in the source."""
    chunks: list[Span]
    metadata: dict[str, Any]
    """What every child carries besides its position."""
    prefixes: list[str] | None = None
    """What is embedded before each child (``child_prefix``); None: nothing."""

    @property
    def n(self) -> int:
        """The number of children."""
        return len(self.chunks)

    def ids(self) -> Iterator[str]:
        """The children's vector-store ids."""
        return (unit_id(self.parent_id, i) for i in range(self.n))

    def records(self) -> Iterator[tuple[str, Document, str]]:
        """Each child's id, record and the text embedded for it (its prefix and its own text)."""
        for i, (s, e) in enumerate(self.chunks):
            meta = {**self.metadata, STORED_INDEX: i, STORED_START: self.base + s, STORED_END: self.base + e}
            own = self.text[s:e]
            embedded = own if self.prefixes is None else self.prefixes[i] + own
            yield unit_id(self.parent_id, i), Document(own, metadata=meta), embedded


LISTED = "\x00lists held as lists"
"""Added to the fingerprint of metadata whose children hold a list as one (a store of arrays): a document
indexed when every list was JSON text is a new version, and its children are written again as they are."""


class ParentRecords(NamedTuple):
    """One document as it is written: its parents and their children, and what tells an unchanged text."""

    parents: list[tuple[str, Document]]
    """Each parent under its docstore key, the head first."""
    children: list[Children]
    """Each parent's children, in the parents' order."""
    revised: Callable[[str], str]
    """This text's revision with another metadata fingerprint (:meth:`embedded_as`)."""
    added: frozenset[str]
    """The keys a parent carries besides the document's metadata (this class's and its splitter's)."""

    def embedded_as(self, head: Document) -> bool:
        """Whether the stored ``head`` commits this text, split and prefixed as here (:func:`same_embedded_text`).

        Its metadata's fingerprint read either way: lists held as lists (:data:`LISTED`) or not.
        """

        def listed(fingerprint: str) -> str:
            return self.revised(fingerprint + LISTED)

        return any(same_embedded_text(r, head.metadata, self.added, REVISION) for r in (self.revised, listed))


@dataclass
class Found:
    """What is stored for one document: its parents by docstore key, its children by vector id."""

    parents: dict[str, Document] = field(default_factory=dict)
    children: dict[str, Document] = field(default_factory=dict)


_PROBE = 16
"""Parent keys and child ids probed past the committed counts for units an interrupted run left."""


class ParentLayout:
    """Parents' storage: children in the vector store, parents in the docstore.

    A document's first parent is its head: it records the revision and the parent count,
    and each parent records how many children it has, so everything stored for a document
    is found from its head without listing keys.
    """

    def __init__(
        self,
        vectors: StoreAdapter,
        docstore: BaseStore[str, Document],
        head_id: Callable[[str], str],
        batch_size: int,
        add_kwargs: dict[str, Any],
        lexical: BaseLexicalIndex | None = None,
    ) -> None:
        self.vectors = vectors
        self.docstore = docstore
        self.head_id = head_id
        self.batch_size = batch_size
        self.add_kwargs = add_kwargs
        self.lexical = lexical
        self._heads: dict[str, Document] = {}

    def heads(self, doc_ids: list[str]) -> dict[str, Hashable]:
        """Each document's committed revision, read from its head parent (kept for :meth:`stored`)."""
        found = self.docstore.mget([self.head_id(d) for d in doc_ids]) if doc_ids else []
        self._heads = {d: head for d, head in zip(doc_ids, found, strict=True) if head is not None}
        return {d: head.metadata.get(REVISION) for d, head in self._heads.items()}

    def stored(self, doc_ids: list[str], heads: dict[str, Hashable]) -> dict[str, Stored]:
        """Every child and parent key stored for each document, committed or left by an interrupted run."""
        return {
            d: Stored(vector_ids=list(found.children), docstore_keys=list(found.parents))
            for d, found in self._listing(doc_ids).items()
        }

    def _listing(self, doc_ids: list[str]) -> dict[str, Found]:
        """Every parent and child stored for each of ``doc_ids``, keyed by docstore key and vector id.

        Those the heads count, and those an interrupted run left past the counts (probed
        ``_PROBE`` ids past the last one found, for all documents at once).
        """
        keys: list[str] = []
        owner: dict[str, str] = {}  # parent key -> document
        ends: dict[str, int] = {}
        for d in doc_ids:
            committed = int(self._heads[d].metadata.get(N_PARENTS, 1)) if d in self._heads else 0
            keys += [self.head_id(d) if j == 0 else parent_key(d, j) for j in range(committed)]
            owner.update((key, d) for key in keys[len(keys) - committed :])
            ends[d] = max(committed, 1)

        def parents_at(asked: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[str, Document]]:
            named = [parent_key(d, j) for d, j in asked]
            got = self.docstore.mget(named)
            return {at: (key, doc) for at, key, doc in zip(asked, named, got, strict=True) if doc is not None}

        committed_parents = self.docstore.mget(keys) if keys else []
        parents = {k: v for k, v in zip(keys, committed_parents, strict=True) if v is not None}
        # Only a split document has parents past its head; one that is its own parent (no
        # parent_splitter) has none, and "d.p1" may be another document's id.
        split = [d for d in doc_ids if self.head_id(d) == parent_key(d, 0)]
        past = commit.probe_past({d: ends[d] for d in split}, parents_at, _PROBE)
        parents.update(past.values())
        owner.update((key, d) for (d, _), (key, _) in past.items())

        def children_at(asked: list[tuple[str, int]]) -> dict[tuple[str, int], Document]:
            ids = {unit_id(key, i): (key, i) for key, i in asked}
            return {ids[c.id]: c for c in self.vectors.get_by_ids(list(ids)) if c.id in ids}

        counts = {key: int(parent.metadata.get(N_CHILDREN, 0)) for key, parent in parents.items()}
        # Children are written before their parents: a run killed in between leaves children
        # of parents the docstore never got. Each such parent's first child is probed past
        # the last parent found; the rest of its children are probed from there.
        beyond = {d: max([ends[d], *(j + 1 for dd, j in past if dd == d)]) for d in split}

        def first_children_at(asked: list[tuple[str, int]]) -> dict[tuple[str, int], Document]:
            found = children_at([(parent_key(d, j), 0) for d, j in asked])
            return {(d, j): found[(parent_key(d, j), 0)] for d, j in asked if (parent_key(d, j), 0) in found}

        for d, j in commit.probe_past(beyond, first_children_at, _PROBE):
            counts.setdefault(parent_key(d, j), 0)
            owner[parent_key(d, j)] = d
        # A first add killed before its head leaves the head parent's children with no parent
        # to count them: they are probed from the first.
        for d in doc_ids:
            if d not in self._heads:
                counts.setdefault(self.head_id(d), 0)
                owner[self.head_id(d)] = d
        counted = children_at([(key, i) for key, n in counts.items() for i in range(n)])
        left = commit.probe_past(counts, children_at, _PROBE)
        out = {d: Found() for d in doc_ids}
        for key, parent in parents.items():
            out[owner[key]].parents[key] = parent
        for (key, i), child in {**counted, **left}.items():
            out[owner[key]].children[unit_id(key, i)] = child
        return out

    def unsettled(self, doc_ids: list[str], heads: dict[str, Hashable]) -> set[str]:
        """Documents with a parent or child missing, past the head's counts, or of another version.

        Reads the documents' parents from the docstore and their children's metadata; embeds nothing.
        """
        current = [d for d in doc_ids if d in self._heads]
        bad = set()
        for d, found in self._listing(current).items():
            rev = heads.get(d)
            mine, kids = found.parents, found.children
            n = int(self._heads[d].metadata.get(N_PARENTS, 1))
            expected = [self.head_id(d)] + [parent_key(d, j) for j in range(1, n)]
            counted = [
                unit_id(k, i) for k in expected if k in mine for i in range(int(mine[k].metadata.get(N_CHILDREN, 0)))
            ]
            if (
                sorted(mine) != sorted(expected)
                or sorted(kids) != sorted(counted)
                or any(p.metadata.get(REVISION, rev) != rev for p in mine.values())
                or any(c.metadata.get(STORED_REV, rev) != rev for c in kids.values())
            ):
                bad.add(d)
        return bad

    def write_body(self, todo: list[Prepared]) -> None:
        """Every child, then every parent but the heads.

        Children of a document of more than a batch that an interrupted run already stored at
        this revision are not embedded again: a large document resumes where it stopped. Nor
        are those of a document whose metadata alone changed (:meth:`ParentRecords.embedded_as`):
        each is written with its vector at the head's revision (:meth:`StoreAdapter.vectors_at`).
        """
        long = {p.doc_id for p in todo if sum(kids.n for kids in p.payload.children) > self.batch_size}
        unchanged = {
            p.doc_id: head.metadata.get(REVISION)
            for p in todo
            if (head := self._heads.get(p.doc_id)) is not None and p.payload.embedded_as(head)
        }
        children = ((p.doc_id, c) for p in todo for kids in p.payload.children for c in kids.records())
        for batch in commit.batched(children, self.batch_size):
            revisions = {c[0]: c[1].metadata[STORED_REV] for d, c in batch if d in long}
            done = self.vectors.holding(revisions) if revisions else set()
            chunk = [c for _, c in batch if c[0] not in done]
            if not chunk:
                continue
            ids = [i for i, _, _ in chunk]
            kept = self.vectors.vectors_at([i for d, (i, _, _) in batch if d in unchanged and i not in done], unchanged)
            self.vectors.add_documents(
                [c for _, c, _ in chunk], ids=ids, embedded=[t for _, _, t in chunk], vectors=kept, **self.add_kwargs
            )
        if self.lexical is not None:  # BM25's rows before the heads, as every unit
            self.lexical.replace(self.lexical_rows(todo))
        body = [(i, parent) for p in todo for i, parent in p.payload.parents[1:]]
        if body:
            self.docstore.mset(body)

    def lexical_rows(self, todo: list[Prepared]) -> Iterator[tuple[str, str, Iterator[str]]]:
        """Each parent's children as the lexical index ranks them: rows keyed by parent, as child ids are."""
        for p in todo:
            for kids in p.payload.children:
                yield kids.parent_id, str(p.version), (kids.text[s:e] for s, e in kids.chunks)

    def write_heads(self, todo: list[Prepared]) -> None:
        """The heads, last: each commits its document's new version."""
        self.docstore.mset([p.payload.parents[0] for p in todo])

    def remove(self, stale: Iterable[Stored]) -> None:
        """Delete the children and parents ``stale`` names, in batches."""
        units = list(stale)
        children = [i for s in units for i in s.vector_ids]
        parents = [key for s in units for key in s.docstore_keys]
        if children:
            self.vectors.delete(children)
        if self.lexical is not None:  # every parent that has rows has children, or a key in the docstore
            self.lexical.delete(dict.fromkeys([*parents, *map(unit_owner, children)]))
        if parents:
            self.docstore.mdelete(parents)


def parent_key(doc_id: str, index: int) -> str:
    """The docstore key of parent ``index`` of document ``doc_id``.

    Only characters that every LangChain store accepts (``LocalFileStore`` allows
    letters, digits and ``_.-/``) are added to the document id.
    """
    return f"{doc_id}.p{index}"
