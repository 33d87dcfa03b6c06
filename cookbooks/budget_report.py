"""The budget report on your own folder: do windows or parents fit your prompt budget?

Run: ``.venv/bin/python cookbooks/budget_report.py [FOLDER_OR_JSONL] [BUDGET]``
(default: the bundled manual slice and a 2,000-token budget). The same report is on the
command line: ``langchain-expand report FOLDER --budget 16000``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _common import DATA

from langchain_expand.tools.corpus import read_corpus
from langchain_expand.tools.report import budget_report

corpus = Path(sys.argv[1]) if len(sys.argv) > 1 else DATA / "emanual" / "docs.jsonl"
budget = int(sys.argv[2]) if len(sys.argv) > 2 else 2000

report = budget_report(
    list(read_corpus([corpus])),
    k=8,
    budget=budget,
    windows=[(1, 1), (2, 2), (3, 1), (4, 4)],
    reserve=300,  # the system prompt and the question
    pseudo_queries=80,
    corpus_name=corpus.name,
)
print(report.to_markdown())
