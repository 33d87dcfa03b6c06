"""A re-add replaces a document: its metadata exactly as given, keys it no longer has removed.

Issue #34, finding 1: Chroma merges an upsert's metadata into the record it replaces, so a key
removed in a re-add stayed on the stored records, in the served metadata, and in what filters
match: anyone filtering on metadata for access control was served revoked permissions. Run
on every store the retrievers support (real stores, real MiniLM).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    LexicalIndex,
    MarkdownSectionSplitter,
    SentenceWindowRetriever,
)
from langchain_expand.units import STORED_DOC

from .conftest import CountingEmbeddings
from .stores import KINDS, make_store

TEXT = (
    "## Warranty\n\nThe warranty lasts two years from the date of purchase. Returns are accepted within "
    "thirty days. Support answers by phone on weekdays.\n"
)
QUERY = "how long does the warranty last"
VERSIONS: list[dict[str, Any]] = [
    {"acl": "public", "group": "hr", "level": 3, "tags": "a"},
    {"acl": "public", "owner": "ann"},
    {"acl": "public"},
    {"acl": "private", "group": "it", "level": 1},
]
"""Keys added, changed and removed from one version to the next."""
USER_KEYS = {key for version in VERSIONS for key in version}

pytestmark = pytest.mark.integration


def make(kind: str, design: str, folder: Path, embeddings: Embeddings) -> Any:
    store = make_store(kind, folder, embeddings)
    if design == "windows":
        return SentenceWindowRetriever(vectorstore=store)
    if design == "hybrid windows":  # the lexical index's copies and, on Chroma, the snapshot
        return SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(folder / "lexical.sqlite"))
    return BudgetedParentDocumentRetriever(vectorstore=store, docstore=InMemoryStore())


def served(retriever: Any) -> list[dict[str, Any]]:
    """The user's keys of every unit a query returns."""
    return [{k: v for k, v in d.metadata.items() if k in USER_KEYS} for d in retriever.invoke(QUERY)]


@pytest.mark.parametrize("design", ["windows", "hybrid windows", "parents"])
@pytest.mark.parametrize("kind", KINDS)
def test_every_unit_carries_the_latest_metadata_exactly(
    kind: str, design: str, tmp_path: Path, minilm: Embeddings
) -> None:
    retriever = make(kind, design, tmp_path, minilm)
    for version in VERSIONS:
        retriever.add_documents([Document(TEXT, id="memo", metadata=version)])
        units = served(retriever)
        assert units, version
        assert all(unit == version for unit in units), (version, units)


@pytest.mark.parametrize("design", ["windows", "hybrid windows"])
@pytest.mark.parametrize("kind", KINDS)
def test_new_metadata_alone_embeds_nothing_where_the_store_takes_vectors(
    kind: str, design: str, tmp_path: Path, minilm: Embeddings
) -> None:
    counting = CountingEmbeddings(minilm)
    retriever = make(kind, design, tmp_path / "kept", counting)
    other = Document("Shipping takes five days. Express shipping takes two.", id="other")
    retriever.add_documents([Document(TEXT, id="memo", metadata=VERSIONS[0]), other])
    before = counting.documents_embedded
    retriever.add_documents([Document(TEXT, id="memo", metadata=VERSIONS[3])])
    assert counting.documents_embedded == before  # the head too keeps its vector; it is written last
    fresh = make(kind, design, tmp_path / "fresh", minilm)
    fresh.add_documents([Document(TEXT, id="memo", metadata=VERSIONS[3]), other])
    for call in ({}, {"max_tokens": 60}, {"k": 1, "before": 0, "after": 0}):
        kept, anew = retriever.invoke(QUERY, **call), fresh.invoke(QUERY, **call)
        assert [(d.page_content, d.metadata["span"], served_keys(d)) for d in kept] == [
            (d.page_content, d.metadata["span"], served_keys(d)) for d in anew
        ]
        assert [d.metadata["score"] for d in kept] == pytest.approx([d.metadata["score"] for d in anew], abs=1e-5)


def served_keys(doc: Document) -> dict[str, Any]:
    return {k: v for k, v in doc.metadata.items() if k in USER_KEYS}


def interrupted(collection: Any, unit: str, embeddings: Embeddings) -> str:
    """Rewrite record ``unit`` as a run that died before its head would: another text, another revision."""
    meta = collection.get(ids=[unit], include=["metadatas"])["metadatas"][0]
    stray = "Nothing here is about a warranty."
    vector, meta = embeddings.embed_documents([stray])[0], {**meta, "lcx_rev": "interrupted"}
    collection.upsert(ids=[unit], documents=[stray], embeddings=[vector], metadatas=[meta])
    return stray


def parents(kind: str, folder: Path, embeddings: Embeddings, *, split: bool) -> BudgetedParentDocumentRetriever:
    """Small children (several a parent); with ``split``, Markdown sections and BM25 over the children."""
    return BudgetedParentDocumentRetriever(
        vectorstore=make_store(kind, folder, embeddings),
        docstore=InMemoryStore(),
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=0),
        parent_splitter=MarkdownSectionSplitter() if split else None,
        lexical=LexicalIndex(folder / "lexical.sqlite", table="children") if split else None,
    )


@pytest.mark.parametrize("kind", KINDS)
def test_new_metadata_alone_embeds_no_child_again_where_the_store_takes_vectors(
    kind: str, tmp_path: Path, minilm: Embeddings
) -> None:
    counting = CountingEmbeddings(minilm)
    retriever = parents(kind, tmp_path / "kept", counting, split=True)
    other = Document("## Shipping\n\nShipping takes five days. Express shipping takes two.\n", id="other")
    retriever.add_documents([Document(TEXT, id="memo", metadata=VERSIONS[0]), other])
    before = counting.documents_embedded
    retriever.add_documents([Document(TEXT, id="memo", metadata=VERSIONS[3])])
    assert counting.documents_embedded == before  # the parents commit the version; no child is embedded
    fresh = parents(kind, tmp_path / "fresh", minilm, split=True)
    fresh.add_documents([Document(TEXT, id="memo", metadata=VERSIONS[3]), other])
    for call in ({}, {"max_tokens": 30}, {"k": 1, "expand": False}):
        kept, anew = retriever.invoke(QUERY, **call), fresh.invoke(QUERY, **call)
        assert [(d.page_content, served_keys(d)) for d in kept] == [(d.page_content, served_keys(d)) for d in anew]
        assert [d.metadata["score"] for d in kept] == pytest.approx([d.metadata["score"] for d in anew], abs=1e-5)


def test_a_child_an_interrupted_write_left_is_embedded_again_not_kept(tmp_path: Path, minilm: Embeddings) -> None:
    counting = CountingEmbeddings(minilm)
    retriever = parents("chroma-cosine", tmp_path, counting, split=False)
    retriever.add_documents([Document(TEXT, id="memo", metadata={"v": 1})])
    # a run writing another text died after rewriting child 1, before the parent that commits it
    collection = retriever.vectorstore._collection
    stray = interrupted(collection, "memo::1", minilm)
    before = counting.documents_embedded
    retriever.add_documents([Document(TEXT, id="memo", metadata={"v": 2})])
    assert counting.documents_embedded - before == 1
    fresh = parents("chroma-cosine", tmp_path / "fresh", minilm, split=False)
    fresh.add_documents([Document(TEXT, id="memo", metadata={"v": 2})])
    ids = [f"memo::{i}" for i in range(len(retriever.child_splitter.split_text(TEXT)))]
    kept = collection.get(ids=ids, include=["embeddings", "documents"])
    stored = fresh.vectorstore._collection.get(ids=ids, include=["embeddings"])
    anew = dict(zip(stored["ids"], stored["embeddings"], strict=True))
    assert stray not in kept["documents"]
    for i, vector in zip(kept["ids"], kept["embeddings"], strict=True):
        assert float(np.dot(vector, anew[i])) == pytest.approx(1.0, abs=1e-5), i  # its own text's vector


class Unadapted(InMemoryVectorStore):
    """A store this library has no adapter for: it embeds every record it is given."""


@pytest.mark.parametrize("design", ["windows", "parents"])
def test_new_metadata_alone_embeds_once_where_the_store_embeds_all_it_is_given(design: str, minilm: Embeddings) -> None:
    counting = CountingEmbeddings(minilm)
    store = Unadapted(counting)
    retriever: Any = (
        SentenceWindowRetriever(vectorstore=store)
        if design == "windows"
        else BudgetedParentDocumentRetriever(vectorstore=store, docstore=InMemoryStore())
    )
    retriever.add_documents([Document(TEXT, id="memo", metadata=VERSIONS[0])])
    first = counting.documents_embedded
    retriever.add_documents([Document(TEXT, id="memo", metadata=VERSIONS[3])])
    assert counting.documents_embedded == 2 * first  # no stored vector read (embedded again) to be dropped
    units = served(retriever)
    assert units
    assert all(unit == VERSIONS[3] for unit in units)


@pytest.mark.parametrize("lexical", [False, True])
def test_a_record_an_interrupted_write_left_is_embedded_again_not_kept(
    lexical: bool, tmp_path: Path, minilm: Embeddings
) -> None:
    counting = CountingEmbeddings(minilm)
    retriever = make("chroma-cosine", "hybrid windows" if lexical else "windows", tmp_path / "kept", counting)
    retriever.add_documents([Document(TEXT, id="memo", metadata={"v": 1})])
    # a run writing another text died after rewriting sentence 2 (and its local copy), before its head
    collection = retriever.vectorstore._collection
    interrupted(collection, "memo::2", minilm)
    if lexical:
        retriever.lexical.replace([("memo", "interrupted", iter(()))])  # its copies gone with the old revision
    before = counting.documents_embedded
    retriever.add_documents([Document(TEXT, id="memo", metadata={"v": 2})])
    # the sentence whose stored record is of another text: the others (the head too) kept from their
    # records at the head's revision (the local copies, gone with it, would have served first)
    assert counting.documents_embedded - before == 1
    sentences = len(retriever.splitter(TEXT))
    fresh = make("chroma-cosine", "windows", tmp_path / "fresh", minilm)
    fresh.add_documents([Document(TEXT, id="memo", metadata={"v": 2})])
    ids = [f"memo::{i}" for i in range(sentences)]
    kept = collection.get(ids=ids, include=["embeddings", "documents"])
    anew = fresh.vectorstore._collection.get(ids=ids, include=["embeddings", "documents"])
    assert dict(zip(kept["ids"], kept["documents"], strict=True)) == dict(
        zip(anew["ids"], anew["documents"], strict=True)
    )
    vectors = dict(zip(anew["ids"], anew["embeddings"], strict=True))
    for i, vector in zip(kept["ids"], kept["embeddings"], strict=True):
        assert float(np.dot(vector, vectors[i])) == pytest.approx(1.0, abs=1e-5), i  # its own text's vector


@pytest.mark.parametrize("design", ["windows", "parents"])
@pytest.mark.parametrize("kind", ["chroma-cosine", "chroma-l2"])
def test_a_filter_on_a_removed_key_finds_nothing(kind: str, design: str, tmp_path: Path, minilm: Embeddings) -> None:
    retriever = make(kind, design, tmp_path, minilm)
    retriever.add_documents([Document(TEXT, id="memo", metadata=VERSIONS[0])])
    assert retriever.invoke(QUERY, filter={"group": "hr"})
    retriever.add_documents([Document(TEXT, id="memo", metadata=VERSIONS[2])])
    assert retriever.invoke(QUERY, filter={"group": "hr"}) == []
    assert retriever.invoke(QUERY, filter={"acl": "public"})
    stored = retriever.vectorstore._collection.get(include=["metadatas"])["metadatas"]
    assert stored
    assert not any("group" in m or "tags" in m or "level" in m for m in stored)


def docstore_keys(retriever: BudgetedParentDocumentRetriever) -> list[str]:
    return sorted(retriever.docstore.yield_keys())


@pytest.mark.parametrize("docstore", ["memory", "sqlite"])
@pytest.mark.parametrize("split", [False, True])
def test_a_document_never_touches_another_whose_id_looks_like_its_parent_keys(
    docstore: str, split: bool, tmp_path: Path, minilm: Embeddings
) -> None:
    """Issue #34, finding 2: without a parent splitter a document is its own parent, stored under
    its id; the probe for parents an interrupted run left past the head asked for "x.p1", found
    the document with that id, and an update or delete of "x" removed it."""
    from langchain_expand import MarkdownSectionSplitter, SQLDocStore, chroma_store

    store = SQLDocStore(f"sqlite:///{tmp_path}/docstore.sqlite") if docstore == "sqlite" else InMemoryStore()
    retriever = BudgetedParentDocumentRetriever(
        vectorstore=chroma_store("children", persist_directory=tmp_path / "chroma", embeddings=minilm),
        docstore=store,
        parent_splitter=MarkdownSectionSplitter(max_level=2) if split else None,
    )
    others = ["x.p1", "x.p0", "x.p2.p0", "x::0", "x.p1::0"]
    texts = [Document(f"{TEXT}\n## Other {i}\n\nText of {name}.\n", id=name) for i, name in enumerate(others)]
    retriever.add_documents(texts)
    theirs = docstore_keys(retriever)
    retriever.add_documents([Document(TEXT, id="x")])
    retriever.add_documents([Document(TEXT + "\nOne more sentence about returns.\n", id="x")])  # an update
    assert set(theirs) <= set(docstore_keys(retriever))
    retriever.delete(["x"])
    assert docstore_keys(retriever) == theirs
    children = retriever.vectorstore.get()["metadatas"]
    assert {m[STORED_DOC] for m in children} == set(others)


BAD = [
    pytest.param({"$x": 1}, TEXT, r"metadata key '\$x' is reserved by Chroma", id="operator-key"),
    pytest.param(
        {"chroma:document": "a"}, TEXT, r"metadata key 'chroma:document' is reserved by Chroma", id="chroma-key"
    ),
    pytest.param({}, "Text with a lone \ud800 surrogate.", r"lone surrogate '\\ud800' at char 17", id="surrogate-text"),
    pytest.param({"note": "a\udc80"}, TEXT, r"metadata 'note' holds a lone surrogate", id="surrogate-value"),
    # issue #35, finding 4: these came back overwritten by the unit's own, without a word
    pytest.param({"score": "mine"}, TEXT, r"metadata key 'score' is one \w+ sets on every unit", id="served-score"),
    pytest.param({"doc_id": "other"}, TEXT, r"key 'doc_id' .* value 'other' would be overwritten", id="served-doc-id"),
    pytest.param({"start_index": 0}, TEXT, r"Rename the key, e.g. to 'source_start_index'", id="served-offset"),
    # issue #51, finding 5: Chroma stored 2**70 as 1.18e21, and a filter on it found 2**63 - 1
    pytest.param({"m": 2**70}, TEXT, r"metadata 'm' is 1180591620717411303424, past a 64-bit", id="int-past-int64"),
    pytest.param({"m": -(2**63) - 1}, TEXT, r"metadata 'm' is -9223372036854775809", id="int-below-int64"),
]


@pytest.mark.parametrize("design", ["hybrid windows", "parents"])
@pytest.mark.parametrize(("metadata", "text", "message"), BAD)
def test_a_bad_document_is_refused_before_its_batch_writes_anything(
    design: str, metadata: dict[str, Any], text: str, message: str, tmp_path: Path, minilm: Embeddings
) -> None:
    """Issue #34, findings 3 and 10: the store refused the bad document after the batch's update of
    another had written its sentences, and that document's hits were skipped until a re-add."""
    retriever = make("chroma-cosine", design, tmp_path, minilm)
    retriever.add_documents([Document(TEXT, id="upd", metadata={"v": 1})])
    stored = retriever.vectorstore.get(include=["metadatas", "documents"])
    update = Document(TEXT.replace("two years", "three years"), id="upd", metadata={"v": 2})
    with pytest.raises(ValueError, match=rf"Document 'bad'.*{message}"):
        retriever.add_documents([update, Document(text, id="bad", metadata=metadata)])
    assert retriever.vectorstore.get(include=["metadatas", "documents"]) == stored
    assert {d.metadata.get("v") for d in retriever.invoke(QUERY)} == {1}
    assert "two years" in " ".join(d.page_content for d in retriever.invoke(QUERY))


def test_a_title_is_refused_only_where_a_structural_splitter_sets_its_own(tmp_path: Path, minilm: Embeddings) -> None:
    """A loader's ``title`` is the document's; a section splitter's ``title`` is the parent's section."""
    doc = Document(TEXT, id="page", metadata={"title": "Returns policy", "doc_id": "page"})
    store = make_store("memory", tmp_path, minilm)
    whole = BudgetedParentDocumentRetriever(vectorstore=store, docstore=InMemoryStore())
    whole.add_documents([doc])  # its own id under doc_id says what the retriever says
    assert {p.metadata["title"] for p in whole.invoke(QUERY)} == {"Returns policy"}
    sections = BudgetedParentDocumentRetriever(
        vectorstore=make_store("memory", tmp_path, minilm),
        docstore=InMemoryStore(),
        parent_splitter=MarkdownSectionSplitter(),
    )
    with pytest.raises(ValueError, match="Document 'page': metadata key 'title' is one BudgetedParent"):
        sections.add_documents([doc])
    windows = SentenceWindowRetriever(vectorstore=make_store("memory", tmp_path, minilm))
    windows.add_documents([doc])
    assert {w.metadata["title"] for w in windows.invoke(QUERY)} == {"Returns policy"}


class HeadsFail(InMemoryStore):
    """LangChain's in-memory docstore, killed (KeyboardInterrupt) when a write holds one of ``heads``."""

    def __init__(self, heads: set[str]) -> None:
        super().__init__()
        self.heads = heads

    def mset(self, key_value_pairs: Any) -> None:
        pairs = list(key_value_pairs)
        if self.heads & {k for k, _ in pairs}:
            raise KeyboardInterrupt
        super().mset(pairs)


@pytest.mark.parametrize("split", [False, True])
def test_a_first_add_killed_before_its_head_is_deleted_whole(split: bool, tmp_path: Path, minilm: Embeddings) -> None:
    """Issue #34, finding 5: the listing assumed the head parent known, so its children stayed."""
    from langchain_expand import MarkdownSectionSplitter, chroma_store

    head = "fresh.p0" if split else "fresh"
    retriever = BudgetedParentDocumentRetriever(
        vectorstore=chroma_store("children", persist_directory=tmp_path, embeddings=minilm),
        docstore=HeadsFail({head}),
        parent_splitter=MarkdownSectionSplitter(max_level=2) if split else None,
    )
    retriever.add_documents([Document(TEXT, id="kept")])
    with pytest.raises(KeyboardInterrupt):
        retriever.add_documents([Document(TEXT + "\n## More\n\nAnother section of text.\n", id="fresh")])
    assert any(m[STORED_DOC] == "fresh" for m in retriever.vectorstore.get()["metadatas"])
    retriever.delete(["fresh"])
    assert {m[STORED_DOC] for m in retriever.vectorstore.get()["metadatas"]} == {"kept"}
    assert all(not k.startswith("fresh") for k in retriever.docstore.yield_keys())


KEYS = ["acl", "group", "level", "tags", "owner"]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(0, 5),
    st.text("abc", min_size=1, max_size=3),
    st.lists(st.integers(0, 3), max_size=2),
)
OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["x", "x.p1", "x.p0", "x::0", "y"]),
        st.none() | st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=4),
    ),
    min_size=1,
    max_size=6,
)
"""Adds (id, metadata) and deletes (id, None), with ids that look like parent keys and child ids."""


_FOLDERS = tempfile.TemporaryDirectory(prefix="lcx-replace-")
"""Where the property's examples write their stores: removed when the test run ends."""


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS)
def test_every_document_serves_its_latest_metadata_after_any_adds_and_deletes(
    operations: list[tuple[str, dict[str, Any] | None]], minilm: Embeddings
) -> None:
    """Property (issue #34, findings 1 and 2): after any sequence of adds and deletes, each
    document serves exactly the metadata of its last add, and a deleted one nothing."""
    from langchain_expand import chroma_store

    folder = Path(tempfile.mkdtemp(dir=_FOLDERS.name))
    retrievers = [
        SentenceWindowRetriever(
            vectorstore=chroma_store("windows", persist_directory=folder, embeddings=minilm),
            lexical=LexicalIndex(folder / "lexical.sqlite"),
        ),
        BudgetedParentDocumentRetriever(
            vectorstore=chroma_store("children", persist_directory=folder, embeddings=minilm), docstore=InMemoryStore()
        ),
    ]
    latest: dict[str, dict[str, Any] | None] = {}
    for doc_id, metadata in operations:
        for retriever in retrievers:
            if metadata is None:
                retriever.delete([doc_id])
            else:
                retriever.add_documents([Document(TEXT, id=doc_id, metadata=metadata)])
        latest[doc_id] = metadata
    for retriever in retrievers:
        for doc_id, metadata in latest.items():
            units = retriever.invoke(QUERY, filter={STORED_DOC: doc_id})
            if metadata is None:
                assert units == [], doc_id
            else:
                assert units, doc_id
                assert all({k: v for k, v in u.metadata.items() if k in KEYS} == metadata for u in units), (
                    doc_id,
                    units,
                )
