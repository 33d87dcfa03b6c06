"""A docstore that survives a restart: Documents in a SQL table, SQLite by default.

LangChain documents ``ParentDocumentRetriever`` with an ``InMemoryStore``, which forgets
every parent when the process ends while the children stay in the vector store. This
store keeps parents in a database given by URL: a SQLite file for one machine, or any
SQLAlchemy URL (PostgreSQL, say) for several indexing workers sharing one docstore.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import sqlalchemy as sa
from langchain_core.documents import Document
from langchain_core.stores import BaseStore

__all__ = ["SQLDocStore"]

DEFAULT_PATH = Path(".langchain-expand") / "docstore.sqlite"


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
        self._engine = sa.create_engine(url)
        self._table = sa.Table(
            table,
            sa.MetaData(),
            sa.Column("key", sa.String(512), primary_key=True),
            sa.Column("value", sa.Text, nullable=False),
        )
        try:
            self._table.metadata.create_all(self._engine)
        except (sa.exc.ProgrammingError, sa.exc.IntegrityError):  # another worker created it just now
            if not sa.inspect(self._engine).has_table(table):
                raise
        self._upsert = _upsert(self._table, self._engine.dialect.name)

    def __repr__(self) -> str:
        return f"SQLDocStore({self._engine.url.render_as_string(hide_password=True)!r})"

    def mget(self, keys: Sequence[str]) -> list[Document | None]:
        """The documents for ``keys``, ``None`` where a key is absent."""
        if not keys:
            return []
        found: dict[str, Document] = {}
        with self._engine.connect() as conn:
            for at in range(0, len(keys), 500):
                chunk = list(keys[at : at + 500])
                rows = conn.execute(sa.select(self._table).where(self._table.c.key.in_(chunk)))
                found.update((row.key, _load(row.value)) for row in rows)
        return [found.get(k) for k in keys]

    def mset(self, key_value_pairs: Sequence[tuple[str, Document]]) -> None:
        """Store documents, replacing any under the same keys, in one transaction."""
        rows = {key: _dump(key, doc) for key, doc in key_value_pairs}
        if not rows:
            return
        values = [{"key": k, "value": v} for k, v in rows.items()]
        with self._engine.begin() as conn:
            if self._upsert is not None:  # two workers writing one key both succeed, the last wins
                conn.execute(self._upsert, values)
                return
            conn.execute(self._table.delete().where(self._table.c.key.in_(list(rows))))
            conn.execute(self._table.insert(), values)

    def mdelete(self, keys: Sequence[str]) -> None:
        """Delete ``keys``; absent keys are ignored."""
        if not keys:
            return
        with self._engine.begin() as conn:
            conn.execute(self._table.delete().where(self._table.c.key.in_(list(keys))))

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


def _dump(key: str, doc: Document) -> str:
    if not isinstance(doc, Document):
        msg = f"SQLDocStore stores Documents; the value under {key!r} is a {type(doc).__name__}."
        raise TypeError(msg)
    try:
        return json.dumps({"page_content": doc.page_content, "metadata": doc.metadata, "id": doc.id})
    except TypeError as exc:
        msg = f"Document {key!r}: its metadata is not JSON-serialisable ({exc}). Convert the values to plain data."
        raise ValueError(msg) from exc


def _load(value: str) -> Document:
    data = json.loads(value)
    return Document(page_content=data["page_content"], metadata=data["metadata"], id=data.get("id"))
