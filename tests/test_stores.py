"""The default Chroma collection against an exact, brute-force top-k."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_expand import SentenceWindowRetriever, chroma_store
from langchain_expand.store.adapters import adapt
from langchain_expand.store.adapters.base import matched
from langchain_expand.store.adapters.chroma import chroma_ef_search
from langchain_expand.store.adapters.ties import TIE_GROWTH, nearest, tie_key
from langchain_expand.store.search import VectorSearch

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


def test_a_tie_is_completed_within_chromas_beam_and_no_further(
    tmp_path: Path, minilm: Embeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Sixty copies of one line tie at distance 0 from its own vector, more than a beam of 16
    # looks at. A search for 4 asks 5, then the whole beam, and orders what the beam found:
    # asking further would be another search (at 1M sentences, one 25x as slow).
    store = chroma_store("plateau", persist_directory=tmp_path, embeddings=minilm, ef_search=16)
    lines = ["OK ."] * 60 + [f"Item {i} is on the agenda for the design meeting." for i in range(40)]
    store.add_texts(lines, ids=[f"line-{i:03d}" for i in range(len(lines))])
    adapter = adapt(store, "test")
    assert adapter.beam == 16  # type: ignore[attr-defined]
    vector = minilm.embed_query("OK .")
    query = adapter._query  # type: ignore[attr-defined]
    asked: list[int] = []

    def fetch(n: int) -> list[tuple[str, float]]:
        asked.append(n)
        got = query(vector, n, {}, ["distances"])
        return list(zip(got["ids"][0], got["distances"][0], strict=True))

    monkeypatch.setattr(adapter, "_query", lambda v, n, kw, include: asked.append(n) or query(v, n, kw, include))
    found = [d.id for d, _ in adapter.search("", vector, 4)]
    assert asked == [5, 16]
    beam = fetch(16)
    assert [i for i, _ in sorted(beam, key=lambda p: (round(p[1], 6), tie_key(p[0])))[:4]] == found
    asked.clear()
    assert [i for i, _ in nearest(fetch, 4, str, beam=16)] == found
    assert asked == [5, 16]
    asked.clear()
    nearest(fetch, 4, str)  # a store whose beam is not known: the tie is completed however far it reaches
    assert asked[:2] == [5, 40]


def test_within_chromas_beam_the_first_k_of_a_larger_search_are_its_search_for_k(
    qmsum_index: SentenceWindowRetriever, minilm: Embeddings
) -> None:
    # What a search read ahead rests on (StoreAdapter.nested_up_to): Chroma searches one beam
    # (ef_search, 500 here) for every k up to it, and a tie cut at the k-th goes by position
    # however many are asked. With ties: the meetings' most repeated sentence searched with its
    # own vector (every copy at distance 0); without: the benchmark's queries.
    adapter = qmsum_index._vectors
    assert adapter.nested_up_to == 500 // TIE_GROWTH - 1
    stored = qmsum_index.vectorstore._collection.get(include=["embeddings"])  # type: ignore[attr-defined]
    keys = [np.asarray(v, dtype=np.float32).tobytes() for v in stored["embeddings"]]
    tied = list(stored["embeddings"][keys.index(Counter(keys).most_common(1)[0][0])])
    assert Counter(keys).most_common(1)[0][1] >= 6
    for vector in [tied, *[minilm.embed_query(q["query"]) for q in load_queries("qmsum")[:4]]]:
        ahead = adapter.search("", vector, adapter.nested_up_to)
        for k in (1, 2, 4, 8, 16, 32, adapter.nested_up_to):
            assert [(d.id, s) for d, s in ahead[:k]] == [(d.id, s) for d, s in adapter.search("", vector, k)]


def test_a_search_read_ahead_asks_the_store_once_for_the_rounds_after_it(
    qmsum_index: SentenceWindowRetriever, minilm: Embeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The parents' budget asks for children 4, 8, 16, ... in rounds; read ahead, the first search
    # asks as far as the store's first k are its search for k, and the rounds take theirs from it.
    adapter = qmsum_index._vectors
    query = load_queries("qmsum")[0]["query"]
    one_by_one = [VectorSearch(adapter, query)(k) for k in (4, 8, 16, 32)]
    asked: list[int] = []
    search = adapter.search
    monkeypatch.setattr(adapter, "search", lambda q, v, k, **kw: asked.append(k) or search(q, v, k, **kw))
    ahead = VectorSearch(adapter, query, ahead=10_000)
    found = [ahead(k) for k in (4, 8, 16, 32)]
    assert asked == [adapter.nested_up_to]  # no further than the store's first k hold
    assert [[(d.id, s) for d, s in f] for f in found] == [[(d.id, s) for d, s in f] for f in one_by_one]
    assert [matched(f) for f in found] == [4, 8, 16, 32]  # as full as the searches for them: rounds go on
    assert ahead.reached == 32
    memory = adapt(InMemoryVectorStore(minilm), "test")  # its ties cut at k in an order of its own: not read ahead
    assert VectorSearch(memory, query, ahead=10_000).ahead == 0


def test_how_far_a_chroma_search_reads_ahead_follows_its_beam(tmp_path: Path, minilm: Embeddings) -> None:
    # ef_search // TIE_GROWTH - 1: a tie completed at the last place stays within the beam.
    for ef_search, reach in ((500, 61), (100, 11), (8, 0)):
        store = chroma_store(f"beam-{ef_search}", persist_directory=tmp_path, embeddings=minilm, ef_search=ef_search)
        assert adapt(store, "test").nested_up_to == reach
    legacy = SimpleNamespace(_collection=SimpleNamespace(metadata={"hnsw:search_ef": 64}, configuration=None))
    spann = SimpleNamespace(_collection=SimpleNamespace(metadata=None, configuration={"hnsw": None, "spann": {}}))
    assert chroma_ef_search(legacy) == 64  # type: ignore[arg-type]
    assert chroma_ef_search(spann) == 0  # type: ignore[arg-type]  # a distributed index: nothing read ahead


_MARKER = """
import sys
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_expand import chroma_store
from langchain_expand.store.adapters import adapt

store = chroma_store("marks", persist_directory=sys.argv[1], embeddings=DeterministicFakeEmbedding(size=8))
writer = adapt(store, "a writer")
writer.mark(writer.begin())
"""


def test_a_change_mark_kept_between_reads_is_the_one_chroma_holds_after_every_kind_of_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a query read the mark from Chroma every time (300-500 us, a tenth of its own time); it is
    # read again only once the database file's data version has changed
    import subprocess
    import sys

    from langchain_core.embeddings import DeterministicFakeEmbedding

    fake = DeterministicFakeEmbedding(size=8)
    folder = tmp_path / "chroma"
    reader = adapt(chroma_store("marks", persist_directory=folder, embeddings=fake), "a reader")
    writer = adapt(chroma_store("marks", persist_directory=folder, embeddings=fake), "a writer")
    reads: list[str | None] = []
    read_mark = reader._read_mark
    monkeypatch.setattr(reader, "_read_mark", lambda: reads.append(read_mark()) or reads[-1])

    def agreed() -> str | None:
        kept = reader.marked()
        assert kept == read_mark()
        return kept

    assert agreed() == ""
    writing = writer.begin()
    assert agreed() is None
    writer.mark(writing)
    first = agreed()
    assert first
    before = len(reads)
    for _ in range(3):
        assert agreed() == first
    assert len(reads) == before  # nothing written since: Chroma is not read
    chroma_store("other", persist_directory=folder, embeddings=fake).add_texts(["another collection"])
    assert agreed() == first
    assert len(reads) == before + 1  # the file changed: read again
    subprocess.run([sys.executable, "-c", _MARKER, str(folder)], check=True, timeout=120)
    assert agreed() not in (first, None, "")
    in_memory = adapt(chroma_store("marks-in-memory", embeddings=fake), "in memory")
    in_memory.mark(in_memory.begin())
    assert in_memory.marked() == in_memory._read_mark() != ""
    assert in_memory._version is not None
    assert in_memory._version() is None  # no file to ask: the mark is read every time
