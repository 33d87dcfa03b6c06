"""The budget report on an index that already exists: time against the indexing it reuses.

Indexes QMSum meetings (over 10,000 sentences) with the CLI's own command, then runs
``langchain-expand report`` on that home twice: reading the index (no corpus path), and
embedding the corpus again (the old behaviour, for the ratio). The model is loaded before the
clocks start in every step; each step runs in this process, one after the other.

Run: ``cd benchmarks && ../.venv/bin/python report.py``; writes ``results/report.json``.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import time
from pathlib import Path

from common import machine, qmsum_meetings

from langchain_expand.store.defaults import default_embeddings
from langchain_expand.tools.cli import main

MEETINGS = 12
RESULTS = Path(__file__).parent / "results" / "report.json"


def run(*argv: str) -> float:
    """Seconds one CLI call takes, its output swallowed."""
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(list(argv)) == 0
    return time.perf_counter() - started


def bench() -> dict[str, object]:
    docs, _ = qmsum_meetings(MEETINGS)
    folder = Path(tempfile.mkdtemp(prefix="lcx-report-"))
    corpus = folder / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps({"doc_id": d["doc_id"], "text": d["text"]}) for d in docs))
    home = str(folder / "home")
    default_embeddings().embed_query("warm up")  # the model loads before any clock starts

    index_s = run("--home", home, "index", "--quiet", str(corpus))
    sentences = json.loads(_capture("--home", home, "report", "--format", "json"))["sentences"]["count"]
    read_s = run("--home", home, "report", "--format", "json")
    embed_s = run("--home", home, "report", str(corpus), "--format", "json")
    return {
        "machine": machine(),
        "meetings": len(docs),
        "sentences": sentences,
        "index_seconds": round(index_s, 1),
        "report_from_index_seconds": round(read_s, 1),
        "report_embedding_again_seconds": round(embed_s, 1),
        "report_from_index_over_indexing": round(read_s / index_s, 3),
    }


def _capture(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(list(argv)) == 0
    return out.getvalue()


if __name__ == "__main__":
    result = bench()
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
