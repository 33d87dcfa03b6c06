"""Rerank, then expand: the reranker scores the matched sentences, never the windows.

With a cross-encoder on disk, set ``LANGCHAIN_EXPAND_CROSS_ENCODER`` to its path (for
example a downloaded ``cross-encoder/ms-marco-MiniLM-L-6-v2``) and LangChain's
``CrossEncoderReranker`` is used. Without one, the bundled MiniLM scores by cosine
similarity: a real scorer that reads the text it is given, though, being the retrieval
model itself, it keeps retrieval's order; a cross-encoder is where reranking earns its keep.
Either way the shape is the point: 20 matched sentences go to the reranker, and the best are
expanded into 4 windows afterwards (two matches whose windows merge make one).

Run: ``.venv/bin/python cookbooks/rerank_then_expand.py``
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from _common import documents

from langchain_expand import (
    EmbeddingsReranker,
    RerankThenExpand,
    SentenceWindowRetriever,
    chroma_store,
    default_embeddings,
)


def reranker() -> Any:
    path = os.environ.get("LANGCHAIN_EXPAND_CROSS_ENCODER")
    if path:
        from langchain_classic.retrievers.document_compressors import CrossEncoderReranker
        from langchain_community.cross_encoders import HuggingFaceCrossEncoder

        print(f"reranker: cross-encoder at {path}")
        return CrossEncoderReranker(model=HuggingFaceCrossEncoder(model_name=path), top_n=4)
    print("reranker: bundled MiniLM cosine (set LANGCHAIN_EXPAND_CROSS_ENCODER for a cross-encoder)")
    return EmbeddingsReranker(embeddings=default_embeddings())


windows = SentenceWindowRetriever(vectorstore=chroma_store("rerank", persist_directory=tempfile.mkdtemp()), k=4)
windows.add_documents(documents("qmsum"))
pipeline = RerankThenExpand(retriever=windows, reranker=reranker(), fetch_k=20, k=4)

question = "What did they agree the remote control should look like?"
print(f"Q: {question}")
for doc in pipeline.invoke(question):
    m = doc.metadata
    scores = f"retrieval {m['score']:.3f}, rerank {m['rerank_score']:.3f}"
    print(f"  - {m['doc_id']} hit {m['hit']}: {scores}, {m['tokens']} tokens")
