"""Shared helpers for the benchmarks. They read ../shared/data (the shared corpora)."""

from __future__ import annotations

import gzip
import json
import platform
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def read(corpus: str, name: str) -> list[dict]:
    with gzip.open(SHARED / corpus / name, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else 0.0


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "median": float(statistics.median(values)) if values else 0.0,
        "p95": pct(values, 95),
        "p99": pct(values, 99),
        "max": float(max(values)) if values else 0.0,
    }


def covered(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """The union of half-open ranges, sorted and disjoint."""
    out: list[list[int]] = []
    for s, e in sorted(ranges):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    total = 0
    for s, e in a:
        for t, u in b:
            total += max(0, min(e, u) - max(s, t))
    return total


def evidence_recall(gold: list[list[int]], returned: list[tuple[int, int]]) -> float:
    """The share of gold characters that the returned spans cover."""
    gold_ranges = covered((s, e) for s, e in gold)
    size = sum(e - s for s, e in gold_ranges)
    return overlap(gold_ranges, covered(returned)) / size if size else 0.0


def machine() -> str:
    import os

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
