"""Writing a window retriever's index: split, embed and commit documents, delete them, read them back.

:class:`SentenceIndexing` is the retriever's writing half, apart from its query path: each
document is validated and built into records before anything is written
(:func:`prepare`), then committed under the store's protocol
(:mod:`langchain_expand.store.commit`): the body, the lexical index's rows and local copies, the
head last, inside a writer's mark so readers' snapshots follow.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand.store import commit
from langchain_expand.store.commit import Indexed, Prepared
from langchain_expand.store.indexing import DocumentIndexed
from langchain_expand.store.lexical import copy_of
from langchain_expand.store.records import (
    UnitIds,
    checked_text,
    decode_metadata,
    document_ids,
    encode_metadata,
    metadata_fingerprint,
    revision,
    unit_id,
)
from langchain_expand.text.prefixes import checked_prefixes
from langchain_expand.text.sentences import SentenceSplitter
from langchain_expand.text.tokens import count_spans, counter_key
from langchain_expand.units import (
    SERVED_BY_WINDOWS,
    STORED_COUNT,
    STORED_DOC,
    STORED_INDEX,
    STORED_START,
    check_served_keys,
)
from langchain_expand.windows.assembly import joined_text
from langchain_expand.windows.layout import SentenceLayout, SentenceRecords

if TYPE_CHECKING:
    from langchain_core.vectorstores import VectorStore

    from langchain_expand.store.adapters import StoreAdapter
    from langchain_expand.store.lexical import BaseLexicalIndex
    from langchain_expand.text.prefixes import EmbeddingPrefix
    from langchain_expand.text.sentences import Span
    from langchain_expand.windows.performance import Performance

__all__ = ["SentenceIndexing", "prepare"]


class SentenceIndexing(DocumentIndexed):
    """A window retriever's writes: ``add_documents``, ``delete`` (LangChain's ``DocumentIndex``) and reading back."""

    if TYPE_CHECKING:  # the retriever's fields this reads
        vectorstore: VectorStore
        lexical: BaseLexicalIndex | None
        splitter: Callable[[str], list[Span]]
        sentence_prefix: EmbeddingPrefix | None
        token_counter: Callable[[str], int]
        max_sentence_tokens: int | None
        performance: Performance
        _vectors: StoreAdapter

        def __init__(self, **fields: Any) -> None: ...

    _BUILT: ClassVar[tuple[str, ...]] = ("vectorstore",)

    @classmethod
    def _on_defaults(cls, folder: Path, embeddings: Embeddings | None, fields: dict[str, Any]) -> dict[str, Any]:
        """A Chroma collection ``sentences`` in ``folder/chroma``, and BM25 in ``folder/lexical.sqlite``.

        Unless ``lexical`` is given (None: dense only). What the benchmarks measure.
        """
        from langchain_expand.store.defaults import chroma_store
        from langchain_expand.store.sqlite import LexicalIndex

        if "lexical" not in fields:
            fields["lexical"] = LexicalIndex(folder / "lexical.sqlite")
        return {"vectorstore": chroma_store("sentences", persist_directory=folder / "chroma", embeddings=embeddings)}

    def add_documents(self, documents: Sequence[Document], ids: Sequence[str] | None = None) -> list[str]:
        """Split, embed and store documents; re-adding an id replaces its sentences.

        Args:
            documents: The source documents.
            ids: One id per document; else ``Document.id``; else a hash of the text.

        Returns:
            The document ids, in input order.

        Raises:
            ValueError: For an empty document, duplicate ids, unusable metadata or an
                over-long sentence. Nothing is written when any document is bad.
        """
        return self.index_documents(documents, ids).ids

    def index_documents(self, documents: Sequence[Document], ids: Sequence[str] | None = None) -> Indexed:
        """:meth:`add_documents`, saying which documents were written and which were unchanged."""
        doc_ids = document_ids(documents, ids)
        prepared = [self._prepare(doc, doc_id) for doc, doc_id in zip(documents, doc_ids, strict=True)]
        layout = self._layout()
        writer = self._vectors.begin()  # readers trust nothing they hold until the mark below
        try:
            done = commit.index(layout, prepared)
            if self.lexical is not None:
                # Copies at another revision than the head's: written before the lexical index (or
                # its copies) existed, or by an update killed between the index's write and the head's
                # (a one-sentence version has no body to write first) and then reverted.
                held = self.lexical.revisions([p.doc_id for p in prepared])
                self.lexical.replace(layout.local_rows([p for p in prepared if held.get(p.doc_id) != {p.payload.rev}]))
        finally:
            self._vectors.mark(writer)  # finished, or stopped: readers' snapshots of the store are out of date
        return done

    def embedded_units(self, document: Document) -> int:
        """How many sentences indexing ``document`` embeds: what a progress bar counts."""
        return len(self.splitter(document.page_content))

    def _delete_documents(self, ids: list[str]) -> list[str]:
        """Remove every sentence of the documents ``ids`` (:meth:`delete`); those that had any."""
        writer = self._vectors.begin()
        try:
            deleted = commit.delete(self._layout(), ids)
            if self.lexical is not None:
                self.lexical.delete(ids)
        finally:
            self._vectors.mark(writer)
        return deleted

    def _layout(self) -> SentenceLayout:
        return SentenceLayout(self._vectors, self.performance.batch_size, self.lexical, counter_key(self.token_counter))

    def _prepare(self, doc: Document, doc_id: str) -> Prepared:
        """Validate one document and build its records, before anything is written."""
        text = checked_text(doc.page_content, doc_id)
        if self.lexical is not None:
            self.lexical.check_text(text, doc_id)
        return prepare(
            doc,
            doc_id,
            splitter=self.splitter,
            token_counter=self.token_counter,
            sentence_prefix=self.sentence_prefix,
            max_sentence_tokens=self.max_sentence_tokens,
            keep_counts=self.lexical is not None and counter_key(self.token_counter) is not None,
            check_metadata=self._vectors.check_metadata,
            lists=self._vectors.holds_lists,
        )

    def source_text(self, doc_id: str) -> str:
        """A document's text rebuilt from the store, at the offsets the units carry.

        Whitespace before the first sentence comes back as spaces, after the last not at all (neither is stored).
        Use it as ``MergeOverlaps(gap=..., source=retriever.source_text)``.
        """
        heads = self._vectors.get_by_ids([unit_id(doc_id, 0)])
        if not heads:
            msg = f"Document {doc_id!r} is not in the store; add it first."
            raise KeyError(msg)
        return self._text_of(doc_id, heads[0])

    def _text_of(self, doc_id: str, head: Document) -> str:
        n = int(head.metadata[STORED_COUNT])
        records = self._vectors.get_by_ids([unit_id(doc_id, i) for i in range(n)])
        ordered = sorted(records, key=lambda r: int(r.metadata[STORED_INDEX]))
        return " " * int(ordered[0].metadata[STORED_START]) + joined_text([copy_of(r) for r in ordered])

    def _stored_documents(self, ids: list[str]) -> list[Document]:
        """Each stored document of ``ids`` (:meth:`get`): its text as :meth:`source_text` rebuilds it, its metadata."""
        ids = list(dict.fromkeys(ids))
        heads = {h.metadata.get(STORED_DOC): h for h in self._vectors.get_by_ids([unit_id(d, 0) for d in ids])}
        return [
            Document(self._text_of(d, heads[d]), metadata=decode_metadata(heads[d].metadata), id=d)
            for d in ids
            if d in heads
        ]


def prepare(
    doc: Document,
    doc_id: str,
    *,
    splitter: Callable[[str], list[Span]],
    token_counter: Callable[[str], int],
    sentence_prefix: EmbeddingPrefix | None,
    max_sentence_tokens: int | None,
    keep_counts: bool,
    check_metadata: Callable[[dict[str, Any], str], None],
    lists: bool = False,
) -> Prepared:
    """Validate one document and build its sentence records, before anything is written.

    Its text the caller has checked (:func:`~langchain_expand.store.records.checked_text`). With
    ``keep_counts`` (a lexical index that keeps local copies, and a counter it can name), each
    sentence's token count and each one's joined with the next are counted here, so a window's
    count is their sum at query time. ``check_metadata`` refuses what the store would refuse,
    before anything of the batch is written; with ``lists``, a list of scalars is stored as one
    (:func:`~langchain_expand.store.records.encode_metadata`).
    """
    text = doc.page_content
    check_served_keys(doc.metadata, doc_id, SERVED_BY_WINDOWS, "SentenceWindowRetriever")
    split, known = _split(splitter, token_counter, text)
    spans = _checked_spans(split, len(text), doc_id)
    counts = None
    if keep_counts:
        pairs = [(start, end) for (start, _), (_, end) in itertools.pairwise(spans)]
        counts = (_counted(token_counter, text, spans, known), array("q", count_spans(token_counter, text, pairs)))
    if max_sentence_tokens is not None:
        own = counts[0] if counts is not None else _counted(token_counter, text, spans, known)
        _check_sentence_sizes(own, spans, doc_id, max_sentence_tokens)
    prefixes = None
    if sentence_prefix is not None:
        prefixes = checked_prefixes(sentence_prefix, text, spans, doc_id, setting="sentence_prefix", unit="sentence")
    base = encode_metadata(doc.metadata, doc_id, lists=lists)
    check_metadata(base, doc_id)

    def revised(fingerprint: str) -> str:
        return revision(text, splitter, fingerprint, sentence_prefix)

    rev = revised(metadata_fingerprint(base))
    body = SentenceRecords(doc_id, text, spans, base, rev, counts, prefixes, revised)
    return Prepared(doc_id, (rev, body.n), vector_ids=UnitIds(doc_id, body.n), payload=body)


def _split(
    splitter: Callable[[str], list[Span]], token_counter: Callable[[str], int], text: str
) -> tuple[list[Span], list[int | None] | None]:
    """The splitter's spans, and the counts its cap took of them where it counts as ``token_counter`` does."""
    if isinstance(splitter, SentenceSplitter) and splitter.token_counter is token_counter:
        return splitter.counted(text)
    return splitter(text), None


def _counted(
    token_counter: Callable[[str], int], text: str, spans: list[Span], known: list[int | None] | None
) -> array[int]:
    """Each span's token count: those ``known`` as they are, the rest counted."""
    if known is None:
        return array("q", count_spans(token_counter, text, spans))
    missing = iter(count_spans(token_counter, text, [span for span, n in zip(spans, known, strict=True) if n is None]))
    return array("q", (next(missing) if n is None else n for n in known))


def _check_sentence_sizes(counts: Iterable[int], spans: list[Span], doc_id: str, limit: int) -> None:
    for i, count in enumerate(counts):
        if count > limit:
            msg = (
                f"Document {doc_id!r}: sentence {i} (chars {spans[i][0]}-{spans[i][1]}) is "
                f"{count} tokens, over `max_sentence_tokens`={limit}, so its windows would "
                "not be bounded. Use a splitter with a cap, e.g. SentenceSplitter(max_unit_tokens=256)."
            )
            raise ValueError(msg)


def _checked_spans(spans: list[Span], length: int, doc_id: str) -> list[Span]:
    """Reject what a custom splitter got wrong, naming the document."""
    end = 0
    for i, (s, e) in enumerate(spans):
        if not (end <= s < e <= length):
            msg = (
                f"Document {doc_id!r}: the splitter returned span {i} = ({s}, {e}), which is "
                "empty, out of order, overlapping or outside the text. A splitter must return "
                "ordered, non-overlapping (start, end) offsets into the text."
            )
            raise ValueError(msg)
        end = e
    if not spans:
        msg = f"Document {doc_id!r}: the splitter found no sentences. Check the splitter or the text."
        raise ValueError(msg)
    return spans
