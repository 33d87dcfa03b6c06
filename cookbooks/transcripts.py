"""Transcripts: asymmetric windows (the question before an answer) and merging adjacent hits.

In dialogue, the sentence that gives an answer its meaning is usually the question before
it. A window of 3 before and 1 after holds as many sentences as 2 and 2, so it costs the
same tokens: any difference in quality is about *which* sentences, not how many.

Run: ``.venv/bin/python cookbooks/transcripts.py``
"""

from __future__ import annotations

import statistics
import tempfile

from _common import documents

from langchain_expand import MergeOverlaps, SentenceWindowRetriever, TokenCounter, chroma_store

counter = TokenCounter()
# One window a hit (merge=False), to show below what merging them saves.
store = chroma_store("transcripts", persist_directory=tempfile.mkdtemp())
retriever = SentenceWindowRetriever(vectorstore=store, k=8, merge=False)
retriever.add_documents(documents("qmsum"))
questions = [
    "Who is responsible for the industrial design?",
    "What features should the remote have?",
    "How much should the remote cost to produce?",
    "What did they say about the previous meeting?",
]

# The same index answers every window shape: no re-embedding between these calls.
for before, after in [(2, 2), (3, 1)]:
    sizes = [d.metadata["tokens"] for q in questions for d in retriever.invoke(q, before=before, after=after)]
    print(f"window {before}:{after}: median {statistics.median(sizes):.0f} tokens per window")

q = questions[1]
windows = retriever.invoke(q, before=3, after=1)
print(f"\nQ: {q}\nTop window (3 before, 1 after), hit marked with >>:")
top = windows[0]
for (start, end), index in zip(top.metadata["sentences"], range(*top.metadata["span"]), strict=True):
    text = top.page_content[start - top.metadata["start_index"] : end - top.metadata["start_index"]]
    print(f"  {'>>' if index == top.metadata['hit'] else '  '} {text}")

# Hits close together give overlapping windows; merged, the shared sentences are sent once.
merge = MergeOverlaps()
plain_tokens = merged_tokens = units = merged_units = 0
for q in questions:
    found = retriever.invoke(q, k=12, before=4, after=4)
    merged = merge.invoke(found)
    plain_tokens += counter("\n\n".join(d.page_content for d in found))
    merged_tokens += counter("\n\n".join(d.page_content for d in merged))
    units += len(found)
    merged_units += len(merged)
print(f"\n{len(questions)} questions, k=12, 4 sentences each side: {units} windows, {plain_tokens} tokens")
print(f"merged: {merged_units} units, {merged_tokens} tokens")
print(f"merging saved {plain_tokens - merged_tokens} tokens of text that would have been sent twice")
