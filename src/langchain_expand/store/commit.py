"""The indexing protocol both retrievers write under: every interruption is repaired by a re-run.

:func:`index` writes a document in an order that makes every interruption safe: whatever is
stored for it now is listed first, then its new units are written, the old ones that no new
unit replaces are removed, and its *head* (the unit a reader checks to know which version is
committed) is written last. A reader never serves a unit whose version differs from its
document's head, and the next :func:`index` of a document whose head does not match rewrites
it whole. Each retriever supplies a :class:`Layout`: where its units live and how its head reads.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

__all__ = ["Indexed", "Layout", "Prepared", "Stored", "batched", "checked_ids", "delete", "index", "probe_past"]

T = TypeVar("T")


@dataclass
class Prepared:
    """One document, validated and split, ready to write; nothing of it is stored yet.

    A layout may keep its records lazily (offsets, not texts and metadata) and build them
    batch by batch as it writes, so a very large document is never held as records whole.
    """

    doc_id: str
    version: Hashable
    """What the head of a committed copy of this document would read as."""
    vector_ids: Collection[str] = field(default_factory=set)
    """Every vector-store id the new version writes (any collection that answers ``in``)."""
    docstore_keys: Collection[str] = field(default_factory=set)
    """Every docstore key the new version writes."""
    payload: Any = None
    """The layout's own records."""


@dataclass
class Stored:
    """What is stored for one document now: vector-store ids and docstore keys."""

    vector_ids: Collection[str] = field(default_factory=list)
    docstore_keys: Collection[str] = field(default_factory=list)


class Layout(Protocol):
    """Where a retriever keeps a document's units, and which of them is the head."""

    def heads(self, doc_ids: list[str]) -> dict[str, Hashable]:
        """The committed version of each stored document (absent: none committed)."""
        ...

    def stored(self, doc_ids: list[str], heads: dict[str, Hashable]) -> dict[str, Stored]:
        """Every id and key stored for each of ``doc_ids``, committed or left by an interrupted run."""
        ...

    def unsettled(self, doc_ids: list[str], heads: dict[str, Hashable]) -> set[str]:
        """Of documents whose head reads as current, those whose other units do not all match it.

        That is an update interrupted after its body was written, or two writers of one id.
        """
        ...

    def write_body(self, todo: list[Prepared]) -> None:
        """Write everything of ``todo`` except each document's head."""
        ...

    def write_heads(self, todo: list[Prepared]) -> None:
        """Write each document's head: this commits it."""
        ...

    def remove(self, stale: Iterable[Stored]) -> None:
        """Delete these ids and keys."""
        ...


K = TypeVar("K")
V = TypeVar("V")


def probe_past(
    ends: dict[K, int], lookup: Callable[[list[tuple[K, int]]], dict[tuple[K, int], V]], step: int
) -> dict[tuple[K, int], V]:
    """What is stored past each owner's end: units an interrupted run left behind.

    ``lookup`` fetches ``(owner, index)`` positions and returns those that exist. Positions
    are asked ``step`` at a time past each end, for all owners in one call, as long as an
    owner's last step found something.
    """
    found: dict[tuple[K, int], V] = {}
    frontier = dict(ends)
    while frontier:
        asked = [(owner, i) for owner, at in frontier.items() for i in range(at, at + step)]
        hits = lookup(asked)
        found.update(hits)
        again = {owner for owner, _ in hits}
        frontier = {owner: at + step for owner, at in frontier.items() if owner in again}
    return found


@dataclass(frozen=True)
class Indexed:
    """What one indexing call did, document by document."""

    ids: list[str]
    """Every document id given, in input order."""
    written: list[str]
    """Those embedded and written: new, changed, or repaired after an interrupted run."""

    @property
    def unchanged(self) -> list[str]:
        """Those already stored as given: nothing embedded, nothing written."""
        done = set(self.written)
        return [i for i in self.ids if i not in done]


def index(layout: Layout, prepared: list[Prepared]) -> Indexed:
    """Store ``prepared`` so that an interruption at any point is repaired by a re-run.

    Documents whose head already reads as their version, and whose other units all match it,
    are skipped (nothing re-embedded). One whose units do not (an update interrupted after
    its body was written, then the committed version added again; or two writers of one id)
    is written again whole.
    """
    heads = layout.heads([p.doc_id for p in prepared])
    current = [p.doc_id for p in prepared if heads.get(p.doc_id) == p.version]
    unsettled = layout.unsettled(current, heads) if current else set()
    todo = [p for p in prepared if heads.get(p.doc_id) != p.version or p.doc_id in unsettled]
    done = Indexed([p.doc_id for p in prepared], [p.doc_id for p in todo])
    if not todo:
        return done
    old = layout.stored([p.doc_id for p in todo], heads)
    layout.write_body(todo)
    layout.remove(_outdated(old.get(p.doc_id), p) for p in todo)
    layout.write_heads(todo)
    return done


def _outdated(old: Stored | None, new: Prepared) -> Stored:
    """What is stored for a document that its new version does not write again."""
    if old is None:
        return Stored()
    return Stored(
        [i for i in old.vector_ids if i not in new.vector_ids],
        [key for key in old.docstore_keys if key not in new.docstore_keys],
    )


def delete(layout: Layout, doc_ids: Sequence[str]) -> list[str]:
    """Remove everything stored for ``doc_ids``; unknown ids are ignored. Those that had anything stored."""
    ids = checked_ids(doc_ids)
    stored = layout.stored(ids, layout.heads(ids))
    layout.remove(stored.values())
    return [d for d in dict.fromkeys(ids) if d in stored and (stored[d].vector_ids or stored[d].docstore_keys)]


def checked_ids(doc_ids: object) -> list[str]:
    """``delete``'s ids as a list of str, or an error that says what it takes."""
    if isinstance(doc_ids, str) or not isinstance(doc_ids, Iterable):
        shown = f"the str {doc_ids!r}: pass [{doc_ids!r}]" if isinstance(doc_ids, str) else repr(doc_ids)
        msg = f"delete takes a list of document ids, got {shown}."
        raise TypeError(msg)
    ids = list(doc_ids)
    strays = [i for i in ids if not isinstance(i, str)]
    if strays:
        msg = f"delete takes document ids as str; got {type(strays[0]).__name__} {strays[0]!r}."
        raise TypeError(msg)
    return ids


def batched(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of at most ``size``, taken one list at a time (a generator stays lazy)."""
    it = iter(items)
    while chunk := list(itertools.islice(it, size)):
        yield chunk
