"""The lexical index in PostgreSQL, on a real server: BM25 as FTS5 ranks, rows kept in step with
the vector store, shared by a second process, the same hybrid answers as the SQLite index, and
SQL connections that a forked worker does not share with its parent."""

from __future__ import annotations

import collections
import itertools
import json
import os
from pathlib import Path

import pytest
import sqlalchemy as sa
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand import (
    LexicalIndex,
    Performance,
    PostgresLexicalIndex,
    SentenceSplitter,
    SentenceWindowRetriever,
    SQLDocStore,
    chroma_store,
)
from langchain_expand.store.lexical import LexicalHit, LocalSentence
from langchain_expand.windows.bm25 import Bm25

from .conftest import in_threads, load_docs, load_queries
from .memory import unscored
from .test_core import RecordingStore
from .test_lexical import SCRIPTS, UNSPACED, UNSPACED_QUERIES, whole_runs

pytestmark = pytest.mark.integration  # a PostgreSQL server

_tables = itertools.count()


def fresh(url: str) -> PostgresLexicalIndex:
    return PostgresLexicalIndex(url, table=f"lexical_{next(_tables)}")


def positions(index: PostgresLexicalIndex) -> list[tuple[str, int, str]]:
    """Every ranked sentence: document, position, revision."""
    return sorted((h.doc_id, h.index, h.rev) for h in index.search("one two three four five now shorter only", 999))


def copies(index: PostgresLexicalIndex) -> list[tuple[str, int]]:
    return [(d, s.i) for d, _, s in index.copies()]


def test_bm25_in_postgresql_ranks_every_query_as_fts5_and_the_snapshot_do(postgres_url: str) -> None:
    texts = ["Café au lait costs $ 3.50 at the École.", "Revenue was 1,452.4 million in 2019.", "OK .", "OK .", ""]
    for doc in load_docs("emanual")[:2] + load_docs("friendsqa")[:4]:
        texts += [doc["text"][s:e] for s, e in SentenceSplitter()(doc["text"])]
    index, fts5 = fresh(postgres_url), LexicalIndex()
    index.replace([("d", "r", texts)])
    fts5.replace([("d", "r", texts)])
    bm25 = Bm25.of(texts, lambda row, score: LexicalHit("d", row, "r", score))
    queries = [q["query"] for q in load_queries("emanual")[:10] + load_queries("friendsqa")[:10]]
    queries += ["cafe", "CAFÉ", "1,452.4", "ok", '"unbalanced', "price AND NOT sales", "pri*", "", "?!"]
    for query in queries:
        found = index.search(query, 30)
        assert found == fts5.search(query, 30) == bm25.search(query, 30), query
    assert index.search("zebra", 5) == []
    assert index.search("cafe", 0) == []


def test_bm25_in_postgresql_within_some_documents_ranks_and_scores_as_fts5_does(postgres_url: str) -> None:
    # issue #49: a filtered query's BM25, scored with the whole index's idf; issue #50: fusion
    # reads the BM25 score of each candidate, the same in every index to the last bit
    docs = load_docs("emanual")[:1] + load_docs("friendsqa")[:2]
    index, fts5 = fresh(postgres_url), LexicalIndex()
    for doc in docs:
        sentences = [doc["text"][s:e] for s, e in SentenceSplitter()(doc["text"])]
        index.replace([(doc["doc_id"], "r", sentences)])
        fts5.replace([(doc["doc_id"], "r", sentences)])
    ids = [d["doc_id"] for d in docs]
    queries = [q["query"] for q in load_queries("emanual")[:5] + load_queries("friendsqa")[:5]] + ["the", ""]
    for within in ([ids[0]], ids[1:], ids, []):
        for query in queries:
            found = index.search(query, 30, within)
            assert found == fts5.search(query, 30, within), (within, query)
            assert {hit.doc_id for hit in found} <= set(within)
    named = [(d["doc_id"], i, "r") for d in docs for i in range(0, 400, 3)] + [("unknown", 0, "r")]
    for query in queries:
        assert index.scores(query, named) == fts5.scores(query, named), query


def test_rows_and_local_copies_are_replaced_whole_served_at_their_revision_and_deleted(postgres_url: str) -> None:
    index = fresh(postgres_url)
    kept = [LocalSentence(i, t, 10 * i, 10 * i + 5, " ", 3, "c", [0.25] * 4, 7) for i, t in enumerate(["One.", "Two."])]
    index.replace([("a", "r1", kept), ("b", "r1", ["Only one."])])
    found = index.sentences("a", "r1", [1, 0, 9])
    assert sorted(s.i for s in found) == [0, 1]  # 9 was never written
    two = next(s for s in found if s.i == 1)
    assert (two.text, two.start, two.end, two.gap, two.tokens, two.counter, two.joined) == (
        "Two.",
        10,
        15,
        " ",
        3,
        "c",
        7,
    )
    assert two.vector is not None
    assert two.vector.tolist() == [0.25] * 4
    assert index.sentences("a", "r0", [0, 1]) == []  # another revision: the caller reads the store
    assert (index.count(), index.documents(), index.documents(copied=True)) == (2, {"a", "b"}, {"a"})
    index.replace([("a", "r2", kept[:1])])
    assert positions(index) == [("a", 0, "r2"), ("b", 0, "r1")]
    assert copies(index) == [("a", 0)]
    index.delete(["a", "never-added"])
    assert (index.documents(), index.count()) == ({"b"}, 0)


def test_the_retriever_keeps_it_in_step_and_another_process_reads_what_one_wrote(postgres_url: str) -> None:
    store, table = RecordingStore(), f"lexical_{next(_tables)}"
    writer = SentenceWindowRetriever(
        vectorstore=store,
        performance=Performance(batch_size=2),
        lexical=PostgresLexicalIndex(postgres_url, table=table),
    )
    text = "One sentence here. Two sentences now. Three of them. Four and more. Five at last."
    writer.add_documents([Document(text, id="a"), Document("Only one.", id="b")])
    reader = PostgresLexicalIndex(postgres_url, table=table)  # a restart, or a worker on another machine
    assert [(d, i) for d, i, _ in positions(reader)] == [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("a", 4), ("b", 0)]
    writer.add_documents([Document("A shorter one. Now.", id="a")])
    assert sorted(store.store) == ["a::0", "a::1", "b::0"]
    assert [(d, i) for d, i, _ in positions(reader)] == [("a", 0), ("a", 1), ("b", 0)]
    head = store.get_by_ids(["a::0"])[0].metadata["lcx_rev"]
    assert {rev for d, _, rev in positions(reader) if d == "a"} == {head}
    assert sorted(copies(reader)) == [("a", 0), ("a", 1), ("b", 0)]
    writer.delete(["a"])
    assert reader.documents() == reader.documents(copied=True) == {"b"}


def test_writers_of_one_document_wait_in_turn_and_leave_one_version_whole(postgres_url: str) -> None:
    table = f"lexical_{next(_tables)}"
    versions = {n: [f"Version {n} sentence {i}." for i in range(3 + 4 * n)] for n in range(4)}

    def worker(n: int) -> None:
        index = PostgresLexicalIndex(postgres_url, table=table)  # each creates the tables if they are missing
        for _ in range(5):
            index.replace([("shared", f"r{n}", versions[n]), (f"own{n}", "r", ["Mine."])])

    assert in_threads(worker, 4) == []
    index = PostgresLexicalIndex(postgres_url, table=table)
    found = [h for h in index.search("version sentence mine", 999) if h.doc_id == "shared"]
    (rev,) = {h.rev for h in found}  # one writer's rows, none of another's left over
    assert sorted(h.index for h in found) == list(range(len(versions[int(rev[1:])])))
    assert index.documents() == {"shared", "own0", "own1", "own2", "own3"}


def test_hybrid_answers_from_postgresql_equal_those_from_the_sqlite_index(
    postgres_url: str, tmp_path: Path, minilm: Embeddings
) -> None:
    rows = load_docs("emanual")
    store = chroma_store("pg-hybrid", persist_directory=tmp_path / "chroma", embeddings=minilm)
    in_postgres = SentenceWindowRetriever(vectorstore=store, merge=True, lexical=fresh(postgres_url))
    in_postgres.add_documents([Document(r["text"], id=r["doc_id"]) for r in rows])
    in_sqlite = in_postgres.model_copy(update={"lexical": LexicalIndex(tmp_path / "lexical.sqlite")})
    in_sqlite.add_documents([Document(r["text"], id=r["doc_id"]) for r in rows])  # embeds nothing: the copies only
    pairs = {}
    for in_memory in (True, False):
        pg, lite = (  # each with views of its own (a model_copy shares them)
            SentenceWindowRetriever(
                vectorstore=store, merge=True, lexical=r.lexical, performance=Performance(in_memory=in_memory)
            )
            for r in (in_postgres, in_sqlite)
        )
        pg.warm()  # both from the snapshot, built from each index's copies (a no-op with nothing in memory)
        lite.warm()
        pairs[in_memory] = pg, lite
    for q in load_queries("emanual")[:8]:
        for call, in_memory in (
            ({"max_tokens": 400}, True),
            ({"max_tokens": 1500}, False),
            ({"k": 4, "window": "fixed"}, True),
        ):
            pg, lite = pairs[in_memory]
            found, expected = pg.invoke(q["query"], **call), lite.invoke(q["query"], **call)
            assert unscored(found) == unscored(expected), (q["query"], call)
            # the SQLite copies hold the vectors read back from Chroma, PostgreSQL's those embedded: last bits
            assert [d.metadata["score"] for d in found] == pytest.approx([d.metadata["score"] for d in expected])


def test_a_url_that_is_not_postgresqls_is_refused_naming_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"needs a PostgreSQL database, got a sqlite URL.*LexicalIndex\(path\)"):
        PostgresLexicalIndex(f"sqlite:///{tmp_path / 'x.sqlite'}")
    with pytest.raises(ValueError, match="`table` must be a plain identifier"):
        PostgresLexicalIndex("postgresql+psycopg://nobody@127.0.0.1:1/none", table="x; DROP TABLE y")


def test_the_cli_on_a_chroma_server_keeps_its_lexical_index_in_a_postgresql_docstore(
    postgres_url: str, tmp_path: Path
) -> None:
    from .test_cli import cli
    from .test_server import ChromaServer

    server = ChromaServer(tmp_path / "chroma")
    server.start()
    try:
        shared = ["--chroma-host", "127.0.0.1", "--chroma-port", str(server.port), "--docstore", postgres_url]
        notes = tmp_path / "notes.md"
        notes.write_text("The remote costs 12.50 euros. Its battery is a CR2032 cell. The case is yellow.\n")
        cli(tmp_path / "one", *shared, "index", str(notes))
        assert PostgresLexicalIndex(postgres_url).documents(copied=True) == {"notes.md"}  # relative to --home's folder
        found = json.loads(cli(tmp_path / "two", *shared, "query", "CR2032", "--budget", "40", "--format", "json"))
        assert "CR2032" in found["results"][0]["page_content"]
        assert not (tmp_path / "one" / "lexical.sqlite").exists()  # nothing local: another machine sees it all
    finally:
        server.stop()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_process_opens_its_own_connections_and_the_parent_keeps_working(postgres_url: str) -> None:
    index, docstore = fresh(postgres_url), SQLDocStore(postgres_url, table=f"docs_{next(_tables)}")
    index.replace([("a", "r1", ["The remote costs 12.50 euros."])])
    docstore.mset([("a", Document("The remote."))])
    engines = [index._engine, docstore._engine]

    def backends() -> list[int]:
        found = []
        for engine in engines:
            with engine.connect() as conn:
                found.append(int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()))
        return found

    parent = backends()  # each pool now holds a connection
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: connections of its own, and answers
        mine = backends()
        ok = index.search("remote", 1) != [] and docstore.mget(["a"])[0] is not None
        os.write(write, b"1" if ok and not set(mine) & set(parent) else b"0")
        os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert os.read(read, 1) == b"1"
    assert backends() == parent  # the parent's connections still work
    assert index.search("remote", 1)


def test_a_document_with_a_nul_character_is_refused_before_its_batch_writes_anything(postgres_url: str) -> None:
    """Issue #34, finding 3: PostgreSQL refused the NUL after the batch's other update was half-written."""
    store, table = RecordingStore(), f"lexical_{next(_tables)}"
    writer = SentenceWindowRetriever(vectorstore=store, lexical=PostgresLexicalIndex(postgres_url, table=table))
    writer.add_documents([Document("Old text here. Old end.", id="upd")])
    before, rows = dict(store.store), sorted((d, rev, s.text) for d, rev, s in writer.lexical.copies())
    with pytest.raises(ValueError, match=r"Document 'bad'.*NUL character at char 4"):
        writer.add_documents([Document("New text now. New end.", id="upd"), Document("Some\x00text.", id="bad")])
    assert store.store == before
    assert sorted((d, rev, s.text) for d, rev, s in writer.lexical.copies()) == rows


def test_revisions_are_those_of_each_documents_local_copies_or_of_its_ranked_rows(postgres_url: str) -> None:
    index = fresh(postgres_url)
    sqlite = LexicalIndex()
    for each in (index, sqlite):
        each.replace(
            [("a", "r1", [LocalSentence(0, "One.", 0, 4, " ", 1, "c", None, 3)]), ("b", "r2", ["Ranked only."])]
        )
        each.replace([("a", "r3", [LocalSentence(0, "Two.", 0, 4, " ", 1, "c", None, 3)])])
        assert each.revisions(["a", "b", "c"]) == {"a": {"r3"}}  # b has no copies
        assert each.revisions(["a", "b", "c"], ranked=True) == {"a": {"r3"}, "b": {"r2"}}  # its rows do


def test_bm25_in_postgresql_finds_the_words_of_every_script_as_fts5_does(postgres_url: str) -> None:
    names = list(SCRIPTS)
    texts = [SCRIPTS[name][0] for name in names]
    index, fts5 = fresh(postgres_url), LexicalIndex()
    index.replace([("d", "r", [LocalSentence(i, t, 0, len(t), "") for i, t in enumerate(texts)])])
    fts5.replace([("d", "r", texts)])
    for row, name in enumerate(names):
        found = index.search(SCRIPTS[name][1], 5)
        assert found, name
        assert found[0].index == row, name
        assert found == fts5.search(SCRIPTS[name][1], 5), name


def test_tables_written_before_words_kept_marks_are_recounted_once_on_open(postgres_url: str) -> None:
    index = fresh(postgres_url)
    texts = [SCRIPTS["devanagari"][0], "Plain ASCII text."]
    index.replace([("d", "r", [LocalSentence(i, t, 0, len(t), "") for i, t in enumerate(texts)])])
    with sa.create_engine(postgres_url).begin() as conn:  # as an earlier words() counted it: cut at the marks
        conn.execute(sa.text(f"DROP TABLE {index.table}_format"))
        conn.execute(sa.text(f"UPDATE {index.table}_words SET term = term || 'old' WHERE i = 0"))
    assert index.search(SCRIPTS["devanagari"][1], 1) == []
    reopened = PostgresLexicalIndex(postgres_url, table=index.table)
    assert [(h.index, h.rev) for h in reopened.search(SCRIPTS["devanagari"][1], 2)] == [(0, "r")]
    assert reopened.search("plain", 1)[0].index == 1


def test_words_that_kept_runs_whole_are_split_again_once_on_open_copied_or_not(postgres_url: str) -> None:
    index = fresh(postgres_url)
    copied = [LocalSentence(i, t, 0, len(t), "") for i, t in enumerate(UNSPACED)]
    index.replace([("d", "r", copied), ("bare", "r", UNSPACED)])
    t = index.table
    with sa.create_engine(postgres_url).begin() as conn:  # as format 1 counted them: each run one word
        conn.execute(sa.text(f"DELETE FROM {t}_words"))
        for doc_id in ("d", "bare"):
            for i, text in enumerate(UNSPACED):
                terms = collections.Counter(whole_runs(text))
                key = {"doc": doc_id, "i": i, "length": terms.total()}
                conn.execute(sa.text(f"UPDATE {t} SET length = :length WHERE doc_id = :doc AND i = :i"), key)
                conn.execute(
                    sa.text(
                        f"INSERT INTO {t}_words (term, doc_id, i, rev, seq, length, tf) SELECT :term, :doc, :i, rev, "
                        f"seq, :length, :tf FROM {t} WHERE doc_id = :doc AND i = :i"
                    ),
                    [{**key, "term": term, "tf": n} for term, n in terms.items()],
                )
        conn.execute(sa.text(f"UPDATE {t}_format SET format = 1"))
    assert index.search("烤鸭", 8) == []
    reopened, fts5 = PostgresLexicalIndex(postgres_url, table=t), LexicalIndex()
    fts5.replace([("d", "r", UNSPACED), ("bare", "r", UNSPACED)])
    for query in UNSPACED_QUERIES:
        assert reopened.search(query, 8) == fts5.search(query, 8) != [], query
    with sa.create_engine(postgres_url).connect() as conn:
        assert conn.execute(sa.text(f"SELECT format FROM {t}_format")).all() == [(2,)]


def test_a_table_holds_one_retrievers_units_and_a_retriever_of_the_other_kind_is_refused(postgres_url: str) -> None:
    index = fresh(postgres_url)
    assert index.claim(None) is None
    index.check_units("children", "BudgetedParentDocumentRetriever")  # an empty table is claimed by its first
    assert PostgresLexicalIndex(postgres_url, table=index.table).claim("sentences") == "children"
    with pytest.raises(ValueError, match=r"holds a BudgetedParentDocumentRetriever's children.*table='sentences'"):
        index.check_units("sentences", "SentenceWindowRetriever")
    copied = fresh(postgres_url)  # written before tables were claimed: its copies say whose it is
    copied.replace([("d", "r", [LocalSentence(0, "One.", 0, 4, "")])])
    with pytest.raises(ValueError, match="holds a SentenceWindowRetriever's sentences"):
        copied.check_units("children", "BudgetedParentDocumentRetriever")
