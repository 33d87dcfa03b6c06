"""LangChain's own standard retriever tests, with real MiniLM embeddings, on every store the README names."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from langchain_classic.indexes import SQLRecordManager
from langchain_core.documents import Document
from langchain_core.indexing import index
from langchain_tests.integration_tests import RetrieversIntegrationTests
from langchain_tests.integration_tests.indexer import AsyncDocumentIndexTestSuite, DocumentIndexerTestSuite

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    EmbeddingsReranker,
    MarkdownSectionSplitter,
    RerankThenExpand,
    SentenceWindowRetriever,
    SQLDocStore,
    default_embeddings,
)

from .conftest import EmbeddedOnce, load_docs
from .stores import make_store

pytestmark = pytest.mark.integration  # the embedding model, subprocesses or a server


_FOLDERS = tempfile.TemporaryDirectory(prefix="lcx-standard-")
"""Where this module's stores are written: removed when the test run ends (a run left 48 folders in /tmp)."""

STORES = ["chroma-cosine", "chroma-l2", "faiss-l2", "qdrant-cosine", "memory"]
"""The embedded default (Chroma, cosine) and every other store the README names."""


@cache
def _indexed(kind: str, retriever: str) -> dict[str, Any]:
    """A store of ``kind`` holding the E-Manual, indexed by ``retriever`` once per session."""
    folder = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=_FOLDERS.name))
    text = load_docs("emanual")[0]["text"][:9000]
    parts: dict[str, Any] = {"vectorstore": make_store(kind, folder, default_embeddings())}
    if retriever == "parents":
        parts |= {
            "docstore": SQLDocStore(f"sqlite:///{folder}/docstore.sqlite"),
            "parent_splitter": MarkdownSectionSplitter(max_level=2),
        }
        BudgetedParentDocumentRetriever(**parts).add_documents([Document(text, id="manual")])
    else:
        SentenceWindowRetriever(**parts).add_documents([Document(text, id="manual")])
    return parts


def _standard_tests(kind: str, retriever: type[Any], *, reranked: bool = False) -> type[RetrieversIntegrationTests]:
    """LangChain's retriever suite on ``retriever`` over a store of ``kind``; or on ``RerankThenExpand`` over it."""
    role = "parents" if retriever is BudgetedParentDocumentRetriever else "windows"

    class OnStore(RetrieversIntegrationTests):
        @property
        def retriever_constructor(self) -> type[Any]:
            return RerankThenExpand if reranked else retriever

        @property
        def retriever_constructor_params(self) -> dict[str, Any]:
            if not reranked:
                return {**_indexed(kind, role), "k": 4}
            inner = retriever(**_indexed(kind, role))
            return {"retriever": inner, "reranker": EmbeddingsReranker(embeddings=_minilm()), "k": 4}

        @property
        def retriever_query_example(self) -> str:
            return "how do I connect the remote control to the TV"

    return OnStore


for _retriever in (SentenceWindowRetriever, BudgetedParentDocumentRetriever):
    for _kind in STORES:
        _name = f"Test{_retriever.__name__}On{_kind.title().replace('-', '')}"
        globals()[_name] = type(_name, (_standard_tests(_kind, _retriever),), {})
    _name = f"TestRerankThenExpandOver{_retriever.__name__}"  # a retriever this package ships too
    globals()[_name] = type(_name, (_standard_tests("chroma-cosine", _retriever, reranked=True),), {})


# -- LangChain's indexing API: both retrievers are a DocumentIndex ------------------------------

_collections = iter(range(1_000_000))


def _fresh(retriever: type[Any], kind: str = "chroma-cosine", **fields: Any) -> Any:
    """An empty retriever of ``retriever`` on a new store of ``kind``."""
    folder = Path(tempfile.mkdtemp(prefix=f"index-{kind}-", dir=_FOLDERS.name))
    parts: dict[str, Any] = {"vectorstore": make_store(kind, folder, _minilm()), **fields}
    if retriever is BudgetedParentDocumentRetriever:
        parts["docstore"] = SQLDocStore(f"sqlite:///{folder}/docstore-{next(_collections)}.sqlite")
    return retriever(**parts)


@cache
def _minilm() -> Any:
    return EmbeddedOnce(default_embeddings())


def _as_index(retriever: type[Any], suite: type[Any]) -> type[Any]:
    """LangChain's ``suite`` on a fresh ``retriever`` each test."""

    class AsIndex(suite):  # type: ignore[misc, valid-type]
        @pytest.fixture
        def index(self) -> Any:
            return _fresh(retriever)

    return AsIndex


for _retriever in (SentenceWindowRetriever, BudgetedParentDocumentRetriever):
    for _suite in (DocumentIndexerTestSuite, AsyncDocumentIndexTestSuite):
        _name = f"Test{_retriever.__name__}As{_suite.__name__.removesuffix('TestSuite')}"
        globals()[_name] = type(_name, (_as_index(_retriever, _suite),), {})


@pytest.mark.parametrize("retriever", [SentenceWindowRetriever, BudgetedParentDocumentRetriever])
@pytest.mark.parametrize("cleanup", ["incremental", "full"])
def test_langchain_index_with_a_record_manager_writes_only_what_changed_and_cleans_up(
    retriever: type[Any], cleanup: str, tmp_path: Path
) -> None:
    # issue #52, finding 7: index(docs, record_manager, retriever) raised "Vectorstore should be
    # either a VectorStore or a DocumentIndex"; given retriever.vectorstore it wrote whole
    # documents into the sentence collection, which the retriever never read
    manual = load_docs("emanual")[0]["text"]
    pages = [manual[at : at + 1500] for at in range(0, 6000, 1500)]
    docs = [Document(page, metadata={"source": f"page-{n}"}) for n, page in enumerate(pages)]
    target = _fresh(retriever)
    records = SQLRecordManager(f"test/{cleanup}", db_url=f"sqlite:///{tmp_path}/records.sqlite")
    records.create_schema()

    first = index(docs, records, target, cleanup=cleanup, source_id_key="source", key_encoder="sha256")
    assert first == {"num_added": 4, "num_updated": 0, "num_skipped": 0, "num_deleted": 0}
    assert {d.metadata["source"] for d in target.get(records.list_keys())} == {f"page-{n}" for n in range(4)}
    question = "How do I turn on Wireless PowerShare?"
    answered = target.invoke(question, k=2)
    assert answered
    assert all(d.metadata["source"].startswith("page-") for d in answered)
    assert (
        index(docs, records, target, cleanup=cleanup, source_id_key="source", key_encoder="sha256")["num_skipped"] == 4
    )

    edited = [docs[0], Document(pages[1] + " Edited.", metadata={"source": "page-1"}), *docs[2:3]]  # page-3 gone
    again = index(edited, records, target, cleanup=cleanup, source_id_key="source", key_encoder="sha256")
    # incremental removes the old version of an edited source; full also removes a source not given
    assert again == {
        "num_added": 1,
        "num_updated": 0,
        "num_skipped": 2,
        "num_deleted": 1 if cleanup == "incremental" else 2,
    }
    kept = target.get(records.list_keys())
    assert sorted(d.metadata["source"] for d in kept) == ["page-0", "page-1", "page-2"] + (
        ["page-3"] if cleanup == "incremental" else []
    )
    assert target.get([d.id for d in kept if d.metadata["source"] == "page-1"])[0].page_content.endswith("Edited.")
    stored = {d.metadata["doc_id"] for q in (question, "remote control", "camera") for d in target.invoke(q, k=8)}
    assert stored <= set(records.list_keys())  # nothing served that the record manager does not list
