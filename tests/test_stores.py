"""The default Chroma collection against an exact, brute-force top-k."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand import SentenceWindowRetriever, chroma_store
from langchain_expand.store.adapters.base import nearest, tie_key

from .conftest import load_queries

pytestmark = pytest.mark.integration  # the embedding model, subprocesses or a server


def test_default_collection_finds_the_exact_top_k(qmsum_index: SentenceWindowRetriever, minilm: Embeddings) -> None:
    collection = qmsum_index.vectorstore._collection  # type: ignore[attr-defined]
    stored = collection.get(include=["embeddings"])
    ids = np.array(stored["ids"])
    vectors = np.asarray(stored["embeddings"], dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    k = 8
    recalls = []
    for query in load_queries("qmsum"):
        q = np.asarray(minilm.embed_query(query["query"]), dtype=np.float32)
        sims = vectors @ (q / np.linalg.norm(q))
        kth = np.sort(sims)[-k]
        found = qmsum_index.vectorstore.similarity_search_with_relevance_scores(query["query"], k=k)
        # Transcripts repeat sentences ("OK ."): identical vectors tie, so a hit counts
        # when it scores as high as the exact k-th, whichever duplicate it is.
        by_id = dict(zip(ids, sims, strict=True))
        recalls.append(sum(by_id[d.id] >= kth - 1e-5 for d, _ in found) / k)
    assert min(recalls) >= 0.75
    assert float(np.mean(recalls)) >= 0.97


def test_relevance_is_cosine_similarity(qmsum_index: SentenceWindowRetriever, minilm: Embeddings) -> None:
    (doc, score), *_ = qmsum_index.vectorstore.similarity_search_with_relevance_scores("remote control", k=1)
    a = np.asarray(minilm.embed_query("remote control"))
    [(_, b)] = qmsum_index._vectors.with_vectors([str(doc.id)])  # the vector stored for it
    assert abs(score - float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))) < 1e-4


def test_vectors_of_two_lengths_are_refused_by_chroma_and_nothing_is_stored(tmp_path: Path, minilm: Embeddings) -> None:
    class Ragged(Embeddings):
        """MiniLM's vectors, the last of several cut short: what no float32 array can hold."""

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            vectors = minilm.embed_documents(texts)
            return [*vectors[:-1], vectors[-1][:100]] if len(vectors) > 1 else vectors

        def embed_query(self, text: str) -> list[float]:
            return minilm.embed_query(text)

    store = chroma_store("ragged", persist_directory=tmp_path, embeddings=Ragged())
    retriever = SentenceWindowRetriever(vectorstore=store)
    with pytest.raises(Exception, match="Inconsistent dimensions"):  # Chroma's own message, not NumPy's
        retriever.add_documents([Document("One sentence here. A second one. A third. And a fourth one.", id="a")])
    assert store.get()["ids"] == []


def test_a_tie_straddling_the_kth_goes_by_position_however_many_ids_are_asked(
    qmsum_index: SentenceWindowRetriever,
) -> None:
    # The meetings repeat short sentences ("OK ."), each embedded after its speaker: searching
    # with one copy's own vector ties every copy with the same vector at distance 0, so any k
    # below their number cuts through the tie.
    stored = qmsum_index.vectorstore._collection.get(include=["embeddings"])  # type: ignore[attr-defined]
    keys = [np.asarray(v, dtype=np.float32).tobytes() for v in stored["embeddings"]]
    key = Counter(keys).most_common(1)[0][0]
    copies = sorted((tie_key(i), i) for i, k in zip(stored["ids"], keys, strict=True) if k == key)
    assert len(copies) >= 6
    vector = stored["embeddings"][keys.index(key)]
    adapter = qmsum_index._vectors

    def fetch(n: int) -> list[tuple[str, float]]:  # the same search, asking k + 1 first
        got = adapter._query(vector, n, {}, ["distances"])  # type: ignore[attr-defined]
        return list(zip(got["ids"][0], got["distances"][0], strict=True))

    for k in (2, len(copies) // 2, len(copies) - 1):
        expected = [i for _, i in copies[:k]]
        assert [i for i, _ in adapter.search_ids(vector, k)] == expected  # TIE_SPARE more ids asked
        assert [i for i, _ in nearest(fetch, k, str)] == expected
