"""One similarity a sentence (``store/similarity.py``): the same bits however many rows are scored with it."""

from __future__ import annotations

import numpy as np

from langchain_expand.store.lexical import LocalSentence
from langchain_expand.store.similarity import cosines, relevances
from langchain_expand.windows.columns import BLOCK, Columns, nearest


def vectors(n: int, seed: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 384)).astype(np.float32)


def columns_of(matrix: np.ndarray) -> Columns:
    rows = [("d", "r1", LocalSentence(i, f"sentence {i}.", 0, 1, " ", 3, "k", matrix[i])) for i in range(len(matrix))]
    return Columns(rows)


def test_a_sentences_similarity_does_not_depend_on_what_is_read_with_it() -> None:
    matrix, query = vectors(200), vectors(1, seed=8)[0]
    alone = [cosines([v], query)[0] for v in matrix]
    assert cosines(list(matrix), query) == alone
    assert cosines(list(matrix[37:91]), query) == alone[37:91]
    columns = columns_of(matrix)
    scores = columns.scores(query)
    assert [scores.similarity(j) for j in range(len(matrix))] == alone  # a block at a time
    assert columns.scores(query).every()[1].tolist() == alone  # every row at once
    rows = np.array([150, 3, 64, BLOCK, 199])
    among = columns.among(rows, scores.query)
    assert among[1].tolist() == [alone[j] for j in rows]  # some rows, in any order


def test_a_zero_vector_scores_zero_not_nan() -> None:
    matrix = vectors(3)
    matrix[1] = 0.0
    assert cosines(list(matrix), vectors(1, seed=9)[0])[1] == 0.0
    assert cosines([matrix[0]], np.zeros(384, dtype=np.float32)) == [0.0]


def test_the_exact_search_over_some_rows_is_the_search_over_all_kept_to_them() -> None:
    matrix, query = vectors(300), vectors(1, seed=10)[0]
    matrix[120] = matrix[40]  # a repeated sentence: its tie goes by position
    columns = columns_of(matrix)
    scores = columns.scores(query)
    dots, every = scores.every()

    def relevance(distance: float) -> float:
        return 1.0 - distance

    whole = nearest(columns, None, (dots, every, columns.squares), scores.query, 300, "cosine", relevance)
    rows = np.array(sorted({*np.random.default_rng(3).choice(300, 90, replace=False).tolist(), 40, 120}))
    among = columns.among(rows, scores.query)
    some = nearest(columns, rows, among, scores.query, 10, "cosine", relevance)
    assert some == [hit for hit in whole if hit[0][1] in set(rows.tolist())][:10]
    assert [p for p, _ in whole].index(("d", 40)) + 1 == [p for p, _ in whole].index(("d", 120))
    for space in ("ip", "l2"):
        assert [p for p, _ in nearest(columns, rows, among, scores.query, 5, space, relevance)] == [
            p
            for p, _ in nearest(columns, None, (dots, every, columns.squares), scores.query, 300, space, relevance)
            if p[1] in set(rows.tolist())
        ][:5]


def test_a_units_relevance_from_its_vector_is_the_exact_searchs_in_every_space() -> None:
    # issue #49: a hit kept the score of the search that found it (Chroma's float32 distance, or
    # the columns'), so one window scored apart in its last bits by memory mode. Scored from its
    # vector (Reads.relevances), it is the score the snapshot's exact search gives it.
    matrix, query = vectors(120), vectors(1, seed=11)[0]
    columns = columns_of(matrix)
    scores = columns.scores(query)
    dots, every = scores.every()

    def relevance(distance: float) -> float:
        return 1.0 - distance / 2.0

    for space in ("cosine", "ip", "l2"):
        found = nearest(columns, None, (dots, every, columns.squares), scores.query, 120, space, relevance)
        rows = [i for (_, i), _ in found]
        assert relevances(list(matrix[rows]), query, space, relevance) == [s for _, s in found], space
        assert relevances([matrix[rows[7]]], query, space, relevance) == [found[7][1]]  # alone, the same bits
    cosine = relevances(list(matrix), query, None, relevance)  # a store that names no space: its cosine
    assert cosine == [min(1.0, max(0.0, c)) for c in cosines(list(matrix), query)]
