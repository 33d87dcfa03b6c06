"""A docstore that survives a restart: Documents in a SQL table, SQLite by default.

LangChain documents ``ParentDocumentRetriever`` with an ``InMemoryStore``, which forgets
every parent when the process ends while the children stay in the vector store. This
store keeps parents in a database given by URL: a SQLite file for one machine, or any
SQLAlchemy URL (PostgreSQL, say) for several indexing workers sharing one docstore.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langchain_core.documents import Document
from langchain_core.stores import BaseStore

__all__ = ["SQLDocStore", "claim_docstore", "engine_for", "forget_connections_after_fork"]

DEFAULT_PATH = Path(".langchain-expand") / "docstore.sqlite"
MAX_KEY_CHARS = 512
"""The key column's width; a longer key is refused before anything is written."""
_CHUNK = 5000
"""Keys per statement: PostgreSQL takes at most 65,535 parameters in one."""
_DEADLOCK_RETRIES = 5
_SQLITE_BUSY_SECONDS = 60
"""How long a SQLite writer waits for another's lock before failing (SQLite's default: 5)."""


def engine_for(url: str, **connect_args: Any) -> sa.Engine:
    """A SQLAlchemy engine on ``url``, safe after a fork (:func:`forget_connections_after_fork`).

    Raises:
        ValueError: When ``url`` is not a URL (a bare path, say); the message shows SQLite's form.
        ImportError: When the database's driver is not installed; the message names the extra.
    """
    try:
        engine = sa.create_engine(url, connect_args=connect_args)
    except sa.exc.ArgumentError as exc:
        msg = (
            f"{url!r} is not a SQLAlchemy URL ({exc}). For a SQLite file write 'sqlite:///{url}' "
            "(four slashes for an absolute path); for PostgreSQL 'postgresql+psycopg://user:pass@host/db'."
        )
        raise ValueError(msg) from exc
    except ModuleNotFoundError as exc:
        extra = " (pip install 'langchain-expand[postgres]')" if "psycopg" in str(exc.name) else ""
        msg = f"The driver for {sa.engine.make_url(url).drivername} is not installed: {exc.name}{extra}."
        raise ImportError(msg) from exc
    return forget_connections_after_fork(engine)


def forget_connections_after_fork(engine: sa.Engine) -> sa.Engine:
    """Make ``engine`` safe to use in a forked child (a server's worker processes), and return it.

    A child would otherwise take its parent's pooled connections and talk over the parent's
    sockets. Each connection records the process that opened it; one checked out in another
    process is dropped without being closed (the parent keeps using it) and the pool connects
    anew: SQLAlchemy's own recipe for pools and multiprocessing, kept on the engine itself.
    """

    @sa.event.listens_for(engine, "connect")
    def opened(dbapi_connection: Any, record: Any) -> None:
        record.info["pid"] = os.getpid()

    @sa.event.listens_for(engine, "checkout")
    def checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if record.info.get("pid", os.getpid()) != os.getpid():
            record.dbapi_connection = proxy.dbapi_connection = None  # the parent's: not closed here
            msg = f"connection opened in process {record.info['pid']}, checked out in {os.getpid()}"
            raise sa.exc.DisconnectionError(msg)

    return engine


class SQLDocStore(BaseStore[str, Document]):
    """``BaseStore[str, Document]`` on a SQL table; writes are transactional.

    Example:
        .. code-block:: python

            from langchain_expand import SQLDocStore

            store = SQLDocStore()  # ./.langchain-expand/docstore.sqlite
            shared = SQLDocStore("postgresql+psycopg://user@db/parents")
    """

    def __init__(self, url: str | None = None, *, table: str = "langchain_expand_docs") -> None:
        """Open (and create if needed) the table.

        Args:
            url: A SQLAlchemy URL; a SQLite file under ``./.langchain-expand/`` by default.
            table: The table name, so several stores can share one database.
        """
        if url is None:
            DEFAULT_PATH.parent.mkdir(parents=True, exist_ok=True)
            url = f"sqlite:///{DEFAULT_PATH}"
        elif url.startswith("sqlite:///") and url != "sqlite:///:memory:":
            Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.url = url
        sqlite = url.startswith("sqlite")
        self._engine = engine_for(url, **({"timeout": _SQLITE_BUSY_SECONDS} if sqlite else {}))
        metadata = sa.MetaData()
        self._table = sa.Table(
            table,
            metadata,
            sa.Column("key", sa.String(512), primary_key=True),
            sa.Column("value", sa.Text, nullable=False),
        )
        self._claim = sa.Table(
            f"{table}_claim", metadata, sa.Column("one", sa.Integer, primary_key=True), sa.Column("owner", sa.Text)
        )
        try:
            self._table.metadata.create_all(self._engine)
        except (sa.exc.ProgrammingError, sa.exc.IntegrityError, sa.exc.OperationalError):  # another worker made it
            if not sa.inspect(self._engine).has_table(table):
                raise
        self._upsert = _upsert(self._table, self._engine.dialect.name)

    def claim(self, owner: str | None) -> str | None:
        """Whose parents the store holds (a parents retriever's collection), stored as ``owner`` where none is yet.

        None: only read. Of two workers claiming at once, the first's claim is kept.
        """
        with self._engine.connect() as conn:
            held = conn.execute(sa.select(self._claim.c.owner)).scalar_one_or_none()
        if held is not None or owner is None:
            return held
        try:
            with self._engine.begin() as conn:
                conn.execute(self._claim.insert().values(one=1, owner=owner))
        except sa.exc.IntegrityError:  # another worker claimed it meanwhile: its claim stands
            return self.claim(None)
        return owner

    def unclaim(self) -> None:
        """Forget whose parents the store holds: the next retriever to add claims it (its collection was renamed)."""
        with self._engine.begin() as conn:
            conn.execute(self._claim.delete())

    def __repr__(self) -> str:
        return f"SQLDocStore({self._engine.url.render_as_string(hide_password=True)!r})"

    def mget(self, keys: Sequence[str]) -> list[Document | None]:
        """The documents for ``keys``, ``None`` where a key is absent."""
        if not keys:
            return []
        found: dict[str, Document] = {}
        with self._engine.connect() as conn:
            for at in range(0, len(keys), _CHUNK):
                chunk = list(keys[at : at + _CHUNK])
                rows = conn.execute(sa.select(self._table).where(self._table.c.key.in_(chunk)))
                found.update((row.key, _load(row.value)) for row in rows)
        return [found.get(k) for k in keys]

    def mset(self, key_value_pairs: Sequence[tuple[str, Document]]) -> None:
        """Store documents, replacing any under the same keys, in one transaction.

        Rows are written in key order, so two writers of overlapping keys lock them in the
        same order and never deadlock.

        Raises:
            ValueError: For a key that is empty, longer than ``MAX_KEY_CHARS`` or holds a NUL
                character, or a value whose metadata is not plain data; nothing is written.
        """
        rows = {_checked(key): _dump(key, doc) for key, doc in key_value_pairs}
        if not rows:
            return
        values = [{"key": k, "value": rows[k]} for k in sorted(rows)]

        def write(conn: sa.Connection) -> None:
            for at in range(0, len(values), _CHUNK):
                chunk = values[at : at + _CHUNK]
                if self._upsert is not None:  # two workers writing one key both succeed, the last wins
                    conn.execute(self._upsert, chunk)
                    continue
                conn.execute(self._table.delete().where(self._table.c.key.in_([v["key"] for v in chunk])))
                conn.execute(self._table.insert(), chunk)

        self._transaction(write)

    def mdelete(self, keys: Sequence[str]) -> None:
        """Delete ``keys``, in key order and in one transaction; absent keys are ignored."""
        if not keys:
            return
        ordered = sorted(set(keys))

        def delete(conn: sa.Connection) -> None:
            key = self._table.c.key
            for at in range(0, len(ordered), _CHUNK):
                chunk = ordered[at : at + _CHUNK]
                if conn.dialect.name == "postgresql":  # lock the rows in key order, as writes do
                    conn.execute(sa.select(key).where(key.in_(chunk)).order_by(key).with_for_update())
                conn.execute(self._table.delete().where(key.in_(chunk)))

        self._transaction(delete)

    def _transaction(self, work: Callable[[sa.Connection], None]) -> None:
        """Run ``work`` in one transaction, and again from the start if it was a deadlock's victim.

        Rows are locked in key order, so only a writer outside this class can cause one.
        """
        for attempt in range(_DEADLOCK_RETRIES):
            try:
                with self._engine.begin() as conn:
                    work(conn)
                return
            except sa.exc.OperationalError as exc:
                if "deadlock" not in str(exc).lower() or attempt == _DEADLOCK_RETRIES - 1:
                    raise

    def yield_keys(self, *, prefix: str | None = None) -> Iterator[str]:
        """Every key, or those starting with ``prefix`` (case-sensitively, ``%`` and ``_`` literal)."""
        query = sa.select(self._table.c.key)
        if prefix:
            escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            query = query.where(self._table.c.key.like(f"{escaped}%", escape="\\"))
        with self._engine.connect() as conn:
            for row in conn.execute(query):
                if prefix is None or row.key.startswith(prefix):  # LIKE ignores case in SQLite
                    yield row.key


def _upsert(table: sa.Table, dialect: str) -> sa.Executable | None:
    """An insert that replaces the value under an existing key, where the database has one."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    elif dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
    else:
        return None
    statement = insert(table)
    return statement.on_conflict_do_update(index_elements=[table.c.key], set_={"value": statement.excluded.value})


def _checked(key: str) -> str:
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS or "\x00" in key:
        shown = key[:60] + "..." if isinstance(key, str) and len(key) > 60 else key
        msg = (
            f"SQLDocStore key {shown!r} ({len(key) if isinstance(key, str) else type(key).__name__} chars) "
            f"cannot be stored: keys are non-empty text of at most {MAX_KEY_CHARS} characters without NUL. "
            "Use a shorter document id."
        )
        raise ValueError(msg)
    return key


def _dump(key: str, doc: Document) -> str:
    if not isinstance(doc, Document):
        msg = f"SQLDocStore stores Documents; the value under {key!r} is a {type(doc).__name__}."
        raise TypeError(msg)
    try:
        return json.dumps({"page_content": doc.page_content, "metadata": doc.metadata, "id": doc.id}, allow_nan=False)
    except (TypeError, ValueError) as exc:
        msg = f"Document {key!r}: its metadata is not JSON-serialisable ({exc}). Convert the values to plain data."
        raise ValueError(msg) from exc


def _load(value: str) -> Document:
    data = json.loads(value)
    return Document(page_content=data["page_content"], metadata=data["metadata"], id=data.get("id"))


def claim_docstore(docstore: BaseStore[str, Document], collection: str | None, owner: str, *, write: bool) -> None:
    """Refuse a docstore that holds the parents of another collection's children; with ``write``, claim it.

    Two parents retrievers given one docstore (one SQL table) and two collections overwrite each
    other's parents: an add replaces the other's heads and parents of the same documents, whose
    children then find none, so the other answers nothing. A docstore that keeps no claim (any
    but :class:`SQLDocStore`), or a collection without a name, is not checked.
    """
    claim = getattr(docstore, "claim", None)
    if collection is None or not callable(claim):
        return
    held = claim(collection if write else None)
    if held is not None and held != collection:
        msg = (
            f"{owner}: its docstore holds the parents of the children in collection {held!r}, and its own "
            f"children are in {collection!r}: two retrievers' parents in one docstore overwrite each other. "
            f"Give each collection a docstore of its own, e.g. SQLDocStore(url, table={collection + '_parents'!r}); "
            f"if {held!r} was renamed {collection!r}, call the store's unclaim() once."
        )
        raise ValueError(msg)
