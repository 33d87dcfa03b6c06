"""The call contract every retriever and runnable keeps: strict arguments, one wording per rule, async.

A call's parameters are resolved against the instance's fields and checked once, by the rules
of :mod:`langchain_expand.rules` (one wording per rule, naming the parameter and the fix); an
unknown keyword is refused with the closest valid name.

Sync and async share one implementation: :class:`AsyncByThread` runs the sync method in an
executor, forwarding every argument. The default stack (Chroma, SQLite) has no native async
I/O, so a thread is what an async call would cost anyway.
"""

from __future__ import annotations

import copy
import difflib
import pickle
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import LangSmithRetrieverParams
from langchain_core.runnables.config import run_in_executor
from pydantic import BaseModel, model_validator
from pydantic_core import PydanticUndefined

__all__ = [
    "AsyncByThread",
    "AsyncQueryByThread",
    "CheckedAssignment",
    "ExpandDeprecationWarning",
    "Portable",
    "Serialisable",
    "deprecated",
    "from_search_kwargs",
    "list_fields",
    "reject_unknown",
    "renamed",
    "renamed_attribute",
    "traced",
]


_PEERS_NAMES = {"top_k": ("k",), "similarity_top_k": ("k",), "window_size": ("before", "after")}
"""What LlamaIndex and Haystack call an argument of ours (``similarity_top_k``, ``window_size``):
spelled otherwise, so no close match finds it."""


def reject_unknown(owner: str, given: dict[str, Any], known: Iterable[str]) -> None:
    """A typo (``befor=3``), or a peer's name for ours (``top_k``), is an error naming the valid argument.

    Not a silent default: where nothing is close, the valid arguments are listed.
    """
    valid = sorted(known)
    for name in given:
        if name not in valid:
            meant = _PEERS_NAMES.get(name, ())
            close = list(meant) if meant and set(meant) <= set(valid) else difflib.get_close_matches(name, valid, n=1)
            named = " and ".join(f"`{n}`" for n in close)
            hint = f" Did you mean {named}?" if close else f" Valid arguments: {', '.join(valid)}."
            msg = f"{owner} got an unknown argument `{name}`.{hint}"
            raise ValueError(msg)


def list_fields(cls: Any) -> None:
    """Add an ``Attributes:`` section to a pydantic class's docstring: each field and its description's first paragraph.

    A field's docstring reaches ``model_fields`` (``use_attribute_docstrings``) but not
    ``help()`` or an IDE's hover, which read the class's docstring.
    """
    lines = [
        f"        {name}: {' '.join(field.description.split(chr(10) * 2)[0].split())}"
        for name, field in cls.model_fields.items()
        if field.description
    ]
    cls.__doc__ = f"{(cls.__doc__ or '').rstrip()}\n\n    Attributes:\n" + "\n".join(lines) + "\n"


class ExpandDeprecationWarning(DeprecationWarning):
    """A name this library renamed: the old one still works, and will be removed."""


_INSIDE = frozenset({"langchain_expand", "pydantic", "pydantic_core", "langchain_core"})
"""Packages a deprecated name passes through on its way from the user's call."""


def deprecated(message: str) -> None:
    """Warn ``message`` as an :class:`ExpandDeprecationWarning`, attributed to the user's line.

    The warning points at the first frame outside this library, pydantic and LangChain, so
    the line shown is the one to change, however deep the call went (a validator, ``invoke``).
    """
    frame = sys._getframe(1)
    level = 2
    while frame.f_back is not None and frame.f_globals.get("__name__", "").partition(".")[0] in _INSIDE:
        frame = frame.f_back
        level += 1
    warnings.warn(message, ExpandDeprecationWarning, stacklevel=level)


def renamed(owner: str, given: dict[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """``given`` with each old argument name of ``names`` moved to its new name, with a warning.

    Raises:
        ValueError: When one argument is given under both names.
    """
    out = dict(given)
    for old, new in names.items():
        if old not in out:
            continue
        value = out.pop(old)
        if new in out and out[new] is not None and out[new] != value:
            msg = f"{owner}: `{old}` is the old name of `{new}`; pass `{new}` alone (got both)."
            raise ValueError(msg)
        deprecated(f"{owner}({old}=...) is now {new}=...; the old name will be removed.")
        out[new] = value
    return out


def renamed_attribute(owner: str, old: str, new: str) -> property:
    """A property that reads and sets ``new`` under its old name ``old``, with a warning."""

    def read(self: Any) -> Any:
        deprecated(f"{owner}.{old} is now {new}; the old name will be removed.")
        return getattr(self, new)

    def write(self: Any, value: Any) -> None:
        deprecated(f"{owner}.{old} is now {new}; the old name will be removed.")
        setattr(self, new, value)

    return property(read, write, doc=f"The old name of ``{new}`` (deprecated).")


def from_search_kwargs(owner: str, given: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    """LangChain's ``search_kwargs={...}`` turned into this library's own arguments.

    Each key maps to one argument (``mapping``); a key with no meaning here, or given both
    ways, is an error that says so.
    """
    if "search_kwargs" not in given:
        return given
    out = {k: v for k, v in given.items() if k != "search_kwargs"}
    for key, value in (given["search_kwargs"] or {}).items():
        if key not in mapping:
            msg = (
                f"{owner}: search_kwargs key `{key}` has no meaning here; it accepts "
                f"{', '.join(f'`{k}`' for k in mapping)} (mapped to {', '.join(sorted(set(mapping.values())))})."
            )
            raise ValueError(msg)
        name = mapping[key]
        if name in out and out[name] != value:
            msg = f"{owner}: `{name}` is given twice, as `{name}={out[name]!r}` and in search_kwargs; give it once."
            raise ValueError(msg)
        out[name] = value
    return out


class AsyncQueryByThread:
    """An async query that runs the sync implementation in an executor.

    Every argument is forwarded (LangChain's default ``_aget_relevant_documents`` drops
    keyword arguments), and callbacks reach the same run.
    """

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        result: list[Document] = await run_in_executor(
            None,
            self._get_relevant_documents,  # type: ignore[attr-defined]
            query,
            run_manager=run_manager.get_sync(),
            **kwargs,
        )
        return result


class AsyncByThread(AsyncQueryByThread):
    """Async query, indexing, deletion and expansion, each running its sync twin in a thread."""

    async def aadd_documents(
        self, documents: Sequence[Document], ids: Sequence[str] | None = None, **kwargs: Any
    ) -> list[str]:
        """Async :meth:`add_documents`, run in a thread."""
        done: list[str] = await run_in_executor(None, self.add_documents, documents, ids, **kwargs)  # type: ignore[attr-defined]
        return done

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> Any:
        """Async :meth:`delete`, run in a thread, with every argument forwarded."""
        return await run_in_executor(None, self.delete, ids, **kwargs)  # type: ignore[attr-defined]

    async def aexpand_hits(self, hits: Sequence[Document], **kwargs: Any) -> list[Document]:
        """Async :meth:`expand_hits`, run in a thread, with every argument forwarded."""
        out: list[Document] = await run_in_executor(None, self.expand_hits, hits, **kwargs)  # type: ignore[attr-defined]
        return out


class CheckedAssignment:
    """Fields assigned after construction are checked as construction checks them.

    For a pydantic model with ``validate_assignment``: its validators run again on every
    assignment (so derived state is rebuilt), and a value they refuse raises and leaves every
    field as it was (pydantic keeps a refused value otherwise).
    """

    model_fields: ClassVar[dict[str, Any]]  # ClassVar: pydantic would collect it as a field

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_") or name not in type(self).model_fields:
            super().__setattr__(name, value)
            return
        fields = dict(self.__dict__)
        self.__dict__.update(self._coupled(name, value))
        try:
            super().__setattr__(name, value)
        except Exception:
            self.__dict__.update(fields)
            raise

    def _coupled(self, name: str, value: Any) -> dict[str, Any]:
        """Other fields that assigning ``value`` to ``name`` sets with it (none here)."""
        return {}


_PLAIN = (str, int, float, bool, type(None), list, dict, tuple, set, frozenset)
"""Field values a copy takes its own deep copy of; any other object (a store, a splitter, a
counter, callbacks) is shared."""


class Portable:
    """A retriever copied and pickled as a second retriever over the same index.

    ``copy.deepcopy`` gives a retriever whose settings (numbers, strings, ``search_kwargs``)
    are its own and whose caches start empty, over the *same* stores, splitters and counter:
    copying a store would copy a database client, which Chroma's (a lock, a connection)
    cannot be, and a copy that wrote to a private copy of the index would lose its writes.

    Pickling carries the fields, stores included, for stores that pickle
    (``InMemoryVectorStore``, FAISS, ``InMemoryStore``); a field that cannot be pickled
    (Chroma's client) is an error naming it and the way round it. Derived state (the store's
    adapter, caches, locks) is never carried: :meth:`_derive` rebuilds it. Private flags
    (LangChain's ``_new_arg_supported``) are kept.
    """

    if TYPE_CHECKING:  # pydantic's, on the model this is mixed into
        __private_attributes__: ClassVar[dict[str, Any]]
        __pydantic_fields_set__: set[str]
        __pydantic_extra__: dict[str, Any] | None

    def _derive(self) -> None:
        """Rebuild the derived state from the fields (the subclass's; nothing here)."""

    def _fresh(self, kept: dict[str, Any] | None) -> None:
        """Private attributes at their defaults but for the ``kept`` flags, then the derived state rebuilt."""
        private: dict[str, Any] = {}
        for name, attr in type(self).__private_attributes__.items():
            default = attr.default_factory() if attr.default_factory is not None else attr.default
            if default is not PydanticUndefined:
                private[name] = default
        private.update(_flags(kept))
        object.__setattr__(self, "__pydantic_private__", private)
        self._derive()

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Any:
        copied = type(self).__new__(type(self))
        fields = {
            k: copy.deepcopy(v, memo) if isinstance(v, _PLAIN) and k != "callbacks" else v
            for k, v in self.__dict__.items()
        }
        object.__setattr__(copied, "__dict__", fields)
        object.__setattr__(copied, "__pydantic_fields_set__", set(self.__pydantic_fields_set__))
        object.__setattr__(copied, "__pydantic_extra__", copy.deepcopy(self.__pydantic_extra__, memo))
        copied._fresh(getattr(self, "__pydantic_private__", None))
        return copied

    def __getstate__(self) -> dict[str, Any]:
        state: dict[str, Any] = super().__getstate__()  # type: ignore[assignment]  # pydantic's
        owner = type(self).__name__
        state["__dict__"] = {
            k: v if isinstance(v, _PLAIN) else _Pickled(owner, k, v) for k, v in state["__dict__"].items()
        }
        state["__pydantic_private__"] = _flags(state.get("__pydantic_private__"))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)  # type: ignore[misc]
        self._fresh(state.get("__pydantic_private__"))


def _flags(private: dict[str, Any] | None) -> dict[str, Any]:
    """The private attributes that are flags (LangChain's ``_new_arg_supported``), not derived state."""
    return {k: v for k, v in (private or {}).items() if isinstance(v, bool | int | float | str)}


class _Pickled:
    """One field's value, pickled on its own so that a value that cannot be is named."""

    def __init__(self, owner: str, name: str, value: Any) -> None:
        self.owner, self.name, self.value = owner, name, value

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        try:
            data = pickle.dumps(self.value)
        except Exception as exc:
            msg = (
                f"{self.owner}.{self.name} ({type(self.value).__name__}) cannot be pickled: {exc}. A retriever "
                "pickles with its stores; over a store that holds a client (Chroma), build the retriever again "
                "in the other process over the same persist_directory, or use copy.deepcopy in this one."
            )
            raise TypeError(msg) from exc
        return pickle.loads, (data,)


def traced(base: Mapping[str, Any], store: Any, call: dict[str, Any], instance: Any) -> LangSmithRetrieverParams:
    """What LangSmith records of a retriever's call, on top of ``base`` (the retriever's name).

    As LangChain's own ``VectorStoreRetriever`` reports them: the vector store's class and its
    embedding's provider and model; and this call's ``k`` and ``max_tokens`` (the call's,
    else the instance's), which decide how much text the trace's prompt holds.
    """
    params: Any = dict(base)
    params["ls_vector_store_provider"] = type(store).__name__
    embeddings = getattr(store, "embeddings", None)
    if embeddings is not None:
        params["ls_embedding_provider"] = type(embeddings).__name__
        model = getattr(embeddings, "model_name", None) or getattr(embeddings, "model", None)
        if isinstance(model, str):
            params["ls_embedding_model"] = model
    for name in ("k", "max_tokens"):
        params[name] = call[name] if call.get(name) is not None else getattr(instance, name, None)
    return params  # type: ignore[no-any-return]


class Serialisable(BaseModel):
    """A runnable of plain settings, strict about its arguments, that ``dumpd``/``loads`` round-trip.

    A custom counter or formatter is not serialised. An unknown argument is an error naming the
    closest valid one. (A subclass sets its own ``model_config``: the runnable base's would win.)
    """

    @model_validator(mode="before")
    @classmethod
    def _known_arguments(cls, data: Any) -> Any:
        """A typo (``max_token=5``) is an error naming the closest valid argument."""
        if isinstance(data, dict):
            reject_unknown(cls.__name__, data, cls.model_fields)
        return data

    @classmethod
    def is_lc_serializable(cls) -> bool:
        """True: its fields are plain settings."""
        return True

    @classmethod
    def get_lc_namespace(cls) -> list[str]:
        """Where ``loads`` imports it from (``valid_namespaces=["langchain_expand"]``)."""
        return ["langchain_expand"]
