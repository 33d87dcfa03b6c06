"""Reading an index back for the report: every document's text, rebuilt from its sentence records."""

from __future__ import annotations

import copy
from collections.abc import Sequence

from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from langchain_expand.store.adapters import adapt
from langchain_expand.store.records import decode_metadata, sentence_span
from langchain_expand.text.sentences import Span
from langchain_expand.units import (
    STORED_COUNT,
    STORED_DOC,
    STORED_GAP,
    STORED_INDEX,
    STORED_REV,
    STORED_START,
)

__all__ = ["read_index", "read_once", "read_records"]


def read_index(store: VectorStore, page: int = 5000) -> tuple[list[Document], dict[str, list[Span]]]:
    """The documents a window index holds, rebuilt from its sentences, and each one's sentence spans.

    Reads the Chroma collection in pages, records only (no vectors); a document whose
    sentences are not all of its head's version (an interrupted run) is left out.
    """
    documents, spans, _ = read_records(store, page)
    return documents, spans


def read_records(store: VectorStore, page: int) -> tuple[list[Document], dict[str, list[Span]], dict[str, Document]]:
    """:func:`read_index`, and every sentence record read, by id."""
    pages = adapt(store, "The report").pages(page)
    if pages is None:
        msg = f"The report reads Chroma indexes; {type(store).__name__} cannot list its records. Give it documents."
        raise ValueError(msg)
    by_doc: dict[str, dict[int, Document]] = {}
    by_id: dict[str, Document] = {}
    for listed in pages:
        for record in listed:
            meta = record.metadata
            if STORED_DOC in meta and record.id is not None:
                by_doc.setdefault(str(meta[STORED_DOC]), {})[int(meta[STORED_INDEX])] = record
                by_id[record.id] = record
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
        spans[doc_id] = [sentence_span(r) for r in kept]
    return documents, spans, by_id


def read_once(store: VectorStore, records: dict[str, Document]) -> VectorStore:
    """``store`` again, with its reads by id served from ``records``.

    The sweep expands every query's hits once per window configuration: a thousand reads of
    records the report has read already (0.5 against 2.3 s for 100 pseudo-queries on the
    E-Manual). The copy is of the store's own class (so the retriever gives it the same
    adapter) and shares its client and collection: searches, vectors and marks still go to the
    store. Nothing is written through it.
    """
    cls = type(store)

    class ReadOnce(cls):  # type: ignore[misc,valid-type]
        def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
            return [records[i] for i in ids if i in records]

    ReadOnce.__name__ = ReadOnce.__qualname__ = cls.__name__  # the store's name in any message
    reading = copy.copy(store)
    reading.__class__ = ReadOnce
    return reading
