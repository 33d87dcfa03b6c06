"""Memory settings (``windows/performance.py``) change what a query reads, never its answer."""

from __future__ import annotations

from pathlib import Path

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_expand import (
    LexicalIndex,
    Performance,
    SentenceWindowRetriever,
    chroma_store,
)
from langchain_expand.windows.views import StoreViews

from .conftest import Make, as_documents, load_docs, load_queries
from .memory import MODES, Deferred, answered_alike, in_every_mode, shown, spans


def test_snapshot_limit_0_takes_the_path_past_the_limit_and_in_memory_false_keeps_nothing(reader: Make) -> None:
    query = load_queries("qmsum")[0]["query"]
    no_snapshot = reader(lexical=True, performance=Performance(snapshot_limit=0))
    no_snapshot._views = StoreViews(lambda fn: fn())
    first = no_snapshot.invoke(query, max_tokens=1000)  # starts the build, which runs at once here
    assert no_snapshot.invoke(query, max_tokens=1000) == first
    held = no_snapshot._views.built
    assert held is not None
    assert held.columns is not None  # BM25 and growth's counts, cues and vectors
    assert held.bm25 is not None
    assert not held.whole  # no snapshot, even of a few sentences
    doc_id = held.columns.documents()[0]
    assert held.columns.copies(doc_id, held.columns.document(doc_id)[0], range(4)) == []  # no text
    submit = Deferred()
    nothing = reader(lexical=True, performance=Performance(in_memory=False))
    nothing._views = StoreViews(submit)
    assert shown(nothing.invoke(query, max_tokens=1000)) == shown(first)
    assert nothing._views.built is None
    assert submit.waiting == []  # no build started
    nothing.warm()
    assert nothing._views.built is None  # nor by warm(): nothing is held in memory


def test_every_memory_mode_answers_alike_where_the_store_searches_exactly(tmp_path: Path, minilm: Embeddings) -> None:
    # issue #51, finding 7, and #49: one query's answer differed by mode with the same dense
    # top 100. A repeated line ("Housekeeper: The Waltham Residence .") has one vector: the
    # snapshot gave its tie to the copy written first, Chroma's index in an order of its own,
    # and the windows differed. Every path now breaks ties by document id, then position.
    store = chroma_store("friends", persist_directory=tmp_path / "chroma", embeddings=minilm, ef_search=4096)
    path = tmp_path / "lexical.sqlite"  # 1,513 sentences: a beam past their count searches exactly
    SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path)).add_documents(
        as_documents(load_docs("friendsqa"))
    )
    modes = {m: SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path), **kw) for m, kw in MODES.items()}
    asked = [("What does the Janitor claim they forgot ?", "s01_e23")]
    asked += [(q["query"], q["doc_id"]) for q in load_queries("friendsqa")[::12]]
    for query, doc_id in asked:
        scoped = {"filter": {"doc_id": doc_id}}  # issue #49: a filtered query is hybrid on every path too
        for call in ({"max_tokens": 2000}, {"max_tokens": 300}, {"k": 4}, {"max_tokens": 2000, **scoped}):
            answers = {m: shown(r.invoke(query, **call)) for m, r in modes.items()}
            for mode, answer in answers.items():
                assert answer == answers["in memory"], (mode, query, call, spans(answer), spans(answers["in memory"]))
        assert {m["doc_id"] for _, m in answers["in memory"]} == {doc_id}


def test_a_sentence_kept_from_a_records_search_scores_as_its_local_copy(tmp_path: Path, minilm: Embeddings) -> None:
    # Found probing package READMEs in every mode: a fixed window's search returns records
    # without vectors, and the sentence cache kept them so. A later hybrid query found the copy
    # held, read its vector from the store, which hands a cosine collection's vector back a few
    # bits off the one written (the local copy's, the snapshot's), and the hit's score differed
    # from the snapshot's in its last bits. A copy kept without its vector is read again locally.
    retrievers = in_every_mode(tmp_path, minilm, as_documents(load_docs("tatqa")))
    for q in load_queries("tatqa")[::5]:
        for call in ({"k": 4}, {"max_tokens": 1000}):  # the records first, then their sentences scored
            assert answered_alike(retrievers, q["query"], **call)


def test_a_filter_that_passes_every_document_answers_as_no_filter(tmp_path: Path, minilm: Embeddings) -> None:
    # issue #49: any filter turned BM25 and the snapshot off, so a multi-tenant app's every query
    # was dense only. Now the filter narrows the hybrid search: one that passes every document
    # leaves the answer as it was, in every memory mode, and one document's keeps to it.
    store = chroma_store("friends", persist_directory=tmp_path / "chroma", embeddings=minilm, ef_search=4096)
    path = tmp_path / "lexical.sqlite"
    rows = load_docs("friendsqa")
    documents = [Document(r["text"], id=r["doc_id"], metadata={"season": int(r["doc_id"][1:3])}) for r in rows]
    SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path)).add_documents(documents)
    every = [{"season": {"$gte": 0}}, {"doc_id": {"$in": [r["doc_id"] for r in rows]}}, {"season": {"$ne": 99}}, {}]
    queries = [q for q in load_queries("friendsqa")[::8]]
    dense_only = SentenceWindowRetriever(vectorstore=store)
    differs = 0
    for mode, options in MODES.items():
        retriever = SentenceWindowRetriever(vectorstore=store, lexical=LexicalIndex(path), **options)
        for q in queries:
            plain = shown(retriever.invoke(q["query"], max_tokens=1000))
            for where in every:
                assert shown(retriever.invoke(q["query"], max_tokens=1000, filter=where)) == plain, (mode, where)
            differs += plain != shown(dense_only.invoke(q["query"], max_tokens=1000))
            season = int(q["doc_id"][1:3])
            found = retriever.invoke(q["query"], max_tokens=1000, filter={"season": season})
            assert found
            assert {d.metadata["season"] for d in found} == {season}
    assert differs  # the hybrid answer is not the dense one: the filters above kept BM25


def test_tenants_filters_answer_alike_in_every_memory_mode_and_keep_to_their_documents(
    tmp_path: Path, minilm: Embeddings
) -> None:
    # issue #49: a multi-tenant app filters every call on its own keys, with Chroma's operators.
    # Each filter narrows the hybrid search to its documents the same way in every mode (probed
    # on 14 licence texts, 600 calls: all alike); here on TAT-QA's 40 passages in three tenants.
    rows = load_docs("tatqa")
    tenant = {r["doc_id"]: "abc"[i % 3] for i, r in enumerate(rows)}
    size = {r["doc_id"]: len(r["text"]) for r in rows}
    groups = {d: sorted({t, "all"} if i % 2 else {t}) for i, (d, t) in enumerate(tenant.items())}  # an access list
    meta = {d: {"tenant": t, "size": size[d], "groups": groups[d]} for d, t in tenant.items()}
    documents = [Document(r["text"], id=r["doc_id"], metadata=meta[r["doc_id"]]) for r in rows]
    retrievers = in_every_mode(tmp_path, minilm, documents)
    median = sorted(size.values())[len(size) // 2]
    first, second = rows[0]["doc_id"], rows[1]["doc_id"]
    wheres = {  # each filter, and the documents it passes (worked out here, not by the library)
        "tenant a": ({"tenant": "a"}, {d for d, t in tenant.items() if t == "a"}),
        "$in": ({"tenant": {"$in": ["a", "b"]}}, {d for d, t in tenant.items() if t != "c"}),
        "$and": (
            {"$and": [{"tenant": {"$ne": "c"}}, {"size": {"$gt": median}}]},
            {d for d, t in tenant.items() if t != "c" and size[d] > median},
        ),
        "$or": ({"$or": [{"doc_id": first}, {"tenant": "b"}]}, {first} | {d for d, t in tenant.items() if t == "b"}),
        "$nin": ({"doc_id": {"$nin": [first, second]}}, set(tenant) - {first, second}),
        "$contains": ({"groups": {"$contains": "b"}}, {d for d, g in groups.items() if "b" in g}),
        "$not_contains": ({"groups": {"$not_contains": "all"}}, {d for d, g in groups.items() if "all" not in g}),
    }
    for q in load_queries("tatqa")[::20]:
        for name, (where, passed) in wheres.items():
            for call in ({"max_tokens": 1000}, {"k": 3}):
                answer = answered_alike(retrievers, q["query"], filter=where, **call)
                assert answer
                assert {meta["doc_id"] for _, meta in answer} <= passed, (name, q["query"])
                assert all(meta["groups"] == groups[meta["doc_id"]] for _, meta in answer)  # a list, served as one


def test_a_long_table_grows_alike_in_every_memory_mode(tmp_path: Path, minilm: Embeddings) -> None:
    # Found probing odd documents in every mode: from the store, growth reads a table's next rows
    # four at a time, a round each, and after its sixth round a 200-row table's window was grown
    # on guesses (55 rows in memory, 51 from the store). The last round now reads every sentence
    # within max_radius of the seeds first, so it grows knowing what memory knows.
    words = "alpha beta gamma delta revenue cost 2019 2020 income loss".split()
    table = "| item | row |\n| --- | --- |\n" + "\n".join(
        f"| {words[i * 7 % 10]} {words[i % 10]} | {i} |" for i in range(200)
    )
    prose = " ".join(f"Sentence {i} says {words[i % 10]} and {words[i * 3 % 10]}." for i in range(120))
    retrievers = in_every_mode(tmp_path, minilm, [Document(table, id="table"), Document(prose, id="prose")])
    for query in ("revenue 2019", "gamma delta", "income"):
        for call in ({"max_tokens": 400, "filter": {"doc_id": "table"}}, {"max_tokens": 600}):
            answered_alike(retrievers, query, **call)
    grown = retrievers["nothing kept"].invoke("revenue 2019", max_tokens=400, filter={"doc_id": "table"})
    assert max(d.metadata["span"][1] - d.metadata["span"][0] for d in grown) > 24  # rows past six rounds of four


def test_warm_builds_nothing_on_a_store_without_a_change_mark_and_answers_alike(minilm: Embeddings) -> None:
    """Only a store that keeps a change mark (Chroma) can say when a build is current: elsewhere nothing is held."""
    retriever = SentenceWindowRetriever(vectorstore=InMemoryVectorStore(minilm), lexical=LexicalIndex())
    retriever.add_documents(as_documents(load_docs("emanual")[:1]))
    query = load_queries("emanual")[0]["query"]
    before = retriever.invoke(query, max_tokens=500)
    retriever.warm()
    assert retriever._views.built is None
    assert before
    assert retriever.invoke(query, max_tokens=500) == before
