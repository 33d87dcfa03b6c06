"""What a well-kept LangChain package does (issue #35, finding 12): copies, pickles, factories, traces.

On real parts: Chroma and the docstore on disk, the MiniLM model, LangChain's callback system.
"""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    LexicalIndex,
    MarkdownSectionSplitter,
    SentenceWindowRetriever,
    chroma_store,
)

from .conftest import CountingEmbeddings, load_docs

pytestmark = pytest.mark.integration  # the embedding model

QUERY = "how do I pair the remote control with the TV"
SLICE = 6000


def manual() -> list[Document]:
    return [Document(d["text"][:SLICE], id=d["doc_id"], metadata={"acl": "public"}) for d in load_docs("emanual")]


def texts(docs: list[Document]) -> list[str]:
    return [d.page_content for d in docs]


@pytest.fixture
def windows(tmp_path: Path, minilm: Embeddings) -> SentenceWindowRetriever:
    retriever = SentenceWindowRetriever(
        vectorstore=chroma_store("windows", persist_directory=tmp_path, embeddings=minilm)
    )
    retriever.add_documents(manual())
    return retriever


def test_a_deep_copy_is_a_second_retriever_over_the_same_index(windows: SentenceWindowRetriever) -> None:
    """It raised ``cannot pickle '_thread.lock'`` (Chroma's client, the retriever's locks)."""
    twin = copy.deepcopy(windows)
    assert twin.vectorstore is windows.vectorstore  # the same index, not a copy of a database client
    assert texts(twin.invoke(QUERY)) == texts(windows.invoke(QUERY))
    twin.k, twin.merge = 1, False  # its settings are its own
    assert (windows.k, windows.merge) == (None, True)
    assert len(twin.invoke(QUERY)) == 1
    assert len(windows.invoke(QUERY)) > 1
    twin.add_documents([Document("Bixby answers questions about the weather.", id="bixby")])  # a write shows in both
    assert any(d.metadata["doc_id"] == "bixby" for d in windows.invoke("Bixby weather", k=8))


def test_a_pickled_retriever_answers_as_before_over_stores_that_pickle(tmp_path: Path, minilm: Embeddings) -> None:
    windows = SentenceWindowRetriever(vectorstore=InMemoryVectorStore(minilm), max_tokens=300)
    parents = BudgetedParentDocumentRetriever(
        vectorstore=InMemoryVectorStore(minilm), docstore=InMemoryStore(), parent_splitter=MarkdownSectionSplitter()
    )
    for retriever in (windows, parents):
        retriever.add_documents(manual())
        loaded = pickle.loads(pickle.dumps(retriever))
        assert type(loaded) is type(retriever)
        assert texts(loaded.invoke(QUERY)) == texts(retriever.invoke(QUERY))
        assert loaded.invoke(QUERY)  # not an empty answer twice


def test_pickling_over_a_chroma_client_names_the_field_and_the_way_round(windows: SentenceWindowRetriever) -> None:
    with pytest.raises(TypeError, match=r"SentenceWindowRetriever\.vectorstore \(Chroma\) cannot be pickled.*"):
        pickle.dumps(windows)


class Started(BaseCallbackHandler):
    """What LangChain's callback system hands a tracer (LangSmith's among them) when a retriever starts."""

    def __init__(self) -> None:
        self.metadata: list[dict[str, Any]] = []

    def on_retriever_start(
        self, serialized: dict[str, Any], query: str, *, run_id: UUID, metadata: dict[str, Any] | None = None, **_: Any
    ) -> None:
        self.metadata.append(dict(metadata or {}))


def test_a_trace_names_the_store_the_embedding_and_the_calls_k_and_budget(windows: SentenceWindowRetriever) -> None:
    started = Started()
    windows.invoke(QUERY, k=3, max_tokens=400, config={"callbacks": [started]})
    windows.invoke(QUERY, config={"callbacks": [started]})
    first, second = started.metadata
    assert first["ls_retriever_name"] == "sentencewindow"
    assert first["ls_vector_store_provider"] == "Chroma"
    assert first["ls_embedding_provider"] == type(windows.vectorstore.embeddings).__name__
    assert (first["k"], first["max_tokens"]) == (3, 400)
    assert (second["k"], second["max_tokens"]) == (windows.k, windows.max_tokens)


@pytest.mark.parametrize("cls", [SentenceWindowRetriever, BudgetedParentDocumentRetriever])
def test_from_texts_builds_on_the_embedded_defaults_and_reopens_without_embedding_again(
    cls: Any, tmp_path: Path, minilm: Embeddings
) -> None:
    counting = CountingEmbeddings(minilm)
    docs = manual()
    first = cls.from_texts(
        texts(docs),
        [d.metadata for d in docs],
        ids=[d.id for d in docs],
        persist_directory=tmp_path,
        embeddings=counting,
    )
    assert counting.documents_embedded > 0
    answer = first.invoke(QUERY)
    assert answer
    assert {d.metadata["acl"] for d in answer} == {"public"}
    embedded = counting.documents_embedded
    again = cls.from_documents(docs, persist_directory=tmp_path, embeddings=counting)  # a restart
    assert counting.documents_embedded == embedded  # unchanged documents are not embedded again
    assert texts(again.invoke(QUERY)) == texts(answer)
    assert again.lexical is not None  # BM25 as the README's settings have it, in a table of its own
    assert again.lexical.claim(None) == ("sentences" if cls is SentenceWindowRetriever else "children")
    with pytest.raises(TypeError, match="builds vectorstore itself"):
        cls.from_documents(docs, persist_directory=tmp_path, vectorstore=first.vectorstore)
    with pytest.raises(ValueError, match="got 2 texts and 1 ids"):
        cls.from_texts(["a.", "b."], ids=["a"], persist_directory=tmp_path)
    # LangChain's VectorStore.from_documents names its model `embedding`: the error names ours, before any write
    for near in ("embedding", "embedding_function"):
        with pytest.raises(ValueError, match=f"unknown argument `{near}`. Did you mean `embeddings`"):
            cls.from_documents(docs, persist_directory=tmp_path / "near", **{near: counting})
    assert not (tmp_path / "near").exists()


def test_both_retrievers_from_documents_share_a_folder(tmp_path: Path, minilm: Embeddings) -> None:
    docs = manual()
    windows = SentenceWindowRetriever.from_documents(docs, persist_directory=tmp_path, embeddings=minilm)
    before = windows.invoke(QUERY, k=2)
    parents = BudgetedParentDocumentRetriever.from_documents(docs, persist_directory=tmp_path, embeddings=minilm)
    reopened = SentenceWindowRetriever.from_documents(docs, persist_directory=tmp_path, embeddings=minilm)
    assert reopened.invoke(QUERY, k=2) == before  # the parents' rows touched none of the windows'
    assert parents.invoke(QUERY, k=1)
    tables = {r.lexical.table for r in (windows, parents) if isinstance(r.lexical, LexicalIndex)}
    assert tables == {"sentences", "children"}


@pytest.mark.filterwarnings("ignore:The function `loads` is in beta")
def test_the_runnables_round_trip_through_langchains_serialisation(windows: SentenceWindowRetriever) -> None:
    from langchain_core.load import dumps, loads
    from langchain_core.prompts import ChatPromptTemplate, HumanMessagePromptTemplate, PromptTemplate
    from langchain_core.prompts import SystemMessagePromptTemplate as System

    from langchain_expand import FitToBudget, MergeOverlaps

    prompt = ChatPromptTemplate.from_messages([("system", "Answer from:\n{context}"), ("human", "{question}")])
    runnables = [MergeOverlaps(gap=1), FitToBudget(max_tokens=250, reserve=20, prompt=prompt)]
    allowed = [MergeOverlaps, FitToBudget, ChatPromptTemplate, PromptTemplate, HumanMessagePromptTemplate, System]
    units = windows.invoke(QUERY, merge=False, k=6)
    for runnable in runnables:
        loaded = loads(dumps(runnable), valid_namespaces=["langchain_expand"], allowed_objects=allowed)
        assert loaded == runnable
    merge, fit = runnables
    again = loads(dumps(fit), valid_namespaces=["langchain_expand"], allowed_objects=allowed)
    asked = {"question": QUERY, "context": merge.invoke(units)}
    assert again.invoke(asked) == fit.invoke(asked)
