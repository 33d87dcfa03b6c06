"""The contract every retriever of the library keeps, written once and run on each (issue #33).

A unit is a stretch of one source document (``page_content == source[start_index:end_index]``)
that carries its document's metadata, its relevance in [0, 1] and its exact token count; a
budget bounds the joined context; ``k`` bounds the count; no text is sent twice; re-adding a
document replaces it and deleting removes it; async answers as sync; an unknown argument is an
error naming the closest valid one. Real Chroma, MiniLM, tiktoken.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    LexicalIndex,
    MarkdownSectionSplitter,
    SentenceWindowRetriever,
    SQLDocStore,
    TokenCounter,
    chroma_store,
)

from .conftest import load_docs

pytestmark = pytest.mark.integration  # the embedding model

DESIGNS = ["windows", "hybrid windows", "parents"]
QUERY = "how do I pair the remote control with the TV"
COUNTER = TokenCounter()
_names = itertools.count()


def make(design: str, folder: Path, embeddings: Embeddings) -> Any:
    store = chroma_store(f"contract-{next(_names)}", persist_directory=folder / "chroma", embeddings=embeddings)
    if design == "parents":
        return BudgetedParentDocumentRetriever(
            vectorstore=store,
            docstore=SQLDocStore(f"sqlite:///{folder / 'parents.sqlite'}"),
            parent_splitter=MarkdownSectionSplitter(),
        )
    lexical = LexicalIndex(folder / "lexical.sqlite") if design == "hybrid windows" else None
    return SentenceWindowRetriever(vectorstore=store, lexical=lexical)


@pytest.fixture(scope="module", params=DESIGNS)
def indexed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings) -> Any:
    retriever = make(request.param, tmp_path_factory.mktemp("contract"), minilm)
    docs = [Document(d["text"][:12_000], id=d["doc_id"], metadata={"acl": "public"}) for d in load_docs("emanual")]
    retriever.add_documents(docs)
    return retriever, {d.id: d.page_content for d in docs}


def test_every_unit_is_a_stretch_of_its_source_with_its_metadata_score_and_count(indexed: Any) -> None:
    retriever, sources = indexed
    units = retriever.invoke(QUERY)
    assert units
    for unit in units:
        m = unit.metadata
        assert unit.page_content == sources[m["doc_id"]][m["start_index"] : m["end_index"]]
        assert m["acl"] == "public"
        assert 0.0 <= m["score"] <= 1.0
        assert m["tokens"] == COUNTER(unit.page_content)


@pytest.mark.parametrize("budget", [120, 400, 1500])
def test_the_joined_context_fits_the_budget_and_k_bounds_the_count(indexed: Any, budget: int) -> None:
    retriever, _ = indexed
    units = retriever.invoke(QUERY, max_tokens=budget)
    assert units
    assert COUNTER("\n\n".join(u.page_content for u in units)) <= budget
    assert len(retriever.invoke(QUERY, k=2)) <= 2
    assert len(retriever.invoke(QUERY, k=2, max_tokens=budget)) <= 2


def test_no_text_is_sent_twice(indexed: Any) -> None:
    retriever, _ = indexed
    units = retriever.invoke(QUERY, k=8)
    spans = sorted((u.metadata["doc_id"], u.metadata["start_index"], u.metadata["end_index"]) for u in units)
    for (doc_a, _, end_a), (doc_b, start_b, _) in itertools.pairwise(spans):
        assert doc_a != doc_b or end_a <= start_b


def test_async_answers_as_sync_and_an_unknown_argument_names_the_closest(indexed: Any) -> None:
    retriever, _ = indexed
    sync = retriever.invoke(QUERY, k=3, max_tokens=500)
    assert asyncio.run(retriever.ainvoke(QUERY, k=3, max_tokens=500)) == sync
    with pytest.raises(ValueError, match=r"unknown argument `max_token`\. Did you mean `max_tokens`"):
        retriever.invoke(QUERY, max_token=500)


@pytest.mark.parametrize("design", DESIGNS)
def test_re_adding_replaces_and_deleting_removes(design: str, tmp_path: Path, minilm: Embeddings) -> None:
    retriever = make(design, tmp_path, minilm)
    old = "## Pairing\n\nHold the Back and Play buttons for three seconds to pair the remote control with the TV.\n"
    new = "## Pairing\n\nPress the Home button for five seconds to pair the remote control with the TV.\n"
    retriever.add_documents([Document(old, id="remote"), Document("## Bixby\n\nSay Hi Bixby to start.\n", id="bixby")])
    retriever.add_documents([Document(new, id="remote")])
    served = [u.page_content for u in retriever.invoke(QUERY) if u.metadata["doc_id"] == "remote"]
    assert served
    assert all(text in new for text in served)
    retriever.delete(["remote"])
    assert all(u.metadata["doc_id"] == "bixby" for u in retriever.invoke(QUERY))
