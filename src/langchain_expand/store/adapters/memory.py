"""LangChain's ``InMemoryVectorStore``: records and vectors read from its dict, vectors written to it."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document

from langchain_expand.store import filters
from langchain_expand.store.adapters.base import Scored, StoreAdapter, Vector, as_served, clamped

__all__ = ["MemoryAdapter"]


class MemoryAdapter(StoreAdapter):
    """An ``InMemoryVectorStore``: its ``store`` dict maps id -> {"id", "text", "metadata", "vector"}.

    The store filters with a function of a Document; a dict in Chroma's syntax is evaluated as
    Chroma would (:mod:`~langchain_expand.store.filters`), so a filter written for Chroma works here.
    """

    holds_lists = True  # it keeps the Python list it is given

    def _relevance_rule(self) -> Callable[[float], float]:
        return clamped(float)  # the cosine

    @property
    def _held(self) -> dict[str, Any]:
        return self.store.store  # type: ignore[attr-defined,no-any-return]

    def takes_vectors(self) -> bool:
        """The in-memory store keeps the vector it is given."""
        return True

    def _write_vectors(self, ids: list[str], docs: list[Document], vectors: Sequence[Vector]) -> None:
        for id_, doc, vector in zip(ids, docs, vectors, strict=True):
            self._held[id_] = {"id": id_, "vector": vector, "text": doc.page_content, "metadata": dict(doc.metadata)}

    def search(self, query: str, vector: list[float] | None, k: int, **kwargs: Any) -> Scored:
        """As the base searches; a ``filter`` is a function of a Document, as the store takes it, or Chroma's dict."""
        where = kwargs.get("filter")
        if isinstance(where, dict):
            passes = _passing(where)
            kwargs = {**kwargs, "filter": lambda doc: passes(doc.metadata)}
        elif where is not None and not callable(where):
            msg = (
                f"InMemoryVectorStore filters with a function of a Document or a dict in Chroma's syntax, not a "
                f"{type(where).__name__}: e.g. filter={{'source': 'a.md'}}."
            )
            raise ValueError(msg)
        return super().search(query, vector, k, **kwargs)

    def where(self, where: dict[str, Any], *, vectors: bool = True) -> list[tuple[Document, Vector | None]] | None:
        """The records whose metadata passes ``where`` (Chroma's syntax), with vectors unless ``vectors`` is False."""
        passes = _passing(where)
        return [
            (Document(r["text"], metadata=dict(r["metadata"]), id=r["id"]), list(r["vector"]) if vectors else None)
            for r in list(self._held.values())
            if passes(r["metadata"])
        ]

    def unit_filter(self, where: Any) -> Any:
        """A function of a Document, given the record as its unit serves it (``doc_id`` and all); a dict as the base."""
        if not callable(where):
            return super().unit_filter(where)
        return lambda doc: where(Document(doc.page_content, metadata=as_served(doc.metadata), id=doc.id))

    def pages(self, size: int) -> Iterator[list[Document]] | None:
        """Every record, ``size`` at a time, without vectors."""
        rows = list(self._held.values())
        return (
            [Document(r["text"], metadata=dict(r["metadata"]), id=r["id"]) for r in rows[at : at + size]]
            for at in range(0, len(rows), size)
        )

    def count(self) -> int | None:
        """How many records the store holds."""
        return len(self._held)

    def with_vectors(self, ids: Sequence[str]) -> list[tuple[Document, Vector]]:
        """The records with their stored vectors."""
        found = [self._held[i] for i in ids if i in self._held]
        return [(Document(r["text"], metadata=dict(r["metadata"]), id=r["id"]), list(r["vector"])) for r in found]

    def vectors(self, ids: Sequence[str]) -> dict[str, Vector]:
        """The stored vectors, by id."""
        return {d.id: v for d, v in self.with_vectors(ids) if d.id is not None}


def _passing(where: dict[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    """:func:`~langchain_expand.store.filters.passing`; a filter Chroma would refuse is an error naming it."""
    try:
        return filters.passing(where)
    except filters.Unsupported as exc:
        msg = f"filter {where!r}: {exc}. InMemoryVectorStore takes Chroma's syntax here, or a function of a Document."
        raise ValueError(msg) from exc
