"""A metadata filter evaluated in memory, as Chroma evaluates it on each record.

A window query over the snapshot (or BM25) must answer a ``filter`` as the store would, or a
filtered query leaves hybrid search and goes to the store alone. The filters a retriever is
given name the units' metadata: the document's own keys and ``doc_id``
(:meth:`~langchain_expand.store.adapters.StoreAdapter.unit_filter` renames it ``lcx_doc``). Every
record of a document carries those alike, so such a filter picks whole documents, and is
evaluated once on each document's head record.

Chroma's syntax: ``{key: value}`` or ``{key: {op: value}}`` with one operator among ``$eq``,
``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``, ``$in``, ``$nin``, ``$contains``, ``$not_contains``,
and ``{"$and": [...]}`` / ``{"$or": [...]}`` of two or more. Its semantics, as measured on Chroma
1.5 (``tests/test_filters.py`` checks each against it): numbers compare by value, but a float
compared with an int that a record holds is first cut toward zero, as Chroma casts it (1.5
equals 1, and ``$lt 1.5`` is ``$lt 1``); a bool only equals a bool, ``$ne``, ``$nin`` and
``$not_contains`` also match a record without the key, ``$gt``-style operators compare numbers
only, and ``$contains`` finds a value of the same kind in a list the record holds (an int is
not a float there, and no scalar value contains anything); a list equals nothing. Anything else
(another operator, a key a record sets for itself such as ``lcx_i``, a number that is not
finite, a filter Chroma would refuse) is :class:`Unsupported`: the caller asks the store, whose
answer (or error) stands.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from langchain_expand.units import PREFIX, STORED_DOC

__all__ = ["Unsupported", "applied", "matches", "passing", "said_once", "whole_documents"]

logger = logging.getLogger(__name__)
_SAID: set[str] = set()

_SCALARS = (str, int, float, bool)
_ORDER: dict[str, Callable[[float, float], bool]] = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}
_I64 = (-(2**63), 2**63 - 1)
_CONTAINS = ("$contains", "$not_contains")
"""Chroma's operators on a list a record holds (:func:`~langchain_expand.store.records.encode_metadata`)."""


def said_once(message: str, *args: object) -> None:
    """Log ``message`` at INFO the first time this process meets it: why a filter leaves hybrid search."""
    line = message % args
    if line not in _SAID:
        _SAID.add(line)
        logger.info(line)


def applied(where: Any) -> Any:
    """The filter a query applies: ``where``, but None for an empty one (``{}``).

    An empty filter keeps every document, as no filter does, so it takes the unfiltered path
    (hybrid, from memory) and answers as no filter. Chroma would refuse it; the store's search
    is given none.
    """
    return None if isinstance(where, dict) and not where else where


class Unsupported(ValueError):
    """A filter this module does not evaluate as the store would: ask the store."""


def whole_documents(where: Mapping[str, Any]) -> None:
    """Raise :class:`Unsupported` unless ``where`` (as stored) reads only keys all of a document's records share.

    Also checks the syntax, so a filter that passes is one :func:`matches` evaluates.
    """
    for key in _keys(where):
        if key.startswith(PREFIX) and key != STORED_DOC:
            msg = f"the filter reads {key!r}, which each record sets for itself"
            raise Unsupported(msg)


def matches(where: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    """Whether a record with ``metadata`` (as stored) passes ``where``, as Chroma decides it."""
    if not isinstance(where, Mapping) or len(where) != 1:
        msg = f"a filter is one key or one of $and / $or, got {where!r}"
        raise Unsupported(msg)
    ((key, value),) = where.items()
    if key in ("$and", "$or"):
        if not isinstance(value, list) or len(value) < 2:
            msg = f"{key} takes a list of two or more filters, got {value!r}"
            raise Unsupported(msg)
        results = [matches(part, metadata) for part in value]  # every part checked, as the store checks them
        return all(results) if key == "$and" else any(results)
    if key.startswith("$"):
        msg = f"unknown logical operator {key!r}"
        raise Unsupported(msg)
    op, operand = _operator(value)
    present = key in metadata
    held = metadata.get(key)
    if op == "$eq":
        return present and _equal(held, operand)
    if op == "$ne":
        return not (present and _equal(held, operand))
    if op in ("$in", "$nin"):
        found = present and any(_equal(held, x) for x in operand)
        return found if op == "$in" else not found
    if op in _CONTAINS:
        found = isinstance(held, list) and any(type(x) is type(operand) and x == operand for x in held)
        return found if op == "$contains" else not found
    if not isinstance(held, int | float) or isinstance(held, bool):  # absent, or not a number
        return False
    return _ORDER[op](held, _as_compared(held, operand))


def passing(where: Any) -> Callable[[Mapping[str, Any]], bool]:
    """A function of stored metadata: whether a record passes ``where``, as Chroma decides it.

    For a store that filters with a function (``InMemoryVectorStore``, FAISS): Chroma's syntax
    works there, evaluated as here. :class:`Unsupported` for a filter this module does not evaluate.
    """
    matches(where, {})  # the syntax, every part checked whatever a record holds
    return lambda metadata: matches(where, metadata)


def _operator(value: Any) -> tuple[str, Any]:
    """A key's condition as ``(operator, operand)``, checked as Chroma checks it."""
    if isinstance(value, _SCALARS):
        return "$eq", _finite(value)
    if not isinstance(value, Mapping) or len(value) != 1:
        msg = f"a key's condition is a str, int, float, bool or one operator, got {value!r}"
        raise Unsupported(msg)
    ((op, operand),) = value.items()
    for x in operand if isinstance(operand, list) else [operand]:
        _finite(x)
    if op in ("$eq", "$ne") and isinstance(operand, _SCALARS):
        return op, operand
    if op in _ORDER and isinstance(operand, int | float) and not isinstance(operand, bool):
        return op, operand
    if op in ("$in", "$nin") and isinstance(operand, list) and operand and _one_kind(operand):
        return op, operand
    in_range = not isinstance(operand, int) or _I64[0] <= operand <= _I64[1]
    if op in _CONTAINS and isinstance(operand, _SCALARS) and in_range:
        return op, operand
    msg = f"unsupported condition {value!r}"
    raise Unsupported(msg)


def _finite(value: Any) -> Any:
    """``value``, unless it is a float that is not finite (NaN, infinity): Chroma refuses those."""
    if isinstance(value, float) and not math.isfinite(value):
        msg = f"Chroma refuses a number that is not finite, got {value!r}"
        raise Unsupported(msg)
    return value


def _one_kind(values: list[Any]) -> bool:
    """Whether a list operand is all str, all bool, all int or all float (Chroma refuses a mix, ``[1, 2.0]`` too)."""
    kinds = {type(v) for v in values}
    return len(kinds) == 1 and kinds <= {bool, int, float, str}


def _equal(held: Any, operand: Any) -> bool:
    """Chroma's equality: numbers by value (:func:`_as_compared`), a bool only to a bool, a str only to a str."""
    if isinstance(held, bool) or isinstance(operand, bool):
        return isinstance(held, bool) and isinstance(operand, bool) and held == operand
    if isinstance(held, str) or isinstance(operand, str):
        return isinstance(held, str) and isinstance(operand, str) and held == operand
    return bool(held == _as_compared(held, operand))


def _as_compared(held: Any, operand: Any) -> Any:
    """``operand`` as Chroma compares it with ``held``: a float against an int, cut toward zero into an int64."""
    if isinstance(held, int) and not isinstance(held, bool) and isinstance(operand, float):
        return min(max(math.trunc(operand), _I64[0]), _I64[1])
    return operand


def _keys(where: Any) -> list[str]:
    """Every metadata key ``where`` reads; :class:`Unsupported` where its syntax is not Chroma's."""
    matches(where, {})  # the syntax, checked on an empty record
    ((key, value),) = where.items()
    if key in ("$and", "$or"):
        return [k for part in value for k in _keys(part)]
    return [key]
