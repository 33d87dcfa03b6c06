"""Whether a change to the query path changed any answer: two commits' answers on one index, compared.

A refactor of the query (a path merged, a cache dropped) must leave every answer as it was.
``build`` indexes the six latency slices once (`latency.sliced`); ``dump`` answers their
queries in every memory mode (the snapshot, past its limit, nothing in memory, no lexical
index) and five call shapes, and writes each window's document, span, score (to the last bit) and count;
``compare`` counts the answers two dumps differ on. Run ``dump`` once per commit, on the same
index, each with that commit's ``src`` first on ``PYTHONPATH``:

    python answers.py build /tmp/answers-index
    PYTHONPATH=/path/to/old/src python answers.py dump /tmp/answers-index old.json
    python answers.py dump /tmp/answers-index new.json
    python answers.py compare old.json new.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from latency import sliced

from langchain_expand import LexicalIndex, Performance, SentenceWindowRetriever, chroma_store
from langchain_expand.store.defaults import default_embeddings

CORPORA = ["qmsum", "emanual", "friendsqa", "tatqa", "loghub", "fastapi-docs"]
MODES: dict[str, dict[str, Any] | None] = {
    "snapshot": {},
    "past the limit": {"performance": Performance(snapshot_limit=0)},
    "nothing in memory": {"performance": Performance(in_memory=False)},
    "no lexical index": None,
}
QUERIES = 40


def calls(doc_id: str) -> list[dict[str, Any]]:
    """The call shapes each query is asked in: guided at two budgets, k fixed, fixed with a budget, filtered."""
    return [
        {"max_tokens": 2000},
        {"max_tokens": 300},
        {"k": 4},
        {"max_tokens": 1000, "window": "fixed"},
        {"max_tokens": 2000, "filter": {"doc_id": doc_id}},
    ]


def build(root: Path) -> None:
    """Index each corpus's slice under ``root``, as the default retriever does."""
    embeddings = default_embeddings()
    for name in CORPORA:
        docs, _ = sliced(name, QUERIES)
        store = chroma_store(name, persist_directory=str(root / name), embeddings=embeddings)
        lexical = LexicalIndex(root / name / "lexical.sqlite")
        SentenceWindowRetriever(vectorstore=store, lexical=lexical).add_documents(
            [Document(d["text"], id=d["doc_id"]) for d in docs]
        )


def dump(root: Path, out: Path) -> None:
    """Every answer of this code on the index under ``root``, by corpus, mode, query and call, to ``out``."""
    embeddings = default_embeddings()
    found: dict[str, list[Any]] = {}
    for name in CORPORA:
        docs, queries = sliced(name, QUERIES)
        store = chroma_store(name, persist_directory=str(root / name), embeddings=embeddings)
        for mode, settings in MODES.items():
            if settings is None:
                retriever = SentenceWindowRetriever(vectorstore=store)
            else:
                lexical = LexicalIndex(root / name / "lexical.sqlite")
                retriever = SentenceWindowRetriever(vectorstore=store, lexical=lexical, **settings)
                if hasattr(retriever, "warm"):  # built before the first query, as code before it built the snapshot
                    retriever.warm()
            for query in queries:
                for call in calls(docs[0]["doc_id"]):
                    windows = retriever.invoke(query, **call)
                    key = f"{name}|{mode}|{query}|{json.dumps(call)}"
                    found[key] = [
                        [w.metadata["doc_id"], w.metadata["span"], w.metadata["score"], w.metadata["tokens"]]
                        for w in windows
                    ]
    out.write_text(json.dumps(found))
    print(f"{len(found)} answers")


def compare(first: Path, second: Path) -> None:
    """How many answers two dumps differ on, by corpus and mode."""
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    if a.keys() != b.keys():
        msg = "the dumps answer different questions: dump both on the same index and script"
        raise SystemExit(msg)
    differ = [key for key in a if a[key] != b[key]]
    by_mode: dict[str, int] = {}
    for key in differ:
        corpus, mode = key.split("|")[:2]
        by_mode[f"{corpus}, {mode}"] = by_mode.get(f"{corpus}, {mode}", 0) + 1
    print(f"{len(a) - len(differ)} of {len(a)} answers identical")
    for where, n in sorted(by_mode.items()):
        print(f"  {where}: {n} differ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build").add_argument("root", type=Path)
    dumped = sub.add_parser("dump")
    dumped.add_argument("root", type=Path)
    dumped.add_argument("out", type=Path)
    compared = sub.add_parser("compare")
    compared.add_argument("first", type=Path)
    compared.add_argument("second", type=Path)
    args = parser.parse_args()
    if args.command == "build":
        build(args.root)
    elif args.command == "dump":
        dump(args.root, args.out)
    else:
        compare(args.first, args.second)


if __name__ == "__main__":
    main()
