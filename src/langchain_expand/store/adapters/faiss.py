"""FAISS: writes that replace, deletes that skip unknown ids, ids and vectors handed back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.documents import Document

from langchain_expand.store import filters
from langchain_expand.store.adapters.base import Scored, StoreAdapter, Vector, as_served, clamped

__all__ = ["FaissAdapter"]


class FaissAdapter(StoreAdapter):
    """A ``langchain_community`` FAISS store.

    FAISS refuses an id it holds and fails to delete one it does not: writes delete first,
    deletes skip unknown ids. It hands records back without their ids: they are restored.
    A dict filter in Chroma's syntax is evaluated as Chroma would (:func:`filters.passing`), so
    ``$ne`` and ``$contains`` work and lists are held as lists; any other dict is FAISS's own
    syntax (``$neq``, ``$not``), passed through. Records are not listed by metadata (a pass over
    every one in Python: 0.3 s at 50,000), so a filtered query is dense only, as the store searches.
    """

    holds_lists = True  # its docstore keeps the Python list it is given

    def _relevance_rule(self) -> Callable[[float], float]:
        override = getattr(self.store, "override_relevance_score_fn", None)
        if override is not None:
            return clamped(override)
        strategy = str(getattr(self.store, "distance_strategy", "")).upper()
        if "EUCLIDEAN" in strategy:
            return clamped(lambda d: 1.0 - d / 2.0)  # squared L2 of unit vectors: 2 - 2 cos
        if "INNER_PRODUCT" in strategy:
            return clamped(float)
        return super()._relevance_rule()

    def unit_filter(self, where: Any) -> Any:
        """A dict renamed as the base does; a function of metadata given the unit's metadata."""
        if callable(where):
            return lambda metadata: where(as_served(metadata))
        return super().unit_filter(where)

    def search(self, query: str, vector: list[float] | None, k: int, **kwargs: Any) -> Scored:
        """As the base searches, a dict ``filter`` in Chroma's syntax evaluated as Chroma would."""
        passes = self._passing(kwargs.get("filter"))
        return super().search(query, vector, k, **(kwargs if passes is None else {**kwargs, "filter": passes}))

    @staticmethod
    def _passing(where: Any) -> Callable[[Any], bool] | None:
        """A dict in Chroma's syntax as a function of metadata; None for any other filter (FAISS's own)."""
        if not isinstance(where, dict):
            return None
        try:
            return filters.passing(where)
        except filters.Unsupported:
            return None

    def takes_vectors(self) -> bool:
        """FAISS keeps the vector it is given."""
        return True

    def _write_vectors(self, ids: list[str], docs: list[Document], vectors: Sequence[Vector]) -> None:
        self.delete(ids)
        pairs = list(zip([d.page_content for d in docs], vectors, strict=True))
        self.store.add_embeddings(pairs, metadatas=[dict(d.metadata) for d in docs], ids=ids)  # type: ignore[attr-defined]

    def _write(self, docs: list[Document], ids: list[str], **kwargs: Any) -> Sequence[Vector] | None:
        self.delete(ids)
        return super()._write(docs, ids, **kwargs)

    def delete(self, ids: Sequence[str]) -> None:
        """Delete the records ``ids`` name; unknown ids are skipped."""
        held = set(self.store.index_to_docstore_id.values())  # type: ignore[attr-defined]
        super().delete([i for i in ids if i in held])

    def _restored(self, found: list[Document], asked: Sequence[str]) -> list[Document]:
        """FAISS hands back records without ids, in the order asked: each gets its own."""
        held = [i for i in asked if isinstance(self.store.docstore.search(i), Document)]  # type: ignore[attr-defined]
        return [
            d if d.id is not None else Document(d.page_content, metadata=d.metadata, id=i)
            for d, i in zip(found, held, strict=True)
        ]

    def with_vectors(self, ids: Sequence[str]) -> list[tuple[Document, Vector]]:
        """The records with the vectors their index holds."""
        position = {v: k for k, v in self.store.index_to_docstore_id.items()}  # type: ignore[attr-defined]
        docs = self.get_by_ids([i for i in ids if i in position])
        index = self.store.index  # type: ignore[attr-defined]
        return [(d, index.reconstruct(position[d.id])) for d in docs]

    def vectors(self, ids: Sequence[str]) -> dict[str, Vector]:
        """The stored vectors, by id."""
        return {d.id: v for d, v in self.with_vectors(ids) if d.id is not None}
