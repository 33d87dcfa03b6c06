"""Copy small slices of ../shared/data into tests/data and src/langchain_expand/data (demo and cookbooks).

Run once from the repo root: ``python scripts/make_slices.py``. The project's tests and
cookbooks then run without ../shared. Each slice keeps the source format (JSON Lines,
``doc_id``/``text``/``sections``; queries with ``gold_spans``) and a LICENSE line.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
ROOT = Path(__file__).resolve().parents[1]

LICENSES = {
    "qmsum": "QMSum (Zhong et al., NAACL 2021), MIT; transcripts from AMI and ICSI (CC BY 4.0)",
    "emanual": "E-Manual QA (Nandy et al., Findings of EMNLP 2021), Apache-2.0; manual text by Samsung",
    "fastapi-docs": "fastapi/fastapi docs/en/docs, MIT",
    "loghub": "loghub (He et al., ISSRE 2023), for research use; cite it",
    "friendsqa": "FriendsQA (Yang and Choi, SIGDIAL 2019), Apache-2.0",
    "tatqa": "TAT-QA (Zhu et al., ACL 2021), MIT",
}


def read(corpus: str, name: str) -> list[dict]:
    with gzip.open(SHARED / corpus / name, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def head_sections(doc: dict, n: int) -> dict:
    """The first ``n`` sections of a document, offsets kept valid."""
    sections = doc["sections"][:n]
    end = sections[-1]["end"]
    return {"doc_id": doc["doc_id"], "text": doc["text"][:end], "sections": sections}


def log_head(doc: dict, lines: int) -> dict:
    text = "\n".join(doc["text"].split("\n")[:lines])
    return {"doc_id": doc["doc_id"], "text": text}


def slice_into(dest: Path, meetings: list[str], manual: str, n_sections: int) -> None:
    docs = {d["doc_id"]: d for d in read("qmsum", "docs.jsonl.gz")}
    queries = [q for q in read("qmsum", "queries.jsonl.gz") if q["doc_id"] in meetings]
    write(dest / "qmsum" / "docs.jsonl", [docs[m] for m in meetings])
    write(dest / "qmsum" / "queries.jsonl", queries)
    manual_doc = head_sections(next(d for d in read("emanual", "docs.jsonl.gz") if d["doc_id"] == manual), n_sections)
    end = len(manual_doc["text"])
    manual_queries = [
        q
        for q in read("emanual", "queries.jsonl.gz")
        if q["doc_id"] == manual and all(e <= end for _, e in q["gold_spans"])
    ]
    write(dest / "emanual" / "docs.jsonl", [manual_doc])
    if manual_queries:
        write(dest / "emanual" / "queries.jsonl", manual_queries)
    licence = "\n".join(f"{k}/: {v}" for k, v in LICENSES.items() if (dest / k).exists())
    (dest / "LICENSES.txt").write_text(
        "Slices of public data sets, copied from the shared corpora by scripts/make_slices.py.\n" + licence + "\n"
    )


def main() -> None:
    fastapi = {d["doc_id"]: d for d in read("fastapi-docs", "docs.jsonl.gz")}
    picked = [
        d
        for d in fastapi.values()
        if not Path(d["doc_id"]).name.startswith("_")
        and "```" in d["text"]
        and "|" in d["text"]
        and len(d["text"]) < 12000
    ][:3]
    write(ROOT / "tests" / "data" / "fastapi-docs" / "docs.jsonl", picked)
    logs = read("loghub", "docs.jsonl.gz")[:3]
    write(ROOT / "tests" / "data" / "loghub" / "docs.jsonl", [log_head(d, 300) for d in logs])
    friends = read("friendsqa", "docs.jsonl.gz")[:2]  # dialogue with short answers: names and exact words
    kept = {d["doc_id"] for d in friends}
    write(ROOT / "tests" / "data" / "friendsqa" / "docs.jsonl", friends)
    usable = [q for q in read("friendsqa", "queries.jsonl.gz") if q["doc_id"] in kept and None not in q["gold_spans"]]
    write(ROOT / "tests" / "data" / "friendsqa" / "queries.jsonl", usable)
    passages = read("tatqa", "docs.jsonl.gz")[:40]  # financial text with tables: long rows, exact figures
    kept = {d["doc_id"] for d in passages}
    write(ROOT / "tests" / "data" / "tatqa" / "docs.jsonl", passages)
    write(
        ROOT / "tests" / "data" / "tatqa" / "queries.jsonl",
        [q for q in read("tatqa", "queries.jsonl.gz") if q["doc_id"] in kept],
    )
    slice_into(ROOT / "tests" / "data", ["ES2005a", "IS1004a", "ES2013a"], "smart_tv_remote", 40)
    slice_into(ROOT / "src" / "langchain_expand" / "data", ["IS1001a", "TS3012a", "IS1009a"], "galaxy_s10", 60)


if __name__ == "__main__":
    main()
