"""What a window retriever holds in memory and how much it writes at once: speed, never the answer.

These settings decide only where a query reads from (a snapshot in memory, BM25 and the
columns in memory, the local copies, the store) and how many records go in one write. With an
exact dense search every setting gives the same windows (``tests/test_performance.py``); with
the store's approximate search, the snapshot's exact search may find a sentence the store's
missed (``make bench-latency`` counts how often). What is held belongs to the vector store object
and the lexical index: every retriever over the same two in a process shares it (one build a
``snapshot_limit``; :func:`~langchain_expand.windows.views.shared`). The retriever's old fields of
the same names still work, with a deprecation warning.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_expand import calls, rules

__all__ = ["OLD_NAMES", "Performance", "from_old_names", "old_name"]


@dataclass(frozen=True)
class Performance:
    """Where a window query reads from, and how many records a write sends at once."""

    snapshot_limit: int = 50_000
    """With a lexical index on Chroma, the lexical index's BM25 and what guided growth weighs of
    each sentence (token count, cues, vector) are held in memory, built beside the queries once
    a writer has finished (about 1.7 KB a sentence), with every document's head (up to
    ``cache_size`` of them past the limit). While the copies number at most this many, their
    text is held too, and queries run on this snapshot: an exact dense search, BM25 and every
    neighbour read without a store call (:mod:`langchain_expand.windows.views`; about 3 KB a
    sentence with MiniLM). 0: no snapshot. Costs: ``benchmarks/README.md``."""
    in_memory: bool = True
    """Hold what queries search and weigh in memory: BM25 and the columns, with their texts up to
    ``snapshot_limit`` (the snapshot). False holds none of it, for a process that cannot spare the
    memory: the store and the lexical index answer every query, and only the sentence cache
    (``cache_size``) and the heads read at the store's change mark are kept."""
    cache_size: int = 20_000
    """Sentences kept in memory between queries, as local copies (the lexical index's, or records
    read from the store; about 2.1 KB each with MiniLM), each served only at the revision the
    query finds for its document (:mod:`langchain_expand.windows.cache`). 0 turns it off."""
    batch_size: int = 4096
    """Sentences embedded and written per call to the vector store (large calls pad less). Keep it
    under the store's own limit (Chroma: ``client.get_max_batch_size()``)."""

    def __post_init__(self) -> None:
        rules.check_non_negative("snapshot_limit", self.snapshot_limit)
        rules.check_non_negative("cache_size", self.cache_size)
        rules.check_positive("batch_size", self.batch_size)
        rules.check_flag("in_memory", self.in_memory)

    @property
    def limit(self) -> int | None:
        """The snapshot's limit where anything is held in memory; None where nothing is (``in_memory=False``)."""
        return self.snapshot_limit if self.in_memory else None


OLD_NAMES = tuple(f.name for f in dataclasses.fields(Performance))
"""The retriever's fields that became :class:`Performance`'s."""


def from_old_names(owner: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """Constructor arguments with the old fields (``snapshot_limit=0``) moved into ``performance``, with a warning.

    Raises:
        ValueError: Where ``performance`` is given too: set each there alone.
    """
    old = {name: given[name] for name in OLD_NAMES if name in given}
    if not old:
        return dict(given)
    if given.get("performance") is not None:
        msg = f"{owner}: {', '.join(old)} belong in `performance`; pass `performance=Performance(...)` alone."
        raise ValueError(msg)
    settings = ", ".join(f"{name}={value!r}" for name, value in old.items())
    calls.deprecated(f"{owner}({settings}) is now performance=Performance({settings}); the old names will be removed.")
    out = {name: value for name, value in given.items() if name not in old}
    out["performance"] = Performance(**old)
    return out


def old_name(owner: str, name: str) -> property:
    """A property that reads and sets ``performance.<name>`` under its old name, with a warning."""

    def read(self: Any) -> Any:
        calls.deprecated(f"{owner}.{name} is now {owner}.performance.{name}; the old name will be removed.")
        return getattr(self.performance, name)

    def write(self: Any, value: Any) -> None:
        calls.deprecated(
            f"{owner}.{name} = ... is now performance=Performance({name}=...); the old name will be removed."
        )
        self.performance = dataclasses.replace(self.performance, **{name: value})

    return property(read, write, doc=f"The old name of ``performance.{name}`` (deprecated).")
