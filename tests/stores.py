"""Real vector stores of every kind the README names, each made fresh in a folder."""

from __future__ import annotations

import atexit
import itertools
from pathlib import Path

from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from langchain_expand import chroma_store

KINDS = ["chroma-cosine", "chroma-l2", "chroma-ip", "faiss-l2", "faiss-ip", "qdrant-cosine", "qdrant-euclid", "memory"]
"""Each store and distance the retrievers are tested on."""

DIMENSIONS = 384
_names = itertools.count()


def make_store(kind: str, folder: Path, embeddings: Embeddings) -> VectorStore:
    """A new, empty store of ``kind``, persisted under ``folder`` where the store persists."""
    name = f"store-{next(_names)}"
    if kind == "chroma-cosine":
        return chroma_store(name, persist_directory=folder / name, embeddings=embeddings)
    if kind in ("chroma-l2", "chroma-ip"):
        from langchain_chroma import Chroma

        space = kind.split("-")[1]
        return Chroma(
            name,
            embedding_function=embeddings,
            persist_directory=str(folder / name),
            collection_configuration={"hnsw": {"space": space}},
        )
    if kind.startswith("faiss"):
        import faiss
        from langchain_community.docstore.in_memory import InMemoryDocstore
        from langchain_community.vectorstores import FAISS
        from langchain_community.vectorstores.utils import DistanceStrategy

        if kind == "faiss-ip":
            index, strategy = faiss.IndexFlatIP(DIMENSIONS), DistanceStrategy.MAX_INNER_PRODUCT
        else:
            index, strategy = faiss.IndexFlatL2(DIMENSIONS), DistanceStrategy.EUCLIDEAN_DISTANCE
        return FAISS(embeddings, index, InMemoryDocstore(), {}, distance_strategy=strategy)
    if kind.startswith("qdrant"):
        from langchain_qdrant import QdrantVectorStore
        from qdrant_client import QdrantClient
        from qdrant_client.http.models import Distance, VectorParams

        distance = Distance.COSINE if kind == "qdrant-cosine" else Distance.EUCLID
        client = QdrantClient(path=str(folder / name))  # embedded local mode: no server
        atexit.register(client.close)  # before the interpreter tears down, which its __del__ trips on
        client.create_collection(name, vectors_config=VectorParams(size=DIMENSIONS, distance=distance))
        return QdrantVectorStore(client=client, collection_name=name, embedding=embeddings, distance=distance)
    if kind == "memory":
        return InMemoryVectorStore(embeddings)
    msg = f"unknown store kind {kind!r}"
    raise ValueError(msg)
