"""Quickstart: sentence windows in an LCEL RAG chain, inside a whole-prompt token budget.

Run: ``.venv/bin/python cookbooks/quickstart.py``
"""

from __future__ import annotations

import tempfile

from _common import answer, documents
from langchain_core.prompts import ChatPromptTemplate

from langchain_expand import FitToBudget, MergeOverlaps, SentenceWindowRetriever, chroma_store, format_docs

# 1. Index: every sentence is embedded on its own; windows are computed at query time.
store = chroma_store("quickstart", persist_directory=tempfile.mkdtemp())
retriever = SentenceWindowRetriever(vectorstore=store, k=6, before=2, after=2)
retriever.add_documents(documents("qmsum"))

# 2. The chain: retrieve windows, merge overlapping ones, fit the whole prompt into 1,200 tokens.
prompt = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer from these meeting excerpts only. Cite them by [number].\n\n{context}"),
        ("human", "{question}"),
    ]
)
context = {"context": (lambda x: x["question"]) | retriever | MergeOverlaps(), "question": lambda x: x["question"]}
chain = context | FitToBudget(max_tokens=1200, prompt=prompt, formatter=format_docs) | prompt

question = "What did the team decide about the remote control's price and budget?"
rendered = chain.invoke({"question": question})
print(f"Q: {question}")
answer(rendered)
