"""Evidence per token: how much gold evidence each system puts into a context of a given size.

Every system gets the same model (the bundled MiniLM), the same store (Chroma), the same
queries and the same budgets, counted with ``cl100k_base`` on the context exactly as sent
(units joined with ``"\\n\\n"``). Each query searches its whole corpus (a few thousand
sentences), not only its own document; only evidence in the query's gold document counts.

Systems:

- ``ours: hybrid, guided (default)``: ``SentenceWindowRetriever.invoke(q, max_tokens=B)`` as
  shipped: ``k=None`` (the budget decides), a ``LexicalIndex`` (BM25 fused with the dense
  ranking), windows grown toward the evidence, merged where they touch.
- ``ours: hybrid, fixed windows``: the same with ``window="fixed"`` (2 sentences each side).
- ``ours: hybrid, guided, past the snapshot's limit``: the default on the same index with
  ``Performance(snapshot_limit=0)``, the path of a store past the limit: Chroma's HNSW search instead of the
  snapshot's exact one, BM25 and the columns in memory (no texts). What that path costs in recall.
- ``ours: hybrid, guided, tokens_per_sentence 8``: the default with
  ``budget_policy=BudgetPolicy(tokens_per_sentence=8)``: a budget asks for more hits, each window grown
  less (the README's setting for dialogue, whose turns are short).
- ``ours: dense, guided`` / ``ours: dense, fixed windows``: the dense ranking only.
- ``ours: k=16 fixed``: 16 windows of 2 sentences each side | ``MergeOverlaps`` | ``FitToBudget``,
  the pipeline of the first version (the measurement from outside used k=16).
- ``ours: parents, budgeted``: ``BudgetedParentDocumentRetriever.invoke(q, max_tokens=B)`` on
  4,000-char parents of 400-char children (the README's for meetings): parents until the budget
  is full, the last ones cut around their best child.
- ``ours: parents, budgeted, hybrid (lexical)``: the same with a ``LexicalIndex`` over the children
  (BM25 fused with the dense ranking; parents in their best child's fused order).
- ``stock ParentDocumentRetriever``: LangChain's, set up as its documentation shows (400-char
  children), parents in the order of their best child, at 1,000, 2,000 and 4,000-char parents.
- ``chunks 200/400/800``: stock LangChain chunks (``RecursiveCharacterTextSplitter`` on tiktoken
  lengths, 10% overlap) on the same Chroma.
- The peers, where their environment is there (``make bench-peers`` builds it; run this script
  with its Python): LlamaIndex's sentence window (``SentenceWindowNodeParser`` +
  ``MetadataReplacementPostProcessor``) and Haystack's (``SentenceWindowRetriever``) at radius 2 and
  at their default 3; LlamaIndex's ``AutoMergingRetriever`` at its defaults
  (``HierarchicalNodeParser.from_defaults()``: 2048 / 512 / 128 tokens, ratio 0.5) and Haystack's
  (threshold 0.5) over ``HierarchicalDocumentSplitter`` block sizes of 512/256/128, 1536/384/96
  and 512/128/32 words (it has no default). Every peer's Chroma gets our search settings.
- ``oracle``: the query's gold spans alone, packed: what a context of that size could hold.

A system run at several settings (the stock parents' sizes, the peers') has one row: at each
budget, the best of its settings, named in the JSON (``setting``). Systems that return a ranked
list of units get a pool of ``--pool`` units (enough to fill the largest budget) and are packed to
each budget by the better of "whole units in rank order until one does not fit" and "skip and
continue"; ours is called with the budget itself.

Two scopes: each query over the whole corpus (``results``), and scoped to the query's own
document by each system's metadata filter (``scoped``), as an app with many meetings or manuals
asks. The scoped run covers :data:`SCOPED` and is skipped on a corpus of one document.

Run: ``python benchmarks/evidence.py [--queries 60] [--corpora qmsum emanual friendsqa tatqa]``;
``--only SYSTEM ...`` runs those of our systems alone, every other figure staying from the last run.
Reads ../shared/data; writes ``benchmarks/results/evidence.json`` and one PNG per corpus.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import SHARED, evidence_recall, interleaved, machine, pct, read  # type: ignore[import-not-found]
from langchain_core.documents import Document

from langchain_expand import (
    BudgetedParentDocumentRetriever,
    BudgetPolicy,
    FitToBudget,
    LexicalIndex,
    MarkdownSectionSplitter,
    MergeOverlaps,
    Performance,
    SentenceWindowRetriever,
    SQLDocStore,
    TokenCounter,
    chroma_store,
)
from langchain_expand.text import markdown
from langchain_expand.windows import views

HERE = Path(__file__).resolve().parent
BUDGETS = [250, 500, 1000, 2000, 4000, 8000]
COUNTER = TokenCounter()
BEST = "ours: hybrid, guided (default)"
ALONE = "ours: hybrid, guided, sentences embedded alone"
"""The default but with ``sentence_prefix=None``: what embedding each sentence's context adds."""
PAST = "ours: hybrid, guided, past the snapshot's limit"
"""The default with ``Performance(snapshot_limit=0)`` on the same index: the store's own (HNSW) search, BM25 and
the columns in memory (no texts), as a store of more than ``snapshot_limit`` sentences is queried."""
FLOORS = (0.3, 0.4, 0.5)
"""Relevance floors (``score_threshold``) measured on the default: what each keeps out, and what it costs."""


def floor_name(threshold: float) -> str:
    return f"ours: hybrid, guided, score_threshold {threshold}"


MORE_HITS = "ours: hybrid, guided, tokens_per_sentence 8"
"""The default with ``BudgetPolicy(tokens_per_sentence=8)``: more hits a budget (the README's for dialogue)."""
DENSE_FLOOR = "ours: dense, guided, score_threshold 0.4"
"""The dense ranking alone with the floor of 0.4: on meetings the dense ranking alone held more than the fused one."""
PARENTS = "ours: parents, budgeted"
HYBRID_PARENTS = "ours: parents, budgeted, hybrid (lexical)"
SECTION_PARENTS = "ours: parents, Markdown sections, hybrid (lexical)"
"""Our parents as a manual's own sections (``MarkdownSectionSplitter``), 200-char children, BM25 fused:
run where the corpus's text has Markdown headings."""
STOCK_PARENTS = "stock ParentDocumentRetriever"
ORACLE = "oracle: the gold spans alone"
"""The ceiling: each query's gold spans, smallest first, packed whole while they fit, the next cut to fit."""
PEERS = (
    "LlamaIndex sentence window",
    "Haystack sentence window",
    "LlamaIndex AutoMergingRetriever",
    "Haystack AutoMergingRetriever",
)
OUR_PARENTS = (PARENTS, HYBRID_PARENTS, SECTION_PARENTS)
SCOPED = (BEST, floor_name(0.4), MORE_HITS, DENSE_FLOOR, *OUR_PARENTS, STOCK_PARENTS, "chunks 400", *PEERS, ORACLE)
"""The systems also run scoped to the query's document."""

Unit = tuple[str, int, int, str]  # doc_id, start, end, text
Scope = str | None  # None: the whole corpus; else the one document searched (a metadata filter)
Ranked = Callable[[str, Scope], list[Unit]]  # query, scope -> units, best first
Budgeted = Callable[[str, int, Scope], list[Unit]]  # query, budget, scope -> units that fit


def corpus(name: str, max_docs: int | None) -> tuple[list[dict], list[dict]]:
    """The corpus's documents (the first ``max_docs`` that have queries) and their usable queries."""
    queries = [q for q in read(name, "queries.jsonl.gz") if q["gold_spans"] and None not in q["gold_spans"]]
    with_queries = list(dict.fromkeys(q["doc_id"] for q in queries))
    chosen = set(with_queries[:max_docs] if max_docs else with_queries)
    docs = [d for d in read(name, "docs.jsonl.gz") if d["doc_id"] in chosen]
    return docs, [q for q in queries if q["doc_id"] in chosen]


def as_units(docs: list[Document]) -> list[Unit]:
    return [(d.metadata["doc_id"], d.metadata["start_index"], d.metadata["end_index"], d.page_content) for d in docs]


def pack(units: list[Unit], budget: int, skip: bool) -> list[Unit]:
    """Whole units in rank order while they fit; with ``skip``, a unit that does not fit is
    passed over and the next ones still get their turn."""
    kept: list[Unit] = []
    for unit in units:
        if COUNTER("\n\n".join(u[3] for u in [*kept, unit])) <= budget:
            kept.append(unit)
        elif not skip:
            break
    return kept


def build_ours(
    docs: list[dict], pool: int
) -> tuple[dict[str, Budgeted], Callable[[str], object], Callable[[], None], Callable[[], float]]:
    path = tempfile.mkdtemp()
    store = chroma_store("ours", persist_directory=path)
    hybrid = SentenceWindowRetriever(
        vectorstore=store, k=None, merge=True, lexical=LexicalIndex(Path(path) / "lexical.sqlite")
    )
    hybrid.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
    hybrid.warm()  # what queries hold in memory, built before the first
    retriever = hybrid.model_copy(update={"lexical": None})  # the same index, dense ranking only
    past = SentenceWindowRetriever(
        vectorstore=store, k=None, merge=True, lexical=hybrid.lexical, performance=Performance(snapshot_limit=0)
    )
    merge = MergeOverlaps()
    apart = tempfile.mkdtemp()  # a second index: each sentence embedded alone, without its context
    alone = SentenceWindowRetriever(
        vectorstore=chroma_store("alone", persist_directory=apart),
        k=None,
        merge=True,
        lexical=LexicalIndex(Path(apart) / "lexical.sqlite"),
        sentence_prefix=None,
    )
    alone.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
    alone.warm()  # what queries hold in memory, built before the first

    def called(retriever: SentenceWindowRetriever, **options: object) -> Budgeted:
        def invoke(q: str, budget: int, scope: Scope) -> list[Unit]:
            where = {} if scope is None else {"filter": {"doc_id": scope}}
            return as_units(retriever.invoke(q, max_tokens=budget, **options, **where))

        return invoke

    def fixed(q: str, budget: int, scope: Scope) -> list[Unit]:
        where = {} if scope is None else {"filter": {"doc_id": scope}}
        windows = retriever.invoke(q, k=16, merge=False, window="fixed", **where)
        return as_units(FitToBudget(max_tokens=budget).invoke(merge.invoke(windows)))

    def raw(q: str) -> object:
        return store.similarity_search(q, k=16)

    systems = {
        BEST: called(hybrid),
        ALONE: called(alone),
        PAST: called(past),
        "ours: hybrid, fixed windows": called(hybrid, window="fixed"),
        "ours: dense, guided": called(retriever),
        "ours: dense, fixed windows": called(retriever, window="fixed"),
        "ours: k=16 fixed": fixed,
        **{floor_name(x): called(hybrid, score_threshold=x) for x in FLOORS},
        DENSE_FLOOR: called(retriever, score_threshold=0.4),
        MORE_HITS: called(hybrid.model_copy(update={"budget_policy": BudgetPolicy(tokens_per_sentence=8)})),
    }

    def snapshot_build_ms() -> float:
        """The snapshot built whole, from every copy (median of 3): the most a query after a write pays."""
        assert hybrid.lexical is not None
        times = []
        for _ in range(3):
            t = time.perf_counter()
            settings = hybrid.performance
            views.build(hybrid._vectors, hybrid.lexical, "timed", settings.snapshot_limit, settings.cache_size)
            times.append(time.perf_counter() - t)
        return round(statistics.median(times) * 1000, 1)

    def clear() -> None:  # the dense copies share the hybrid's cache; the past one keeps its own
        hybrid.clear_cache()
        past.clear_cache()

    return systems, raw, clear, snapshot_build_ms


def build_our_parents(docs: list[dict]) -> dict[str, Budgeted]:
    """``BudgetedParentDocumentRetriever`` on 4,000 / 400-char parents and children, the budget deciding.

    Dense alone (``PARENTS``), and with BM25 over the children fused in (``HYBRID_PARENTS``),
    on one index; where the documents have Markdown headings, also their sections as parents
    (``SECTION_PARENTS``: 200-char children, BM25 fused), as the README advises for manuals.
    """
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    path = tempfile.mkdtemp()
    hybrid = BudgetedParentDocumentRetriever(
        vectorstore=chroma_store("our-parents", persist_directory=path),
        docstore=SQLDocStore(f"sqlite:///{path}/parents.sqlite"),
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=400),
        parent_splitter=RecursiveCharacterTextSplitter(chunk_size=4000),
        lexical=LexicalIndex(Path(path) / "lexical.sqlite"),
    )
    hybrid.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
    dense = hybrid.model_copy(update={"lexical": None})

    def budgeted(retriever: BudgetedParentDocumentRetriever) -> Budgeted:
        def invoke(q: str, budget: int, scope: Scope) -> list[Unit]:
            where = {} if scope is None else {"filter": {"doc_id": scope}}
            return as_units(retriever.invoke(q, max_tokens=budget, **where))

        return invoke

    found = {PARENTS: budgeted(dense), HYBRID_PARENTS: budgeted(hybrid)}
    if any(markdown.headings(d["text"], 6) for d in docs):
        sections = BudgetedParentDocumentRetriever(
            vectorstore=chroma_store("our-section-parents", persist_directory=path),
            docstore=SQLDocStore(f"sqlite:///{path}/sections.sqlite"),
            child_splitter=RecursiveCharacterTextSplitter(chunk_size=200),
            parent_splitter=MarkdownSectionSplitter(),
            lexical=LexicalIndex(Path(path) / "section-lexical.sqlite"),
        )
        sections.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
        found[SECTION_PARENTS] = budgeted(sections)
    return found


def build_stock_parents(docs: list[dict], pool: int, size: int) -> Ranked:
    """LangChain's ``ParentDocumentRetriever`` as its documentation sets it up: ``size``-char
    parents, 400-char children, on the same Chroma; parents in the order of their best child."""
    from langchain_classic.retrievers import ParentDocumentRetriever
    from langchain_core.stores import InMemoryStore
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    retriever = ParentDocumentRetriever(
        vectorstore=chroma_store(f"stock-parents-{size}", persist_directory=tempfile.mkdtemp()),
        docstore=InMemoryStore(),
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=400),
        parent_splitter=RecursiveCharacterTextSplitter(chunk_size=size, add_start_index=True),
        search_kwargs={"k": 4 * pool},
    )
    # its children's "doc_id" is their parent's key (its id_key): the scope is filtered on "source"
    retriever.add_documents(
        [Document(d["text"], metadata={"doc_id": d["doc_id"], "source": d["doc_id"]}) for d in docs]
    )
    scoped: dict[str, ParentDocumentRetriever] = {}  # its search_kwargs are its only filter: a copy per document

    def ranked(q: str, scope: Scope) -> list[Unit]:
        if scope is not None and scope not in scoped:
            scoped[scope] = retriever.model_copy(update={"search_kwargs": {"k": 4 * pool, "filter": {"source": scope}}})
        found = (retriever if scope is None else scoped[scope]).invoke(q)[:pool]
        return [
            (d.metadata["doc_id"], start, start + len(d.page_content), d.page_content)
            for d in found
            for start in [d.metadata["start_index"]]
        ]

    return ranked


def build_oracle(docs: list[dict], queries: list[dict]) -> Budgeted:
    """What a context of the budget could hold: the query's gold spans alone (:data:`ORACLE`)."""
    texts = {d["doc_id"]: d["text"] for d in docs}
    gold = {q["query"]: q for q in queries}

    def packed(q: str, budget: int, scope: Scope) -> list[Unit]:
        query = gold[q]
        text = texts[query["doc_id"]]
        spans = sorted((tuple(span) for span in query["gold_spans"]), key=lambda span: span[1] - span[0])
        kept: list[Unit] = []
        for s, e in spans:
            unit = (query["doc_id"], s, e, text[s:e])
            if COUNTER("\n\n".join(u[3] for u in [*kept, unit])) <= budget:
                kept.append(unit)
                continue
            low, high = s, e  # the longest start of this span that still fits
            while low < high:
                mid = (low + high + 1) // 2
                if COUNTER("\n\n".join(u[3] for u in [*kept, (query["doc_id"], s, mid, text[s:mid])])) <= budget:
                    low = mid
                else:
                    high = mid - 1
            if low > s:
                kept.append((query["doc_id"], s, low, text[s:low]))
            break
        return kept

    return packed


def build_chunks(docs: list[dict], size: int, pool: int) -> Ranked:
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    splitter = RecursiveCharacterTextSplitter.from_tiktoken_encoder(
        encoding_name="cl100k_base", chunk_size=size, chunk_overlap=size // 10, add_start_index=True
    )
    chunks = splitter.split_documents([Document(d["text"], metadata={"doc_id": d["doc_id"]}) for d in docs])
    store = chroma_store(f"chunks-{size}", persist_directory=tempfile.mkdtemp())
    store.add_documents(chunks)

    def ranked(q: str, scope: Scope) -> list[Unit]:
        found = store.similarity_search(q, k=pool, filter=None if scope is None else {"doc_id": scope})
        return [
            (
                d.metadata["doc_id"],
                d.metadata["start_index"],
                d.metadata["start_index"] + len(d.page_content),
                d.page_content,
            )
            for d in found
        ]

    return ranked


HAYSTACK_BLOCKS = ((512, 256, 128), (1536, 384, 96), (512, 128, 32))
"""Haystack's ``HierarchicalDocumentSplitter`` has no default block sizes: these are tried (words)."""


def build_peers(docs: list[dict], pool: int) -> dict[str, dict[str, Ranked]]:
    """The peers' rows, each at its settings, where their packages are installed."""
    try:
        from peers import (  # type: ignore[import-not-found]
            Locator,
            build_haystack_merging,
            build_haystack_pool,
            build_llamaindex_merging,
            build_llamaindex_pool,
        )
    except ImportError:
        return {}
    locators = {d["doc_id"]: Locator(d["text"]) for d in docs}
    windows = build_haystack_pool(docs, pool, locators, windows=(2, 3))
    return {
        "LlamaIndex sentence window": {
            f"window_size={n}": build_llamaindex_pool(docs, pool, locators, window=n) for n in (2, 3)
        },
        "Haystack sentence window": {f"window_size={n}": windows[n] for n in (2, 3)},
        "LlamaIndex AutoMergingRetriever": {"2048/512/128 tokens": build_llamaindex_merging(docs, pool, locators)},
        "Haystack AutoMergingRetriever": {
            "/".join(map(str, blocks)) + " words": build_haystack_merging(docs, pool, locators, blocks)
            for blocks in HAYSTACK_BLOCKS
        },
    }


def score(units: list[Unit], query: dict, budget: int) -> dict[str, float]:
    spans = [(s, e) for doc_id, s, e, _ in units if doc_id == query["doc_id"]]
    recall = evidence_recall(query["gold_spans"], spans)
    tokens = COUNTER("\n\n".join(u[3] for u in units))
    junk = sum(COUNTER(text) for doc_id, s, e, text in units if not holds_gold(query, doc_id, s, e))
    return {
        "recall": recall,
        "touched": float(recall > 0),
        "tokens": tokens,
        "over": float(tokens > budget),
        "junk": junk / tokens if tokens else 0.0,
    }


def holds_gold(query: dict, doc_id: str, start: int, end: int) -> bool:
    """Whether the unit ``[start, end)`` of ``doc_id`` holds a character of the query's gold evidence."""
    return doc_id == query["doc_id"] and any(s < end and start < e for s, e in query["gold_spans"])


def summarize(rows: list[dict[str, float]]) -> dict[str, float]:
    tokens = [r["tokens"] for r in rows]
    return {
        "recall": round(statistics.fmean(r["recall"] for r in rows), 4),
        "touched": round(statistics.fmean(r["touched"] for r in rows), 3),
        "tokens_mean": round(statistics.fmean(tokens)),
        "tokens_p95": round(pct(tokens, 95)),
        "tokens_max": max(tokens),
        "over_budget": round(statistics.fmean(r["over"] for r in rows), 4),
        "junk_share": round(statistics.fmean(r["junk"] for r in rows), 3),
    }


def run_corpus(name: str, args: argparse.Namespace) -> dict:
    docs, queries = corpus(name, args.max_docs.get(name))
    queries = random.Random(7).sample(queries, min(args.queries, len(queries)))
    started = time.perf_counter()
    only = set(args.only or ())
    budgeted: dict[str, Budgeted] = {}
    if not only or only - {*OUR_PARENTS, ORACLE} or args.latency_only:
        budgeted, raw, clear, rebuild = build_ours(docs, args.pool)
        if args.latency_only:
            return {
                "latency_p50_vs_raw_search_at_2000": latency(budgeted, raw, clear, queries),
                "snapshot_build_ms": rebuild(),
            }
    ranked: dict[str, dict[str, Ranked]] = {}  # row -> setting -> pool
    if not only:
        ranked.update({f"chunks {n}": {"": build_chunks(docs, n, args.pool)} for n in (200, 400, 800)})
        ranked[STOCK_PARENTS] = {
            f"{n:,}-char parents": build_stock_parents(docs, args.pool, n) for n in (1000, 2000, 4000)
        }
        if not args.no_peers:
            ranked.update(build_peers(docs, args.pool))
    if not only or only & set(OUR_PARENTS):
        budgeted.update(build_our_parents(docs))
    if not only or ORACLE in only:
        budgeted[ORACLE] = build_oracle(docs, queries)
    if only - set(budgeted):
        msg = f"--only runs our systems: {sorted(budgeted)}; got {sorted(only - set(budgeted))}"
        raise SystemExit(msg)
    built = time.perf_counter() - started
    data: dict = {"documents": len(docs), "queries": len(queries), "build_seconds": round(built)}
    scopes = {"results": False, "scoped": True} if len(docs) > 1 else {"results": False}
    for key, scoped in scopes.items():
        results: dict[str, dict[int, dict]] = {}
        for system, fn in budgeted.items():
            if (only and system not in only) or (scoped and system not in SCOPED):
                continue
            results[system] = {
                b: summarize([score(fn(q["query"], b, q["doc_id"] if scoped else None), q, b) for q in queries])
                for b in BUDGETS
            }
        for system, settings in ranked.items():
            if not scoped or system in SCOPED:
                results[system] = best_packed(settings, queries, scoped)
        data[key] = results
    if not only:  # timed against the raw search on the default's index (--only keeps the last run's timing)
        timed = {s: fn for s, fn in budgeted.items() if s not in (*OUR_PARENTS, ORACLE)}
        data["latency_p50_vs_raw_search_at_2000"] = latency(timed, raw, clear, queries)
        data["snapshot_build_ms"] = rebuild()
    return data


def best_packed(settings: dict[str, Ranked], queries: list[dict], scoped: bool) -> dict[int, dict]:
    """A ranked system's row: at each budget, its best setting, packed the better of the two ways."""
    pools = {
        setting: [fn(q["query"], q["doc_id"] if scoped else None) for q in queries] for setting, fn in settings.items()
    }
    row: dict[int, dict] = {}
    for b in BUDGETS:
        options = []
        for setting, found in pools.items():
            for skip in (False, True):
                packed = [score(pack(p, b, skip), q, b) for p, q in zip(found, queries, strict=True)]
                options.append({**summarize(packed), **({"setting": setting} if setting else {})})
        row[b] = max(options, key=lambda s: s["recall"])
    return row


PASSES = 3
"""How often each timed query is run, for :func:`latency`."""


def latency(
    budgeted: dict[str, Budgeted], raw: Callable[[str], object], clear: Callable[[], None], queries: list[dict]
) -> dict[str, dict[str, float]]:
    """p50 at 2,000 tokens against a raw ``similarity_search(k=16)`` on 30 queries, each timed ``PASSES`` times.

    Ours and the raw search alternate query by query, each first on every other query, so
    neither always finds the machine as the other left it; three passes make the median
    steadier on a shared machine, whose bursts of load hit a single pass's 30 pairs unevenly.
    Each system and the raw search first answer five other queries untimed: a first call's
    costs (building the snapshot, lazy imports) are not a query's steady cost, and a run
    measuring latency alone would otherwise time them where a full run has warmed up on recall.

    ``cold``: the sentence cache emptied before every query. ``warm``: the cache emptied once,
    then filled by the run's other queries (not the timed ones), as a service's traffic fills it.
    The snapshot stays in both, as Chroma's own index stays loaded for the raw search; what
    building it costs (once after each write) is ``snapshot_build_ms``.
    """
    timed, others = queries[:30], queries[30:]
    out: dict[str, dict[str, float]] = {}
    for system, fn in budgeted.items():
        for q in others[:5]:  # first calls (the snapshot's build, lazy imports) are no query's steady cost
            raw(q["query"])
            fn(q["query"], 2000, None)
        row: dict[str, float] = {}
        for mode in ("cold", "warm"):
            clear()
            for q in others if mode == "warm" else []:
                fn(q["query"], 2000, None)
            texts = [q["query"] for q in timed]
            before = clear if mode == "cold" else None
            ours_t, raw_t = interleaved(lambda q, fn=fn: fn(q, 2000, None), raw, texts, PASSES, before)
            row[mode] = round(statistics.median(ours_t) / statistics.median(raw_t), 2)
            row[f"{mode}_ms"] = round(statistics.median(ours_t) * 1000, 1)
            row[f"{mode}_raw_ms"] = round(statistics.median(raw_t) * 1000, 1)
        out[system] = row
    return out


def ordered(results: dict) -> list[str]:
    """The systems, ours first (a system run alone with ``--only`` is added last to the results)."""
    return sorted(results, key=lambda s: not s.startswith("ours"))


def table(name: str, data: dict, key: str = "results") -> str:
    scope = "whole corpus" if key == "results" else "scoped to the query's document"
    systems = ordered(data[key])
    lines = [f"#### {name} ({data['documents']} documents, {data['queries']} queries, {scope}): evidence recall", ""]
    lines.append("| system | " + " | ".join(str(b) for b in BUDGETS) + " |")
    lines.append("| --- |" + " --- |" * len(BUDGETS))
    for system in systems:
        cells = [f"{data[key][system][b]['recall']:.3f}" for b in BUDGETS]
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    data = {**data, "results": data[key]}
    ours = data["results"][BEST]
    others = [s for s in systems if not s.startswith("ours") and s != ORACLE]
    settings = {s: sorted({r.get("setting", "") for r in data["results"][s].values()} - {""}) for s in others}
    groups = {
        "best other": others,
        "best peer": [s for s in others if s in PEERS],
        "best stock LangChain": [s for s in others if s not in PEERS],
    }

    def best(group: list[str], budget: int) -> float:
        return max(max(data["results"][s][budget]["recall"] for s in group), 1e-9)

    for label, group in groups.items():
        if not group:
            continue
        ratios = [ours[b]["recall"] / best(group, b) for b in BUDGETS]
        lines.append(f"| **ours / {label}** | " + " | ".join(f"**{r:.2f}x**" for r in ratios) + " |")
    if ORACLE in data["results"]:
        ceiling = [max(data["results"][ORACLE][b]["recall"], 1e-9) for b in BUDGETS]
        ratios = [ours[b]["recall"] / c for b, c in zip(BUDGETS, ceiling, strict=True)]
        lines.append("| ours / oracle | " + " | ".join(f"{r:.0%}" for r in ratios) + " |")
        if others:  # the done-when: >= 1.3x the best other, or half of its gap to the oracle closed
            closed = [
                (ours[b]["recall"] - best(others, b)) / max(c - best(others, b), 1e-9)
                for b, c in zip(BUDGETS, ceiling, strict=True)
            ]
            lines.append("| gap from best other to oracle closed | " + " | ".join(f"{r:.0%}" for r in closed) + " |")
    # where the default loses: contexts that hold no gold (ranking), and what it holds where it hit (expansion)
    missed = [f"{1 - ours[b]['touched']:.0%}" for b in BUDGETS]
    lines.append("| ours: contexts holding no gold | " + " | ".join(missed) + " |")
    lines.append(
        "| ours: recall where it holds some | " + " | ".join(_reached({BEST: ours}, b) for b in BUDGETS) + " |"
    )
    if PARENTS in data["results"] and others:
        ratios = [data["results"][PARENTS][b]["recall"] / best(others, b) for b in BUDGETS]
        lines.append("| ours: parents / best other | " + " | ".join(f"{r:.2f}x" for r in ratios) + " |")
    lines.append("")
    chosen = [f"{s}: {', '.join(v)}" for s, v in settings.items() if v]
    if chosen:
        lines += ["Settings that made a row's best at some budget: " + "; ".join(chosen) + ".", ""]
    lines.append(
        f"Tokens used by `{BEST}` (mean / p95 / max) and share over budget: "
        + "; ".join(
            f"{b}: {ours[b]['tokens_mean']}/{ours[b]['tokens_p95']}/{ours[b]['tokens_max']}, "
            f"{ours[b]['over_budget']:.0%}"
            for b in BUDGETS
        )
        + ". Contexts touching the evidence: "
        + ", ".join(f"{ours[b]['touched']:.0%}" for b in BUDGETS)
        + "."
    )
    junked = [sys for sys in systems if "junk_share" in data["results"][sys][BUDGETS[0]]]
    if junked:
        lines += ["", "Share of the context's tokens in units that hold no gold evidence (lower is better):", ""]
        lines.append("| system | " + " | ".join(str(b) for b in BUDGETS) + " |")
        lines.append("| --- |" + " --- |" * len(BUDGETS))
        for system in junked:
            cells = [f"{data['results'][system][b]['junk_share']:.2f}" for b in BUDGETS]
            lines.append(f"| {system} | " + " | ".join(cells) + " |")
    latency = data.get("latency_p50_vs_raw_search_at_2000", {}) if key == "results" else {}
    if latency:
        lines.append("")
        lines.append(
            "Query latency at 2,000 tokens, p50 against a raw `similarity_search(k=16)` in the same run"
            + (" (sentence cache cold / warmed by the other queries)" if _by_mode(latency) else "")
            + ": "
            + "; ".join(
                f"{s}: {r['cold']:.2f}x / {r['warm']:.2f}x ({r['cold_ms']:.0f} / {r['warm_ms']:.0f} ms)"
                if isinstance(r, dict)
                else f"{s}: {r:.2f}x"
                for s, r in latency.items()
            )
            + (
                f". Building the snapshot whole: {data['snapshot_build_ms']:.0f} ms (a query after a write builds"
                " it on the last one, reading only the documents written since)."
                if "snapshot_build_ms" in data
                else "."
            )
        )
    return "\n".join(lines)


COMPACT = (
    BEST,
    MORE_HITS,
    *OUR_PARENTS,
    "chunks 400",
    STOCK_PARENTS,
    *PEERS,
    ORACLE,
)
"""The rows of benchmarks/README.md's tables (``--readme``); every row, the floors' too, is in evidence.json."""


RECOMMENDED = {
    "qmsum": (HYBRID_PARENTS, "README's for meetings (hybrid parents)"),
    "emanual": (SECTION_PARENTS, "README's for manuals (section parents)"),
    "friendsqa": (MORE_HITS, "README's for dialogue (more hits)"),
}
"""Where README.md's "Which retriever" names another of ours than the default for the corpus's kind, and its label."""


def compact(name: str, data: dict) -> str:
    """One table for benchmarks/README.md: recall whole corpus / scoped at each budget, and the junk share at 2,000."""
    whole, scoped = data["results"], data.get("scoped", {})

    def cell(system: str, b: int) -> str:
        parts = [f"{rows[system][b]['recall']:.3f}" for rows in (whole, scoped) if system in rows]
        return " / ".join(parts)

    lines = ["| system | " + " | ".join(f"{b:,}" for b in BUDGETS) + " | junk at 2,000 |"]
    lines.append("| --- |" + " --- |" * (len(BUDGETS) + 1))
    for system in (s for s in COMPACT if s in whole):
        shares = [rows[system][2000].get("junk_share") for rows in (whole, scoped) if system in rows]
        junk = " / ".join("-" if x is None else f"{x:.2f}" for x in shares)  # runs before the junk share: none
        lines.append(f"| {system} | " + " | ".join(cell(system, b) for b in BUDGETS) + f" | {junk} |")
    others = [s for s in whole if not s.startswith("ours") and s != ORACLE]
    ours = [(BEST, "default"), *([RECOMMENDED[name]] if name in RECOMMENDED else [])]
    for system, short in ours:
        for label, fn in ((f"{short} / best other", _over_best), (f"{short}: gap to the oracle closed", _gap_closed)):
            cells = [" / ".join(fn(rows, others, b, system) for rows in (whole, scoped) if rows) for b in BUDGETS]
            lines.append(f"| {label} | " + " | ".join(cells) + " | |")
    system, short = ours[-1]  # where a cell misses, which part lost: of the README's setting for the corpus
    touched = [" / ".join(f"{1 - rows[system][b]['touched']:.0%}" for rows in (whole, scoped) if rows) for b in BUDGETS]
    lines.append(f"| {short}: contexts holding no gold | " + " | ".join(touched) + " | |")
    reached = [" / ".join(_reached(rows, b, system) for rows in (whole, scoped) if rows) for b in BUDGETS]
    lines.append(f"| {short}: recall where its context holds gold | " + " | ".join(reached) + " | |")
    return "\n".join(lines)


def _reached(rows: dict, b: int, system: str = BEST) -> str:
    """``system``'s recall over the contexts that hold some gold: what its units reach of the evidence they hit.

    Its loss against the oracle is expansion's; the contexts holding none are ranking's.
    """
    touched = rows[system][b]["touched"]
    return f"{rows[system][b]['recall'] / touched:.3f}" if touched else "-"


def _best_other(rows: dict, others: list[str], b: int) -> float:
    return max(rows[s][b]["recall"] for s in others if s in rows)


def _over_best(rows: dict, others: list[str], b: int, system: str = BEST) -> str:
    return f"{rows[system][b]['recall'] / max(_best_other(rows, others, b), 1e-9):.2f}x"


def _gap_closed(rows: dict, others: list[str], b: int, system: str = BEST) -> str:
    best, ceiling = _best_other(rows, others, b), rows[ORACLE][b]["recall"]
    if ceiling - best < 0.0005:  # the best other holds what the oracle holds: no gap to close
        return "none" if rows[system][b]["recall"] >= best - 0.0005 else "-"
    return f"{(rows[system][b]['recall'] - best) / (ceiling - best):.0%}"


def _by_mode(latency: dict) -> bool:
    return any(isinstance(r, dict) for r in latency.values())


def plot(name: str, data: dict, path: Path) -> None:
    try:
        import matplotlib
    except ImportError:  # the peers' environment has no plots: `--plots-only` redraws them with ours
        print(f"no matplotlib here: {path.name} not drawn (run --plots-only with the project's Python)")
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for system in ordered(data["results"]):
        by_budget = data["results"][system]
        style = "-" if system.startswith("ours") else "--"
        ax.plot(BUDGETS, [by_budget[b]["recall"] for b in BUDGETS], style, marker="o", label=system)
    ax.set_xscale("log")
    ax.minorticks_off()
    ax.set_xticks(BUDGETS, [f"{b:,}" for b in BUDGETS])
    ax.set_xlabel("budget (cl100k tokens)")
    ax.set_ylabel("evidence recall (chars)")
    ax.set_title(f"{name}: evidence recall against budget")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpora", nargs="+", default=["qmsum", "emanual", "friendsqa", "tatqa"])
    parser.add_argument("--queries", type=int, default=60, help="a fixed sample per corpus (seed 7)")
    parser.add_argument("--pool", type=int, default=100, help="units each ranked system offers the packer")
    parser.add_argument(
        "--no-peers", action="store_true", help="skip LlamaIndex and Haystack (their figures from an earlier run stay)"
    )
    parser.add_argument(
        "--latency-only", action="store_true", help="build ours and re-measure its latency; recall figures stay"
    )
    parser.add_argument(
        "--only", nargs="+", metavar="SYSTEM", help="run these of ours alone; every other figure stays as it was"
    )
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument(
        "--plots-only", action="store_true", help="redraw the PNGs and print the tables from evidence.json"
    )
    parser.add_argument("--readme", action="store_true", help="print benchmarks/README.md's tables from evidence.json")
    args = parser.parse_args()
    if args.readme:
        saved = json.loads((args.out / "evidence.json").read_text())
        for name in args.corpora:
            print(compact(name, with_int_budgets(saved[name])), end="\n\n")
        return
    if args.plots_only:
        saved = json.loads((args.out / "evidence.json").read_text())
        for name in args.corpora:
            if name in saved:
                saved[name] = data = with_int_budgets(saved[name])
                plot(name, data, args.out / f"evidence-{name}.png")
                print(tables(name, data), end="\n\n")
        return
    args.max_docs = {"qmsum": 5}  # 5 meetings: about 4,500 sentences
    args.out.mkdir(exist_ok=True)
    path = args.out / "evidence.json"
    report: dict[str, object] = json.loads(path.read_text()) if path.exists() else {}  # corpora run earlier stay
    report.update({"machine": machine(), "budgets": BUDGETS, "data": str(SHARED)})
    for name in args.corpora:
        earlier = report.get(name)
        if args.latency_only:
            assert isinstance(earlier, dict), f"no recall figures for {name} yet: run it without --latency-only"
            earlier.update(run_corpus(name, args))
            report[name] = earlier = with_int_budgets(earlier)
            print(tables(name, earlier), flush=True)
            path.write_text(json.dumps(report, indent=2))
            continue
        report[name] = data = run_corpus(name, args)
        if args.only:  # the systems not run keep their figures (and the run's latency) from the last run
            assert isinstance(earlier, dict), f"no figures for {name} yet: run it whole first"
            assert earlier.get("queries") == data["queries"], "--only needs the last run's queries (--queries)"
            merged = {key: {**earlier.get(key, {}), **data.get(key, {})} for key in SCOPES if key in data}
            report[name] = data = with_int_budgets({**earlier, **merged})
        elif args.no_peers and isinstance(earlier, dict) and earlier.get("queries") == data["queries"]:
            # The peers' figures do not depend on this library: keep those of the last run with them.
            for key in SCOPES:
                kept = {s: r for s, r in earlier.get(key, {}).items() if s in PEERS}
                data.setdefault(key, {}).update(with_int_budgets({key: kept})[key])
            data["peers_from_earlier_run"] = sorted(s for s in earlier.get("results", {}) if s in PEERS)
        path.write_text(json.dumps(report, indent=2))  # first: a run's figures are never lost to a table or a plot
        print(tables(name, data), flush=True)
        plot(name, data, args.out / f"evidence-{name}.png")


SCOPES = ("results", "scoped")
"""The two scopes' keys in a corpus's figures: the whole corpus, and each query's own document."""


def with_int_budgets(data: dict) -> dict:
    """A corpus's figures as read from JSON, each row keyed by its budgets as ints again."""
    out = dict(data)
    for key in SCOPES:
        if key in data:
            out[key] = {s: {int(b): v for b, v in r.items()} for s, r in data[key].items()}
    return out


def tables(name: str, data: dict) -> str:
    """The corpus's tables: the whole corpus, then scoped where it was run."""
    return "\n\n".join(table(name, data, key) for key in SCOPES if BEST in data.get(key, {}))


if __name__ == "__main__":
    main()
