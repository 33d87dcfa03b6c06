"""Qdrant: ids written as UUIDs derived from them, the originals kept in metadata and handed back."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document

from langchain_expand.store.adapters.base import StoreAdapter, Vector, clamped
from langchain_expand.units import DOC_ID, STORED_DOC

__all__ = ["ID_KEY", "QdrantAdapter"]

ID_KEY = "lcx_id"
"""Metadata key holding a record's own id (Qdrant accepts only UUIDs and integers)."""
_EXTRA = ("_id", "_collection_name")
"""Keys ``langchain-qdrant`` adds to every record's metadata on the way out."""
_ID_NAMESPACE = uuid.UUID("7f6d1c2e-6a1b-5c3e-9f3a-1d2b3c4d5e6f")


class QdrantAdapter(StoreAdapter):
    """A ``langchain_qdrant`` store: each id is written as ``uuid5`` of it, the original in ``lcx_id``."""

    holds_lists = True  # a MatchValue on a list payload matches any of its values

    def _relevance_rule(self) -> Callable[[float], float]:
        distance = str(getattr(self.store, "distance", "")).upper()
        if "EUCLID" in distance:
            return clamped(lambda d: 1.0 - d * d / 2.0)  # L2 of unit vectors: sqrt(2 - 2 cos)
        return clamped(float)

    @staticmethod
    def _out_id(own: str) -> str:
        return str(uuid.uuid5(_ID_NAMESPACE, own))

    def unit_filter(self, where: Any) -> Any:
        """A Qdrant ``Filter`` whose conditions on the metadata's ``doc_id`` read ``lcx_doc``; another kind is refused.

        ``langchain-qdrant`` takes a ``models.Filter`` and fails on a dict (Chroma's syntax) deep
        in the client, with an error that names neither.
        """
        from qdrant_client import models

        if not isinstance(where, models.Filter):
            msg = (
                f"Qdrant filters with a qdrant_client.models.Filter, not a {type(where).__name__}: e.g. "
                "filter=models.Filter(must=[models.FieldCondition(key='metadata.source', "
                "match=models.MatchValue(value='a.md'))])."
            )
            raise ValueError(msg)

        key = f"{getattr(self.store, 'metadata_payload_key', 'metadata')}."

        def renamed(node: Any) -> Any:
            if isinstance(node, list):
                return [renamed(n) for n in node]
            if isinstance(node, models.Filter):
                parts = {f: renamed(getattr(node, f)) for f in ("must", "should", "must_not")}
                return node.model_copy(update=parts)
            if isinstance(node, models.FieldCondition) and node.key == key + DOC_ID:
                return node.model_copy(update={"key": key + STORED_DOC})
            return node

        return renamed(where)

    def takes_vectors(self) -> bool:
        """Qdrant keeps the vector it is given in dense mode (a sparse or hybrid mode embeds its own)."""
        from langchain_qdrant import RetrievalMode

        return getattr(self.store, "retrieval_mode", None) == RetrievalMode.DENSE

    def _write_vectors(self, ids: list[str], docs: list[Document], vectors: Sequence[Vector]) -> None:
        from qdrant_client import models

        store: Any = self.store
        points = [
            models.PointStruct(
                id=self._out_id(id_),
                vector={store.vector_name: np.asarray(vector, dtype=np.float64).tolist()},  # Qdrant takes lists
                payload={
                    store.content_payload_key: d.page_content,
                    store.metadata_payload_key: {**d.metadata, ID_KEY: id_},
                },
            )
            for id_, d, vector in zip(ids, docs, vectors, strict=True)
        ]
        store.client.upsert(collection_name=store.collection_name, points=points)

    def _write(self, docs: list[Document], ids: list[str], **kwargs: Any) -> Sequence[Vector] | None:
        kept = [Document(d.page_content, metadata={**d.metadata, ID_KEY: i}) for d, i in zip(docs, ids, strict=True)]
        self.store.add_documents(kept, ids=[self._out_id(i) for i in ids], **kwargs)
        return None

    def delete(self, ids: Sequence[str]) -> None:
        """Delete the records ``ids`` name; unknown ids are skipped."""
        super().delete([self._out_id(i) for i in ids])

    def get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        """The records ``ids`` name, with their own ids; unknown ids are left out."""
        if not ids:
            return []
        return [self._found(d) for d in self.store.get_by_ids([self._out_id(i) for i in ids])]

    def _found(self, doc: Document) -> Document:
        """``doc`` with its own id and without the keys the store added."""
        meta = {k: v for k, v in doc.metadata.items() if k not in _EXTRA and k != ID_KEY}
        return Document(doc.page_content, metadata=meta, id=doc.metadata.get(ID_KEY))

    def with_vectors(self, ids: Sequence[str]) -> list[tuple[Document, Vector]]:
        """The records with their stored vectors, read in one retrieve."""
        if not ids:
            return []
        store: Any = self.store
        points = store.client.retrieve(
            store.collection_name, [self._out_id(i) for i in ids], with_payload=True, with_vectors=True
        )
        out: list[tuple[Document, Vector]] = []
        for point in points:
            payload = point.payload or {}
            meta = dict(payload.get(store.metadata_payload_key) or {})
            doc = Document(payload.get(store.content_payload_key, ""), metadata=meta)
            vector = point.vector[store.vector_name] if isinstance(point.vector, dict) else point.vector
            out.append((self._found(doc), [float(x) for x in vector]))
        return out

    def vectors(self, ids: Sequence[str]) -> dict[str, Vector]:
        """The stored vectors, by id."""
        return {d.id: v for d, v in self.with_vectors(ids) if d.id is not None}
