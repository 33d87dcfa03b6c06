"""Quick checks of one knob on our retriever alone, with the recall code of ``evidence.py``.

- ``python explore.py hybrid CORPUS``: dense against hybrid (dense + BM25), budget-driven,
  merged, at 250 / 1,000 / 4,000 tokens, 40 queries (seed 7), the corpus's whole collection.
- ``python explore.py radius CORPUS DOCS``: radius 1-4 and gap-bridging merges, on the first
  ``DOCS`` documents that have queries, 30 queries (seed 7), at 500 / 2,000 / 4,000 tokens.
- ``python explore.py latency CORPUS``: p50 query time of the default (guided, hybrid, 2,000
  tokens) and of fixed windows against a raw ``similarity_search(k=16)``, alternating, 40
  queries, on an otherwise idle machine.
- ``python explore.py seeds CORPUS [scoped]``: fewer hits a budget (``tokens_per_sentence`` 30,
  60; ``k`` 4, 8), each window grown further, over the whole collection or each query scoped.
- ``python explore.py floor CORPUS``: the default (guided, hybrid, budget-driven) against a
  relevance floor relative to the best hit (``relative_score_threshold`` 0.3 / 0.5 / 0.7), at
  250 to 8,000 tokens, 40 queries (seed 7), the corpus's whole collection (QMSum: 5 meetings).
- ``python explore.py heading CORPUS``: the heading stop up only (shipped), both ways, and
  none, at 250 to 8,000 tokens, 40 queries (seed 7); only Markdown corpora hold headings.
- ``python explore.py guided CORPUS``: fixed radius-2 windows against guided growth and its
  settings (decay, similarity weight, radius), hybrid ranking, budget-driven, at 250 / 1,000 /
  4,000 tokens, 40 queries (seed 7), the corpus's whole collection (QMSum: 5 meetings).

- ``python explore.py meetings bench|held``: the meetings settings (the default, the floor, the
  floor with ``max_radius`` 128, our parents) on QMSum's benchmark meetings or 12 held out,
  whole collection and scoped, at 500 to 8,000 tokens.

- ``python explore.py manuals bench|held``: the E-Manual's setting in README.md (our hybrid parents over
  its Markdown sections, 200-char children) against the window default, at 250 to 8,000 tokens, on
  the evidence benchmark's 60 queries (seed 7) or 120 others (seed 8), which no setting was tuned on.

- ``python explore.py hits CORPUS``: where the ranking puts the gold, before any window grows:
  the share of queries whose best 1 / 5 / 10 hits (``expand=False``) touch a gold span, and the
  share of the best 10 that do, over the whole collection and scoped (QMSum: 5 meetings).

- ``python explore.py twosizes CORPUS``: matching at two sizes, a probe (the dense ranking by a
  sentence's cosine mixed with its window's centroid), whole collection and scoped.
- ``python explore.py passages CORPUS [bench|held]``: matching passages as text, a probe (the
  dense ranking by a sentence's cosine mixed with the best 64-256-word passage holding it);
  QMSum's benchmark meetings or 12 held out.
- ``python explore.py growthbm25 CORPUS``: growth weighing a neighbour's BM25 score (over the
  query's best, times 0.3 or 0.6) beside its cosine, a probe, whole and scoped (QMSum: 5 meetings).

Reads ../shared/data. These are the development checks quoted in README.md; ``evidence.py``
is the full comparison.
"""

from __future__ import annotations

import random
import sys
from typing import Any

from common import evidence_recall, read  # type: ignore[import-not-found]
from langchain_core.documents import Document

from langchain_expand import LexicalIndex, SentenceWindowRetriever, chroma_store


def sample(name: str, docs_limit: int | None, n: int) -> tuple[list[dict], list[dict]]:
    queries = [q for q in read(name, "queries.jsonl.gz") if q["gold_spans"] and None not in q["gold_spans"]]
    ids = set(list(dict.fromkeys(q["doc_id"] for q in queries))[:docs_limit])
    docs = [d for d in read(name, "docs.jsonl.gz") if d["doc_id"] in ids]
    mine = [q for q in queries if q["doc_id"] in ids]
    return docs, random.Random(7).sample(mine, min(n, len(mine)))


def recall(
    retriever: SentenceWindowRetriever, queries: list[dict], budget: int, *, scoped: bool = False, **call: object
) -> float:
    """Mean evidence recall at ``budget``; ``scoped``: each query filtered to its own document."""
    total = 0.0
    for q in queries:
        where = {"filter": {"doc_id": q["doc_id"]}} if scoped else {}
        units = retriever.invoke(q["query"], max_tokens=budget, **call, **where)
        spans = [
            (u.metadata["start_index"], u.metadata["end_index"]) for u in units if u.metadata["doc_id"] == q["doc_id"]
        ]
        total += evidence_recall(q["gold_spans"], spans)
    return round(total / len(queries), 3)


def guided(name: str) -> None:
    from langchain_expand.windows import growth

    docs, queries = sample(name, 5 if name == "qmsum" else None, 40)
    retriever = SentenceWindowRetriever(vectorstore=chroma_store("explore"), merge=True, lexical=LexicalIndex())
    retriever.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
    retriever.warm()  # what queries hold in memory, built before the first
    variants: list[tuple[str, dict, dict]] = [
        ("fixed radius 2", {"window": "fixed"}, {}),
        ("guided (shipped)", {}, {}),
        ("guided, decay 0.95 at every budget (before)", {}, {"DECAY_SCALE": 0.0, "MAX_DECAY": 0.95}),
        ("guided, decay 0.98 at every budget", {}, {"DECAY_SCALE": 0.0, "MAX_DECAY": 0.98}),
        ("guided, similarity weight 0", {}, {"SIMILARITY_WEIGHT": 0.0}),
        ("guided, similarity weight 0.5", {}, {"SIMILARITY_WEIGHT": 0.5}),
        ("guided, radius 4", {}, {"MAX_RADIUS": 4}),
        ("guided, radius 16", {}, {"MAX_RADIUS": 16}),
    ]
    shipped = {k: getattr(growth, k) for k in ("DECAY_SCALE", "MAX_DECAY", "SIMILARITY_WEIGHT")}
    for label, call, settings in variants:
        radius = settings.pop("MAX_RADIUS", growth.MAX_RADIUS)
        for key, value in {**shipped, **settings}.items():
            setattr(growth, key, value)
        tried = retriever.model_copy(update={"max_radius": radius})
        budgets = (250, 500, 1000, 2000, 4000, 8000)
        print(name, label, *[recall(tried, queries, budget, **call) for budget in budgets], flush=True)


def floor(name: str) -> None:
    docs, queries = sample(name, 5 if name == "qmsum" else None, 40)
    retriever = SentenceWindowRetriever(vectorstore=chroma_store("explore"), lexical=LexicalIndex())
    retriever.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
    retriever.warm()  # what queries hold in memory, built before the first
    for threshold in (None, 0.3, 0.5, 0.7):
        tried = retriever.model_copy(update={"relative_score_threshold": threshold})
        budgets = (250, 500, 1000, 2000, 4000, 8000)
        print(name, f"floor {threshold}", *[recall(tried, queries, budget) for budget in budgets], flush=True)


def heading(name: str) -> None:
    from langchain_expand.windows import growth

    docs, queries = sample(name, None, 40)
    retriever = SentenceWindowRetriever(vectorstore=chroma_store("explore"), lexical=LexicalIndex())
    retriever.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
    retriever.warm()  # what queries hold in memory, built before the first
    for label, stops in (("up (shipped)", {-1}), ("both ways", {-1, 1}), ("none", set())):
        growth.HEADING_STOPS = frozenset(stops)
        budgets = (250, 500, 1000, 2000, 4000, 8000)
        print(name, f"heading stop {label}", *[recall(retriever, queries, budget) for budget in budgets], flush=True)


def latency(name: str) -> None:
    import statistics
    import time

    docs, queries = sample(name, 5 if name == "qmsum" else None, 40)
    store = chroma_store("explore")
    retriever = SentenceWindowRetriever(vectorstore=store, merge=True, lexical=LexicalIndex())
    retriever.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
    retriever.warm()  # what queries hold in memory, built before the first
    calls = {
        "raw similarity_search(k=16)": lambda q: store.similarity_search(q, k=16),
        "default (guided, hybrid), 2,000 tokens": lambda q: retriever.invoke(q, max_tokens=2000),
        "fixed windows, hybrid, 2,000 tokens": lambda q: retriever.invoke(q, max_tokens=2000, window="fixed"),
    }
    times: dict[str, list[float]] = {label: [] for label in calls}
    for q in [q["query"] for q in queries] * 2:  # the first pass warms caches; both are timed alike
        for label, call in calls.items():
            started = time.perf_counter()
            call(q)
            times[label].append(time.perf_counter() - started)
    raw = statistics.median(times["raw similarity_search(k=16)"])
    for label, seen in times.items():
        p50 = statistics.median(seen)
        print(name, label, f"p50 {p50 * 1000:.0f} ms, {p50 / raw:.2f}x raw", flush=True)


def seeds(name: str, scope: str = "whole") -> None:
    """Fewer hits a budget, each window grown further (``tokens_per_sentence``, or ``k``), and how alike neighbours are.

    ``scope`` ``scoped``: each query filtered to its own document, at 500 to 8,000 tokens.

    Where a corpus's evidence is a long run (meetings), a budget spread over many hits holds a
    little of each region; the neighbour coherence (mean cosine of each sentence with the next)
    is what the corpus says of its runs, measured without gold.
    """
    import numpy as np

    from langchain_expand.policy import BudgetPolicy

    docs, queries = sample(name, 5 if name == "qmsum" else None, 40)
    hybrid = SentenceWindowRetriever(vectorstore=chroma_store("explore"), merge=True, lexical=LexicalIndex())
    hybrid.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
    hybrid.warm()  # what queries hold in memory, built before the first
    held = hybrid._views.built
    if held is not None and held.whole and held.columns is not None:
        columns = held.columns
        m = columns._matrix / np.linalg.norm(columns._matrix, axis=1, keepdims=True)
        same = np.array(columns._doc_of[1:]) == np.array(columns._doc_of[:-1])
        near = np.einsum("ij,ij->i", m[1:], m[:-1])[same]
        far = np.einsum("ij,ij->i", m[1:], np.roll(m, 17, axis=0)[1:])[same]
        print(name, "neighbour coherence", round(float(near.mean()), 3), "17 apart", round(float(far.mean()), 3))
    scoped = scope == "scoped"
    budgets = (500, 1000, 2000, 4000, 8000) if scoped else (500, 2000, 8000)
    for per, k in ((15, None), (30, None), (60, None), (15, 4), (15, 8)):
        tried = hybrid.model_copy(update={"budget_policy": BudgetPolicy(tokens_per_sentence=per), "k": k})
        cells = [recall(tried, queries, budget, scoped=scoped) for budget in budgets]
        print(name, scope, f"tokens_per_sentence={per}, k={k}", cells, flush=True)


def meetings(which: str) -> None:
    """The meetings settings on QMSum, over the whole collection and scoped to each query's meeting (a filter).

    The default, the floor (``score_threshold=0.4``), the floor with a wider ``max_radius``, and
    our parents, at 500 to 8,000 tokens. ``which``: ``bench``, the evidence benchmark's 5
    meetings (25 queries), or ``held``, the next 12 (49 queries), which no setting was tuned on.
    """
    from evidence import build_our_parents  # type: ignore[import-not-found]

    queries = [q for q in read("qmsum", "queries.jsonl.gz") if q["gold_spans"] and None not in q["gold_spans"]]
    order = list(dict.fromkeys(q["doc_id"] for q in queries))
    ids = set(order[:5] if which == "bench" else order[5:17])
    docs = [d for d in read("qmsum", "docs.jsonl.gz") if d["doc_id"] in ids]
    queries = [q for q in queries if q["doc_id"] in ids]
    hybrid = SentenceWindowRetriever(vectorstore=chroma_store("explore"), k=None, merge=True, lexical=LexicalIndex())
    hybrid.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
    hybrid.warm()  # what queries hold in memory, built before the first
    wider = hybrid.model_copy(update={"max_radius": 128})

    def windows(retriever: SentenceWindowRetriever, **call: object) -> Any:
        def invoke(query: str, budget: int, scope: str | None) -> list[tuple[str, int, int]]:
            where = {} if scope is None else {"filter": {"doc_id": scope}}
            found = retriever.invoke(query, max_tokens=budget, **call, **where)
            return [(u.metadata["doc_id"], u.metadata["start_index"], u.metadata["end_index"]) for u in found]

        return invoke

    systems = {
        "default": windows(hybrid),
        "score_threshold 0.4": windows(hybrid, score_threshold=0.4),
        "score_threshold 0.4, max_radius 128": windows(wider, score_threshold=0.4),
        **build_our_parents(docs),
    }
    for label, invoke in systems.items():
        for scoped in (False, True):
            cells = []
            for budget in (500, 1000, 2000, 4000, 8000):
                total = 0.0
                for q in queries:
                    units = invoke(q["query"], budget, q["doc_id"] if scoped else None)
                    total += evidence_recall(q["gold_spans"], [(u[1], u[2]) for u in units if u[0] == q["doc_id"]])
                cells.append(round(total / len(queries), 3))
            print(which, len(queries), label, "scoped" if scoped else "whole", *cells, flush=True)


def manuals(which: str) -> None:
    """The E-Manual's section parents (``evidence.SECTION_PARENTS``) against the window default (see the module)."""
    from evidence import SECTION_PARENTS, build_our_parents, corpus  # type: ignore[import-not-found]

    docs, queries = corpus("emanual", None)
    bench = random.Random(7).sample(queries, 60)
    others = [q for q in queries if q not in bench]
    queries = random.Random(8).sample(others, 120) if which == "held" else bench
    windows = SentenceWindowRetriever(vectorstore=chroma_store("explore"), lexical=LexicalIndex())
    windows.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
    windows.warm()  # what queries hold in memory, built before the first
    sections = build_our_parents(docs)[SECTION_PARENTS]
    for budget in (250, 500, 1000, 2000, 4000, 8000):
        parents = sum(
            evidence_recall(q["gold_spans"], [(u[1], u[2]) for u in sections(q["query"], budget, None)])
            for q in queries
        )
        print(which, budget, "default", recall(windows, queries, budget), "sections", round(parents / len(queries), 3))


def hits(name: str) -> None:
    """Where the ranking puts the gold (see the module), 60 queries (seed 7), whole and scoped."""
    docs, queries = sample(name, 5 if name == "qmsum" else None, 60)
    hybrid = SentenceWindowRetriever(vectorstore=chroma_store("explore"), lexical=LexicalIndex())
    hybrid.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
    hybrid.warm()  # what queries hold in memory, built before the first
    for scoped in (False, True):
        found = {1: 0.0, 5: 0.0, 10: 0.0, "of 10": 0.0}
        for q in queries:
            where = {"filter": {"doc_id": q["doc_id"]}} if scoped else {}
            ranked = hybrid.invoke(q["query"], expand=False, k=10, **where)
            gold = [
                u.metadata["doc_id"] == q["doc_id"]
                and any(a < u.metadata["end_index"] and u.metadata["start_index"] < b for a, b in q["gold_spans"])
                for u in ranked
            ]
            for k in (1, 5, 10):
                found[k] += any(gold[:k]) / len(queries)
            found["of 10"] += sum(gold) / 10 / len(queries)
        cells = " ".join(f"{k}: {v:.2f}" for k, v in found.items())
        print(name, len(queries), "scoped" if scoped else "whole", cells, flush=True)


def mixed(retriever: SentenceWindowRetriever, queries: list[dict], label: str, alpha: float, second: Any) -> None:
    """Recall, whole and scoped, with the snapshot's dense ranking by ``alpha * cosine + (1 - alpha) * second``.

    ``second(columns, query)`` scores every row against the unit-length query. Patched into
    :meth:`Reads.nearest` for the run (``alpha`` 1: as shipped); each hit keeps its sentence's relevance.
    """
    import numpy as np

    from langchain_expand.windows.reads import Reads

    shipped = Reads.nearest

    def nearest(self: Any, vector: Any, k: int) -> Any:
        if alpha >= 1.0 or not self.whole:
            return shipped(self, vector, k)
        scores = self._scores_for(vector)
        _, cosines = scores.every()
        query = np.asarray(scores.query)
        ranked = alpha * cosines + (1 - alpha) * second(self.columns, query / np.linalg.norm(query))
        rows = None if self.documents is None else self._rows_of(self.documents, self.columns)
        if rows is not None:
            within = np.zeros(len(ranked), dtype=bool)
            within[rows] = True
            ranked[~within] = -np.inf
        top = np.argsort(-ranked, kind="stable")[: min(k, len(ranked) if rows is None else len(rows))]
        return [(self.columns.position(int(j)), self.store.relevance(float(1.0 - cosines[j]))) for j in top]

    Reads.nearest = nearest  # type: ignore[method-assign]
    try:
        for scope in ("whole", "scoped"):
            budgets = (250, 500, 1000, 2000, 4000, 8000)
            print(label, scope, *[recall(retriever, queries, b, scoped=scope == "scoped") for b in budgets], flush=True)
    finally:
        Reads.nearest = shipped  # type: ignore[method-assign]


def two_sizes(name: str) -> None:
    """Matching at two sizes: the dense ranking by a sentence's cosine mixed with its window's.

    A window is the centroid of the sentence's normalized vector and its neighbours' (``R``
    either side, within its document); the snapshot's exact search ranks by
    ``alpha * sentence + (1 - alpha) * window``, each hit keeping its sentence's relevance.
    A probe, patched into :meth:`Reads.nearest` here: nothing of it ships.
    """
    import numpy as np

    docs, queries = sample(name, 5 if name == "qmsum" else None, 60)
    hybrid = SentenceWindowRetriever(vectorstore=chroma_store("explore"), k=None, merge=True, lexical=LexicalIndex())
    hybrid.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
    hybrid.warm()  # what queries hold in memory, built before the first
    windows: dict[int, Any] = {}

    def centroids(columns: Any, reach: int) -> Any:
        if reach not in windows:
            unit = columns._matrix / columns._norms[:, None]
            windows[reach] = found = np.zeros_like(unit)
            for doc_id in columns.documents():
                rows = np.asarray(columns.rows(doc_id), dtype=np.int64)
                sums = np.vstack([np.zeros((1, unit.shape[1])), np.cumsum(unit[rows], axis=0, dtype=np.float64)])
                at = np.arange(len(rows))
                summed = sums[np.minimum(at + reach + 1, len(rows))] - sums[np.maximum(at - reach, 0)]
                found[rows] = summed / np.maximum(np.linalg.norm(summed, axis=1, keepdims=True), 1e-9)
        return windows[reach]

    for reach, alpha in ((0, 1.0), (3, 0.5), (6, 0.5), (3, 0.7)):
        label = f"{name} window +-{reach}, alpha {alpha}"
        mixed(hybrid, queries, label, alpha, lambda c, q, r=reach: centroids(c, r) @ q)


def passages(name: str, which: str = "bench") -> None:
    """Matching passages as text: each sentence ranked by its cosine mixed with its best passage's.

    A passage is the run of sentences from every ``stride``-th sentence of a document until it
    holds ``words`` words (the auto-merging peers match 128-word leaves), embedded as text by the
    retriever's model. The snapshot's exact search ranks sentences by ``alpha * sentence + (1 -
    alpha) * best passage holding it``; each hit keeps its sentence's relevance. A probe, patched
    into :meth:`Reads.nearest` here: nothing of it ships. ``which`` picks QMSum's meetings.
    """
    import numpy as np

    if name == "qmsum":
        queries = [q for q in read(name, "queries.jsonl.gz") if q["gold_spans"] and None not in q["gold_spans"]]
        order = list(dict.fromkeys(q["doc_id"] for q in queries))
        ids = set(order[:5] if which == "bench" else order[5:17])
        docs = [d for d in read(name, "docs.jsonl.gz") if d["doc_id"] in ids]
        queries = [q for q in queries if q["doc_id"] in ids]
    else:
        docs, queries = sample(name, None, 60)
    hybrid = SentenceWindowRetriever(vectorstore=chroma_store("explore"), k=None, merge=True, lexical=LexicalIndex())
    hybrid.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
    hybrid.warm()  # what queries hold in memory, built before the first
    embeddings = hybrid.vectorstore.embeddings
    best: dict[int, Any] = {}

    def passage_scores(columns: Any, words: int, query: np.ndarray) -> np.ndarray:
        if words not in best:
            spans, texts = [], []
            for doc_id in columns.documents():
                rows = np.asarray(columns.rows(doc_id), dtype=np.int64)
                copies = columns.run(doc_id, columns.document(doc_id)[0], 0, len(rows))
                sizes = [len(c.text.split()) for c in copies]
                start = 0
                while start < len(rows):
                    end, held = start, 0
                    while end < len(rows) and held < words:
                        held += sizes[end]
                        end += 1
                    spans.append(rows[start:end])
                    texts.append(" ".join(c.text for c in copies[start:end]))
                    start += max(1, (end - start) // 2)
            vectors = np.asarray(embeddings.embed_documents(texts), dtype=np.float32)
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
            best[words] = (spans, vectors)
        spans, vectors = best[words]
        cosines = vectors @ query
        found = np.full(len(columns), -1.0, dtype=np.float32)
        for rows, c in zip(spans, cosines.tolist(), strict=True):
            np.maximum.at(found, rows, c)
        return found

    for words, alpha in ((0, 1.0), (128, 0.5), (128, 0.3), (64, 0.5), (256, 0.5)):
        label = f"{name} {which} {len(queries)} passages {words} words, alpha {alpha}"
        mixed(hybrid, queries, label, alpha, lambda c, q, w=words: passage_scores(c, w, q))


def growth_bm25(name: str) -> None:
    """Growth weighing a neighbour's BM25 score beside its cosine, a probe (see the module), whole and scoped.

    A neighbour's similarity as growth sees it (the snapshot's lookup) becomes its cosine plus
    ``weight`` x its BM25 score over the query's best; the ranking and the hits' scores are untouched.
    """
    from langchain_expand.windows import bm25, columns, hits

    docs, queries = sample(name, 5 if name == "qmsum" else None, 40)
    retriever = SentenceWindowRetriever(vectorstore=chroma_store("explore"), lexical=LexicalIndex())
    retriever.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
    retriever.warm()  # what queries hold in memory, built before the first
    held = retriever._views.built
    assert held is not None
    assert held.whole
    assert held.bm25 is not None
    assert len(held.columns or ()) == held.bm25._n
    boost: dict[str, Any] = {"weight": 0.0, "rows": None}  # BM25's rows are the snapshot's columns' here
    ranked, similarity = hits.Ranking.__call__, columns.Scores.similarity

    def call(self: Any, k: int) -> Any:
        boost["rows"] = None
        if boost["weight"] and isinstance(self.lexical, bm25.Bm25Search):
            scores = self.lexical._of(self.dense.query).scores
            if len(scores) and scores.max() > 0:
                boost["rows"] = boost["weight"] * scores / scores.max()
        return ranked(self, k)

    def boosted(self: Any, row: int) -> Any:
        found, rows = similarity(self, row), boost["rows"]
        return found if found is None or rows is None else found + float(rows[row])

    hits.Ranking.__call__, columns.Scores.similarity = call, boosted  # type: ignore[method-assign]
    try:
        for weight in (0.0, 0.3, 0.6):
            boost["weight"] = weight
            for scope in ("whole", "scoped") if name != "emanual" else ("whole",):
                budgets = (250, 500, 1000, 2000, 4000, 8000)
                found = [recall(retriever, queries, b, scoped=scope == "scoped") for b in budgets]
                print(name, f"growth bm25 {weight}", scope, *found, flush=True)
    finally:
        hits.Ranking.__call__, columns.Scores.similarity = ranked, similarity  # type: ignore[method-assign]


def main() -> None:
    mode, name = sys.argv[1], sys.argv[2]
    if mode == "guided":
        guided(name)
    elif mode == "floor":
        floor(name)
    elif mode == "heading":
        heading(name)
    elif mode == "latency":
        latency(name)
    elif mode == "seeds":
        seeds(name, *sys.argv[3:])
    elif mode == "meetings":
        meetings(name)
    elif mode == "hits":
        hits(name)
    elif mode == "manuals":
        manuals(name)
    elif mode == "twosizes":
        two_sizes(name)
    elif mode == "passages":
        passages(name, *sys.argv[3:])
    elif mode == "growthbm25":
        growth_bm25(name)
    elif mode == "hybrid":
        docs, queries = sample(name, 5 if name == "qmsum" else None, 40)
        hybrid = SentenceWindowRetriever(vectorstore=chroma_store("explore"), merge=True, lexical=LexicalIndex())
        hybrid.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
        hybrid.warm()  # what queries hold in memory, built before the first
        dense = hybrid.model_copy(update={"lexical": None})
        for budget in (250, 1000, 4000):
            print(name, budget, "dense", recall(dense, queries, budget), "hybrid", recall(hybrid, queries, budget))
    else:
        docs, queries = sample(name, int(sys.argv[3]), 30)
        base = SentenceWindowRetriever(vectorstore=chroma_store("explore"), merge=True)
        base.add_documents([Document(d["text"], id=d["doc_id"]) for d in docs])
        base.warm()  # what queries hold in memory, built before the first
        for budget in (500, 2000, 4000):
            for gap, radius in ((0, 1), (0, 2), (3, 2), (8, 2), (0, 3), (0, 4), (4, 4)):
                tried = base.model_copy(update={"merge_gap": gap, "before": radius, "after": radius})
                print(name, budget, f"radius {radius}, gap {gap}", recall(tried, queries, budget), flush=True)


if __name__ == "__main__":
    main()
