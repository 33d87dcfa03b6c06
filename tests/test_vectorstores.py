"""Both retrievers on every store the README names: Chroma (three distances), FAISS (two),
Qdrant's embedded local mode (two), and LangChain's ``InMemoryVectorStore``.

Each store is real; the claims are the same on each: relevance in [0, 1] and equal to the
cosine similarity of the query and the matched text as embedded (with its context), re-adding replaces (no duplicate,
metadata updated), delete removes, and the results are the same windows and parents on
every store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import VectorStore

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    LexicalIndex,
    MarkdownSectionSplitter,
    SentenceSplitter,
    SentenceWindowRetriever,
    StructuralPrefix,
    TokenCounter,
)
from langchain_expand.store.adapters import adapt

from .conftest import load_docs
from .stores import KINDS, make_store

pytestmark = pytest.mark.integration  # the embedding model

QUERY = "how do I connect the remote control to the TV"
SLICE = 9000
"""Characters of the E-Manual indexed (about 110 sentences): enough for a ranking, quick on every store."""


def manual(**metadata: Any) -> list[Document]:
    return [Document(d["text"][:SLICE], id=d["doc_id"], metadata=dict(metadata)) for d in load_docs("emanual")]


def cosine(embeddings: Embeddings, query: str, text: str) -> float:
    a = np.asarray(embeddings.embed_query(query))
    b = np.asarray(embeddings.embed_documents([text])[0])
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings) -> dict[str, Any]:
    """What the embedded default (Chroma, cosine) returns: every other store must match it."""
    retriever = SentenceWindowRetriever(vectorstore=make_store("chroma-cosine", tmp_path_factory.mktemp("ref"), minilm))
    retriever.add_documents(manual())
    return {  # texts, not positions: the manual repeats sentences, and stores break ties their own way
        "hits": texts(retriever.invoke(QUERY, expand=False, k=6)),
        "guided": texts(retriever.invoke(QUERY, max_tokens=400)),
    }


def embedded_texts(text: str) -> dict[int, str]:
    """What the window retriever embeds for each sentence of ``text`` (its context, then it), by start offset."""
    spans = SentenceSplitter(token_counter=TokenCounter())(text)
    prefixes = StructuralPrefix()(text, spans)
    return {start: prefix + text[start:end] for prefix, (start, end) in zip(prefixes, spans, strict=True)}


def texts(docs: list[Document]) -> list[str]:
    return [d.page_content for d in docs]


@pytest.mark.parametrize("kind", KINDS)
def test_windows_on_every_store(kind: str, tmp_path: Path, minilm: Embeddings, reference: dict[str, Any]) -> None:
    retriever = SentenceWindowRetriever(vectorstore=make_store(kind, tmp_path, minilm))
    retriever.add_documents(manual(acl="public"))

    matches = retriever.invoke(QUERY, expand=False, k=6)
    assert texts(matches) == reference["hits"]
    embedded = embedded_texts(manual()[0].page_content)
    for m in matches:
        as_embedded = embedded[m.metadata["start_index"]]
        assert as_embedded.endswith(m.page_content)
        assert 0.0 <= m.metadata["score"] <= 1.0  # the cosine of the query and the sentence as embedded
        assert m.metadata["score"] == pytest.approx(cosine(minilm, QUERY, as_embedded), abs=2e-3)
    guided = retriever.invoke(QUERY, max_tokens=400)
    assert texts(guided) == reference["guided"]

    retriever.add_documents(manual(acl="secret"))  # same text, new metadata: replaced, not doubled
    again = retriever.invoke(QUERY, expand=False, k=6)
    assert texts(again) == reference["hits"]
    assert {m.metadata["acl"] for m in again} == {"secret"}

    retriever.delete([d.id for d in manual() if d.id])
    assert retriever.invoke(QUERY, k=4) == []


@pytest.mark.parametrize("kind", KINDS)
def test_parents_on_every_store(kind: str, tmp_path: Path, minilm: Embeddings) -> None:
    retriever = BudgetedParentDocumentRetriever(
        vectorstore=make_store(kind, tmp_path, minilm),
        docstore=InMemoryStore(),
        parent_splitter=MarkdownSectionSplitter(max_level=2),
        k=3,
    )
    retriever.add_documents(manual())
    parents = retriever.invoke(QUERY)
    assert len({p.metadata["parent_id"] for p in parents}) == 3
    text = manual()[0].page_content
    for parent in parents:
        best = parent.metadata["children"][0]
        span = (best["start_index"], best["end_index"])
        as_embedded = StructuralPrefix()(text, [span])[0] + text[span[0] : span[1]]  # the child under its heading
        assert 0.0 <= best["score"] <= 1.0
        assert best["score"] == pytest.approx(cosine(minilm, QUERY, as_embedded), abs=2e-3)
    retriever.add_documents(manual())  # unchanged: nothing rewritten, nothing doubled
    assert [p.metadata["parent_id"] for p in retriever.invoke(QUERY)] == [p.metadata["parent_id"] for p in parents]
    retriever.delete([d.id for d in manual() if d.id])
    assert retriever.invoke(QUERY) == []


def doc_id_filter(kind: str, doc_id: str) -> Any:
    """``doc_id == doc_id`` in each store's own filter syntax."""
    if kind.startswith("qdrant"):
        from qdrant_client import models

        return models.Filter(must=[models.FieldCondition(key="metadata.doc_id", match=models.MatchValue(value=doc_id))])
    if kind == "memory":
        return lambda doc: doc.metadata["doc_id"] == doc_id
    if kind == "faiss-ip":  # FAISS takes a function of the metadata as well as a dict
        return lambda metadata: metadata["doc_id"] == doc_id
    return {"doc_id": {"$eq": doc_id}} if kind == "chroma-l2" else {"doc_id": doc_id}


@pytest.mark.parametrize("kind", KINDS)
def test_a_filter_on_doc_id_finds_that_document_on_every_store(kind: str, tmp_path: Path, minilm: Embeddings) -> None:
    """Issue #35, finding 4: ``filter={"doc_id": ...}`` found nothing, as records store the id as ``lcx_doc``."""
    text = manual()[0].page_content
    docs = [Document(text, id="first"), Document(text[: SLICE // 2], id="second", metadata={"doc_id": "second"})]
    windows = SentenceWindowRetriever(vectorstore=make_store(kind, tmp_path / "w", minilm))
    parents = BudgetedParentDocumentRetriever(
        vectorstore=make_store(kind, tmp_path / "p", minilm), docstore=InMemoryStore(), k=2
    )
    for retriever in (windows, parents):
        retriever.add_documents(docs)
        for doc_id in ("first", "second"):
            found = retriever.invoke(QUERY, filter=doc_id_filter(kind, doc_id))
            assert found, (retriever, doc_id)
            assert {d.metadata["doc_id"] for d in found} == {doc_id}


@pytest.mark.parametrize("kind", ["faiss-l2", "chroma-cosine"])
def test_a_filtered_query_with_a_lexical_index_keeps_to_its_document(
    kind: str, tmp_path: Path, minilm: Embeddings
) -> None:
    """Hybrid within the filter's documents where the store lists them (Chroma); else the store's own filter, dense."""
    text = manual()[0].page_content
    docs = [Document(text, id="first"), Document(text[: SLICE // 2], id="second")]
    retriever = SentenceWindowRetriever(
        vectorstore=make_store(kind, tmp_path, minilm), lexical=LexicalIndex(tmp_path / "lexical.sqlite")
    )
    retriever.add_documents(docs)
    for doc_id in ("first", "second"):
        found = retriever.invoke(QUERY, max_tokens=500, filter={"doc_id": doc_id})
        assert found, doc_id
        assert {d.metadata["doc_id"] for d in found} == {doc_id}


class NoReads(VectorStore):
    """A store that embeds and searches but cannot read a record by id, nor delete one."""

    def __init__(self, embeddings: Embeddings) -> None:
        self.inner = make_store("memory", Path("."), embeddings)

    def add_texts(self, texts: Any, metadatas: Any = None, **kwargs: Any) -> list[str]:
        return self.inner.add_texts(texts, metadatas, **kwargs)

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return self.inner.similarity_search(query, k, **kwargs)

    @classmethod
    def from_texts(cls, texts: Any, embedding: Embeddings, metadatas: Any = None, **kwargs: Any) -> NoReads:
        raise NotImplementedError


def test_a_store_without_reads_by_id_fails_when_the_retriever_is_built(minilm: Embeddings) -> None:
    store = NoReads(minilm)
    for make in (
        lambda: SentenceWindowRetriever(vectorstore=store),
        lambda: BudgetedParentDocumentRetriever(vectorstore=store, docstore=InMemoryStore()),
    ):
        with pytest.raises(TypeError, match="does not implement `get_by_ids` and `delete`"):
            make()


@pytest.mark.parametrize(
    ("kind", "raw", "relevance"),
    [
        ("chroma-cosine", 0.3, 0.7),  # 1 - cos distance
        ("chroma-l2", 0.6, 0.7),  # squared L2 of unit vectors = 2 - 2 cos
        ("chroma-ip", 0.3, 0.7),  # 1 - dot
        ("faiss-l2", 0.6, 0.7),
        ("faiss-ip", 0.7, 0.7),
        ("qdrant-cosine", 0.7, 0.7),
        ("qdrant-euclid", 0.6**0.5, 0.7),  # L2, not squared
        ("memory", 0.7, 0.7),
        ("chroma-l2", 3.9, 0.0),  # pointing away: clamped at 0, not negative
        ("faiss-ip", -0.2, 0.0),
    ],
)
def test_each_distance_becomes_the_cosine(
    kind: str, raw: float, relevance: float, tmp_path: Path, minilm: Embeddings
) -> None:
    store = adapt(make_store(kind, tmp_path, minilm), "test")
    assert store.relevance(raw) == pytest.approx(relevance)
