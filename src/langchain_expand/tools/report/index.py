"""Reading an index back for the report: every document's text, rebuilt from its sentence records."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from langchain_expand.store.adapters import StoreAdapter
from langchain_expand.store.records import decode_metadata
from langchain_expand.text.sentences import Span
from langchain_expand.units import (
    STORED_COUNT,
    STORED_DOC,
    STORED_END,
    STORED_GAP,
    STORED_INDEX,
    STORED_REV,
    STORED_START,
)

if TYPE_CHECKING:
    pass

__all__ = ["ReadOnce", "read_index", "read_records"]


def read_index(store: VectorStore, page: int = 5000) -> tuple[list[Document], dict[str, list[Span]]]:
    """The documents a window index holds, rebuilt from its sentences, and each one's sentence spans.

    Reads the Chroma collection in pages, records only (no vectors); a document whose
    sentences are not all of its head's version (an interrupted run) is left out.
    """
    documents, spans, _ = read_records(store, page)
    return documents, spans


def read_records(store: VectorStore, page: int) -> tuple[list[Document], dict[str, list[Span]], dict[str, Document]]:
    """:func:`read_index`, and every sentence record read, by id."""
    collection = getattr(store, "_collection", None)
    if collection is None:
        msg = f"The report reads Chroma indexes; {type(store).__name__} cannot list its records. Give it documents."
        raise ValueError(msg)
    by_doc: dict[str, dict[int, Document]] = {}
    by_id: dict[str, Document] = {}
    for offset in itertools.count(0, page):
        got = collection.get(include=["documents", "metadatas"], limit=page, offset=offset)
        for id_, text, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
            if meta and STORED_DOC in meta:
                record = Document(text, metadata=dict(meta), id=id_)
                by_doc.setdefault(str(meta[STORED_DOC]), {})[int(meta[STORED_INDEX])] = record
                by_id[id_] = record
        if len(got["ids"]) < page:
            break
    documents: list[Document] = []
    spans: dict[str, list[Span]] = {}
    for doc_id, records in by_doc.items():
        head = records.get(0)
        if head is None:  # no committed version
            continue
        n = int(head.metadata[STORED_COUNT])
        rev = head.metadata.get(STORED_REV)
        kept = [r for r in (records.get(i) for i in range(n)) if r is not None and r.metadata.get(STORED_REV) == rev]
        if len(kept) != n:
            continue
        parts = [" " * int(kept[0].metadata[STORED_START])]
        for r in kept:  # each sentence and the whitespace after it, as they stand in the source
            parts += [r.page_content, str(r.metadata.get(STORED_GAP, ""))]
        text = "".join(parts[:-1])
        documents.append(Document(text, metadata=decode_metadata(head.metadata), id=doc_id))
        spans[doc_id] = [(int(r.metadata[STORED_START]), int(r.metadata[STORED_END])) for r in kept]
    return documents, spans, by_id


class ReadOnce(StoreAdapter):
    """The index's store, with reads by id served from the records the report read already.

    The sweep expands every query's hits once per window configuration: a thousand reads
    of records that are in memory anyway. Searches still go to the store.
    """

    def __init__(self, store: VectorStore, records: dict[str, Document]) -> None:
        super().__init__(store)
        self.records = records

    def get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        """The records asked for that the report read; the rest are left out, as a store leaves out unknown ids."""
        return [self.records[i] for i in ids if i in self.records]
