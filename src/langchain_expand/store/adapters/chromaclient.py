"""An embedded Chroma client in this process: refused after a fork, reopened where another process wrote.

An embedded Chroma (Chroma's Rust binding) runs in the process that opened it. Forked, its
child's first call never returns; and a collection another process wrote to may not find
the new ids until it is opened again. :func:`refuse_after_fork` and :class:`Reopening` handle
both for :class:`~langchain_expand.store.adapters.chroma.ChromaAdapter`; :class:`DataVersion`
says, for a few microseconds, whether its database file may have changed since last asked.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["DataVersion", "Reopening", "embedded", "forked", "is_embedded", "refuse_after_fork"]

T = TypeVar("T")


_FORKED_FROM: int | None = None
"""The process this one was forked from after it had opened an embedded Chroma; None if none."""


def is_embedded(system: Any) -> bool:
    """Whether a Chroma system runs in this process (Chroma's Rust binding), not on a server."""
    return str(getattr(system.settings, "chroma_api_impl", "")).endswith("RustBindingsAPI")


def embedded(client: Any) -> bool:
    """Whether a Chroma client runs Chroma in this process, not on a server."""
    return is_embedded(client._system)


def _after_fork_in_child() -> None:
    """Note that this process was forked from one that had opened an embedded Chroma.

    An embedded client's first call in a forked child never returns (its Rust runtime's threads
    stayed in the parent), and so does a client opened again in the child once the parent has
    written: :meth:`ChromaAdapter.collection` refuses, rather than hang.
    """
    global _FORKED_FROM
    try:
        from chromadb.api.shared_system_client import SharedSystemClient
    except ImportError:  # pragma: no cover  (Chroma not installed)
        return
    if any(is_embedded(system) for system in SharedSystemClient._identifier_to_system.values()):
        _FORKED_FROM = os.getppid()


os.register_at_fork(after_in_child=_after_fork_in_child)


def forked() -> bool:
    """Whether this process was forked from one that had opened an embedded Chroma."""
    return _FORKED_FROM is not None


def refuse_after_fork(name: str) -> None:
    """Refuse an embedded Chroma collection in a process forked from one that had opened one.

    Raises:
        RuntimeError: In such a process; the message says what to do instead.
    """
    if _FORKED_FROM is None:
        return
    msg = (
        f"The embedded Chroma collection {name!r} cannot be used in this process ({os.getpid()}): it was "
        f"forked from process {_FORKED_FROM} after that one had opened an embedded Chroma, and Chroma's calls "
        "then never return. Open the store in each worker after it starts, not before the fork "
        "(multiprocessing's 'spawn' or 'forkserver' start method; gunicorn without --preload), or run a "
        "Chroma server (chromadb.HttpClient), which workers share."
    )
    raise RuntimeError(msg)


class Reopening:
    """A collection whose calls, where an embedded Chroma cannot find what another process wrote, run again reopened.

    Each call that fails with Chroma's "Error finding id" is made once more on the collection
    ``reopen`` opens again; everything else is the collection's own.
    """

    def __init__(self, collection: Any, reopen: Callable[[Any], Any]) -> None:
        self._collection = collection
        self._reopen = reopen

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._collection, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return value(*args, **kwargs)
            except Exception as exc:
                if "Error finding id" not in str(exc) or not is_embedded(self._collection._client._system):
                    raise
                reopened = self._reopen(self._collection)
            return getattr(reopened, name)(*args, **kwargs)

        return call


class DataVersion:
    """A token that changes whenever anything is committed to an embedded Chroma's database file.

    An embedded, persistent Chroma keeps its records' metadata in one SQLite file, written by
    Chroma's own connections in this process or another. SQLite's ``PRAGMA data_version``, read
    on a read-only connection of this one's, changes whenever another connection commits to the
    file; the token is that, which connection read it (one per process and file), and the
    file's size and time of change (a file replaced: its connection would still read the old
    one). About 10 microseconds, against 300-500 for a Chroma read: a reader reads the store's
    change mark again only once the token has changed
    (:meth:`~langchain_expand.store.adapters.chroma.ChromaAdapter.marked`). None where it
    cannot say: a Chroma in memory or on a server, or the file locked or gone.
    """

    _connections = itertools.count()

    def __init__(self, client: Any) -> None:
        """For ``client``'s database file, where it is an embedded, persistent Chroma's."""
        system = getattr(client, "_system", None)
        settings = getattr(system, "settings", None)
        folder = getattr(settings, "persist_directory", None) if getattr(settings, "is_persistent", False) else None
        self._path = Path(folder, "chroma.sqlite3").absolute() if folder and is_embedded(system) else None
        self._lock = threading.Lock()
        self._open: tuple[int, int, int, sqlite3.Connection] | None = None  # its process, file, number; itself
        self._last: tuple[tuple[int, ...], Any] | None = None  # what :meth:`read` read last, at which token

    def __call__(self) -> tuple[int, ...] | None:
        """The connection's number, the file's data version, size and time of change; None where it cannot say."""
        if self._path is None:
            return None
        try:
            found = os.stat(self._path)
            with self._lock:
                held = self._open
                if held is None or held[:2] != (os.getpid(), found.st_ino):
                    if held is not None and held[0] == os.getpid():
                        held[3].close()
                    uri = self._path.as_uri() + "?mode=ro"
                    connection = sqlite3.connect(uri, uri=True, timeout=0, check_same_thread=False)
                    held = self._open = (os.getpid(), found.st_ino, next(self._connections), connection)
                version = int(held[3].execute("PRAGMA data_version").fetchone()[0])
            return held[2], version, found.st_size, found.st_mtime_ns
        except (OSError, sqlite3.Error):
            return None

    def read(self, load: Callable[[], T]) -> T:
        """``load()``, or what it gave last where the token has not changed since.

        The token is taken before ``load()``: a write during it changes the token again.
        """
        token, last = self(), self._last
        if token is not None and last is not None and last[0] == token:
            return last[1]  # type: ignore[no-any-return]
        value = load()
        self._last = None if token is None else (token, value)
        return value
