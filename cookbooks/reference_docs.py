"""Reference docs: Markdown sections as parents, with a per-parent cap and a total budget.

Sections are the right unit for a manual, but their size is whatever the authors wrote.
``max_parent_tokens`` trims an oversized section to the span around its matched child, and
``max_tokens`` bounds the joined context.

Run: ``.venv/bin/python cookbooks/reference_docs.py``
"""

from __future__ import annotations

import tempfile

from _common import documents

from langchain_expand import BudgetedParentDocumentRetriever, MarkdownSectionSplitter, SQLDocStore, chroma_store

home = tempfile.mkdtemp()
shared = {
    "vectorstore": chroma_store("manual-children", persist_directory=home),
    "docstore": SQLDocStore(f"sqlite:///{home}/parents.sqlite"),  # survives a restart
    "parent_splitter": MarkdownSectionSplitter(max_level=2),
}
BudgetedParentDocumentRetriever(**shared).add_documents(documents("emanual"))

question = "How do I transfer my data from an old phone with Smart Switch?"  # the bundled manual answers it
for name, budgets in [("no budgets", {}), ("budgets", {"max_parent_tokens": 150, "max_tokens": 400})]:
    retriever = BudgetedParentDocumentRetriever(**shared, k=4, **budgets)
    parents = retriever.invoke(question)
    total = sum(p.metadata["tokens"] for p in parents)
    print(f"\n{name}: {len(parents)} parents, {total} tokens")
    for p in parents:
        m = p.metadata
        trimmed = " (trimmed around its best child)" if m.get("truncated") else ""
        print(f"  - {' > '.join(m['headings'])}: score {m['score']:.3f}, {m['tokens']} tokens{trimmed}")
