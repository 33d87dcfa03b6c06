"""Writing a parent retriever's index: split into parents and children, commit them, delete them, read them back.

:class:`ParentIndexing` is the retriever's writing half, apart from its query path. Each
document is validated and split (parents by ``parent_splitter``, children by
``child_splitter``, each child's prefix checked) before anything is written; then parents and
children are committed together under one version (:mod:`langchain_expand.store.commit`,
:class:`~langchain_expand.parents.layout.ParentLayout`), so a hit is never served with another
version's parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand.parents.layout import LISTED, Children, ParentLayout, ParentRecords, parent_key
from langchain_expand.parents.migration import Migrated, migrate_stock_index
from langchain_expand.store import commit
from langchain_expand.store.adapters import collection_name
from langchain_expand.store.commit import Indexed, Prepared
from langchain_expand.store.docstore import claim_docstore
from langchain_expand.store.records import (
    checked_text,
    document_ids,
    encode_metadata,
    metadata_fingerprint,
    revision,
)
from langchain_expand.text.prefixes import checked_prefixes
from langchain_expand.text.sections import StructureSplitter, located_parents
from langchain_expand.text.sections import locate as locate_chunks
from langchain_expand.units import (
    DOC_ID,
    END,
    HEADINGS,
    N_CHILDREN,
    N_PARENTS,
    REVISION,
    SERVED_BY_PARENTS,
    START,
    STORED_DOC,
    STORED_REV,
    TITLE,
    check_served_keys,
)

if TYPE_CHECKING:
    from langchain_core.stores import BaseStore
    from langchain_text_splitters import TextSplitter

    from langchain_expand.store.adapters import StoreAdapter
    from langchain_expand.store.lexical import BaseLexicalIndex
    from langchain_expand.text.prefixes import EmbeddingPrefix

__all__ = ["ParentIndexing"]


class ParentIndexing:
    """A parent retriever's writes: ``add_documents``, what ``delete`` and ``get`` do, migrating a stock index.

    Mixed in before LangChain's ``ParentDocumentRetriever``, whose ``add_documents`` it replaces.
    """

    if TYPE_CHECKING:  # the retriever's fields this reads
        docstore: BaseStore[str, Document]
        parent_splitter: TextSplitter | None
        child_splitter: TextSplitter
        child_prefix: EmbeddingPrefix | None
        child_metadata_fields: Sequence[str] | None
        id_key: str
        lexical: BaseLexicalIndex | None
        batch_size: int
        _vectors: StoreAdapter

        def __init__(self, **fields: Any) -> None: ...

    _BUILT: ClassVar[tuple[str, ...]] = ("vectorstore", "docstore", "byte_store")

    @classmethod
    def _on_defaults(cls, folder: Path, embeddings: Embeddings | None, fields: dict[str, Any]) -> dict[str, Any]:
        """A Chroma collection ``children`` in ``folder/chroma``, the parents in ``folder/docstore.sqlite``.

        And BM25 over the children in ``folder/lexical.sqlite`` (its table ``children``, beside a
        window retriever's ``sentences``), unless ``lexical`` is given (None: dense only): the
        README's settings for meetings and manuals fuse it, and the command line's index has it.
        """
        from langchain_expand.store.defaults import chroma_store
        from langchain_expand.store.docstore import SQLDocStore
        from langchain_expand.store.sqlite import LexicalIndex

        if "lexical" not in fields:
            fields["lexical"] = LexicalIndex(folder / "lexical.sqlite", table="children")
        store = chroma_store("children", persist_directory=folder / "chroma", embeddings=embeddings)
        return {"vectorstore": store, "docstore": SQLDocStore(f"sqlite:///{folder / 'docstore.sqlite'}")}

    def add_documents(  # returns the ids, as VectorStore.add_documents does
        self,
        documents: Sequence[Document],
        ids: Sequence[str] | None = None,
        add_to_docstore: bool = True,
        **kwargs: Any,
    ) -> list[str]:
        """Split into parents and children, store them, replace earlier versions.

        Args:
            documents: Source documents.
            ids: One id per source document; else ``Document.id``; else a content hash.
            add_to_docstore: The stock argument; parents are always written with their
                children (one commit protocol keeps the two in step), so only True works.
            **kwargs: Passed on to the vector store's ``add_documents``.

        Returns:
            The source document ids.

        Raises:
            ValueError: For an empty document, duplicate ids or unusable metadata;
                nothing is written then. For ``add_to_docstore=False``.
        """
        if not add_to_docstore:
            msg = (
                "add_to_docstore=False is not supported: parents and children are written together, "
                "each carrying its version, so a hit is never served with another version's parent. "
                "Re-adding a document whose parents are stored already costs nothing when it is "
                "unchanged: call add_documents(docs) without it."
            )
            raise ValueError(msg)
        return self.index_documents(documents, ids, **kwargs).ids

    def index_documents(
        self, documents: Sequence[Document], ids: Sequence[str] | None = None, **kwargs: Any
    ) -> Indexed:
        """:meth:`add_documents`, saying which documents were written and which were unchanged."""
        doc_ids = document_ids(documents, ids)
        prepared = [self._prepare(doc, doc_id) for doc, doc_id in zip(documents, doc_ids, strict=True)]
        layout = self._layout(kwargs)
        claim_docstore(self.docstore, collection_name(self._vectors.store), type(self).__name__, write=bool(prepared))
        done = commit.index(layout, prepared)
        if self.lexical is not None:  # rows missing or at another revision: the index came later
            parents = {p.doc_id: [kids.parent_id for kids in p.payload.children] for p in prepared}
            held = self.lexical.revisions([key for keys in parents.values() for key in keys], ranked=True)
            behind = [p for p in prepared if any(held.get(key) != {p.version} for key in parents[p.doc_id])]
            self.lexical.replace(layout.lexical_rows(behind))
        return done

    def _delete_documents(self, ids: list[str]) -> list[str]:
        """Remove the source documents ``ids`` (:meth:`delete`): their parents and all their children."""
        return commit.delete(self._layout({}), ids)

    def _stored_documents(self, ids: list[str]) -> list[Document]:
        """Each stored document of ``ids`` (:meth:`get`): its parents joined at their offsets, its metadata.

        Text between parents that no parent holds (a splitter that drops whitespace) comes back
        as spaces, text two parents hold (``chunk_overlap``) once; the metadata is the first
        parent's, less what this class and its splitter add.
        """
        ids = list(dict.fromkeys(ids))
        heads = self.docstore.mget([self._head_id(d) for d in ids])
        added = self._added()
        found = []
        for doc_id, head in zip(ids, heads, strict=True):
            if head is None:
                continue
            more = int(head.metadata.get(N_PARENTS, 1)) - 1
            parents = [head, *self.docstore.mget([parent_key(doc_id, j) for j in range(1, more + 1)])]
            text = ""
            for parent in parents:
                if parent is not None:  # at its offset: parents a splitter cut with ``chunk_overlap`` share text
                    start = int(parent.metadata[START])
                    text = text[:start].ljust(start) + parent.page_content
            metadata = {k: v for k, v in head.metadata.items() if k not in added}
            found.append(Document(text, metadata=metadata, id=doc_id))
        return found

    def _added(self) -> frozenset[str]:
        """The keys a parent carries besides its document's metadata: this class's, and its splitter's."""
        added = {DOC_ID, START, END, N_CHILDREN, N_PARENTS, REVISION}
        return frozenset(added | {TITLE, HEADINGS} if isinstance(self.parent_splitter, StructureSplitter) else added)

    def _layout(self, add_kwargs: dict[str, Any]) -> ParentLayout:
        return ParentLayout(self._vectors, self.docstore, self._head_id, self.batch_size, add_kwargs, self.lexical)

    def _head_id(self, doc_id: str) -> str:
        """The first parent of a document, whose metadata counts its parents (``n_parents``)."""
        return doc_id if self.parent_splitter is None else parent_key(doc_id, 0)

    def migrate_stock_index(self, documents: Sequence[Document] | None = None) -> Migrated:
        """Move an index the stock ``ParentDocumentRetriever`` built onto this class, in place.

        Adds the documents again with this class (``documents``, or the stock parents where
        the stock class had no ``parent_splitter``), then removes the stock children and
        parents. Until it runs, hits on stock children are skipped with a warning naming it.
        See :mod:`langchain_expand.parents.migration`.
        """
        return migrate_stock_index(self, self._vectors, documents)

    def embedded_units(self, document: Document) -> int:
        """How many children indexing ``document`` embeds: what a progress bar counts."""
        parents = self._parents_of(document, str(document.id))
        return sum(len(self.child_splitter.split_text(parent.page_content)) for parent in parents)

    def _prepare(self, doc: Document, doc_id: str) -> Prepared:
        """Validate one document and build its parents and children, before anything is written."""
        checked_text(doc.page_content, doc_id)
        if self.lexical is not None:
            self.lexical.check_text(doc.page_content, doc_id)
        served = SERVED_BY_PARENTS
        if isinstance(self.parent_splitter, StructureSplitter):
            served |= {TITLE, HEADINGS}
        check_served_keys(doc.metadata, doc_id, served, "BudgetedParentDocumentRetriever")
        stored = encode_metadata(doc.metadata, doc_id, lists=self._vectors.holds_lists)
        self._vectors.check_metadata(stored, doc_id)

        def revised(fingerprint: str) -> str:
            return revision(doc.page_content, self.parent_splitter, self.child_splitter, fingerprint, self.child_prefix)

        listed = any(isinstance(v, list) for v in stored.values())  # a list held as one (encode_metadata)
        rev = revised(metadata_fingerprint(doc.metadata) + (LISTED if listed else ""))
        parents: list[tuple[str, Document]] = []
        children: list[Children] = []
        doc_parents = self._parents_of(doc, doc_id)
        for j, parent in enumerate(doc_parents):
            parent_id = doc_id if self.parent_splitter is None else parent_key(doc_id, j)
            kids = self._children_of(parent, parent_id, doc_id, rev)
            parent.metadata[N_CHILDREN] = kids.n
            parent.metadata[REVISION] = rev
            if j == 0:
                parent.metadata[N_PARENTS] = len(doc_parents)
            parent.id = parent_id
            parents.append((parent_id, parent))
            children.append(kids)
        children = self._with_prefix(doc.page_content, children, doc_id)
        return Prepared(
            doc_id,
            rev,
            vector_ids={i for kids in children for i in kids.ids()},
            docstore_keys={i for i, _ in parents},
            payload=ParentRecords(parents, children, revised, self._added()),
        )

    def _parents_of(self, doc: Document, doc_id: str) -> list[Document]:
        source = Document(doc.page_content, metadata=doc.metadata, id=doc_id)
        if self.parent_splitter is None:
            parents = [Document(doc.page_content, metadata={**doc.metadata})]
            parents[0].metadata[START], parents[0].metadata[END] = 0, len(doc.page_content)
        elif isinstance(self.parent_splitter, StructureSplitter):
            parents = self.parent_splitter.split_documents([source])
        else:
            parents = located_parents(self.parent_splitter, source)
        for parent in parents:
            parent.metadata[DOC_ID] = doc_id
        return parents

    def _with_prefix(self, text: str, children: list[Children], doc_id: str) -> list[Children]:
        """The children with what ``child_prefix`` embeds before each, checked; unchanged without it."""
        if self.child_prefix is None:
            return children
        spans = [(kids.base + s, kids.base + e) for kids in children for s, e in kids.chunks]
        prefixes = checked_prefixes(self.child_prefix, text, spans, doc_id, setting="child_prefix", unit="child")
        if prefixes is None:
            return children
        out, at = [], 0
        for kids in children:
            out.append(replace(kids, prefixes=prefixes[at : at + kids.n]))
            at += kids.n
        return out

    def _children_of(self, parent: Document, parent_id: str, doc_id: str, rev: str) -> Children:
        chunks = locate_chunks(parent.page_content, self.child_splitter.split_text(parent.page_content), doc_id)
        kept = parent.metadata
        if self.child_metadata_fields is not None:
            kept = {k: v for k, v in kept.items() if k in self.child_metadata_fields}
        own = {k: v for k, v in kept.items() if k not in (DOC_ID, self.id_key)}
        shared = encode_metadata(own, doc_id, lists=self._vectors.holds_lists)
        # every unit carries its version: a hit never meets another version's parent
        shared.update({self.id_key: parent_id, STORED_DOC: doc_id, STORED_REV: rev})
        return Children(parent_id, parent.page_content, int(parent.metadata[START]), chunks, shared)
