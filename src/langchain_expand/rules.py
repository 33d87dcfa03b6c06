"""The rules a call's arguments and a field's value are checked by: one wording per rule.

Each names the parameter, what it must be and what it got. A value is never coerced: a string
is not a flag ("no" is truthy), a bool is not a count.
"""

from __future__ import annotations

import numbers

__all__ = [
    "check_flag",
    "check_fraction",
    "check_non_negative",
    "check_optional_non_negative",
    "check_optional_positive",
    "check_positive",
    "check_query",
]


def check_query(query: str) -> None:
    """An empty query matches nothing meaningfully: say so instead of returning noise.

    A very long query is accepted; the embedding model reads its beginning (MiniLM: the
    first 256 word pieces).
    """
    if not isinstance(query, str):
        msg = f"The query must be text, got {type(query).__name__} {query!r}; pass the question as a str."
        raise TypeError(msg)
    if not query.strip():
        msg = f"The query is empty ({query!r}); pass the question text."
        raise ValueError(msg)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _got(value: object) -> str:
    """What a check got: a whole number of another type (NumPy's) says to pass it as a Python int."""
    if isinstance(value, numbers.Integral) and not isinstance(value, int):
        return f"{value!r} (a {type(value).__module__}.{type(value).__name__}: pass int(...))"
    return repr(value)


def _check_at_least(name: str, value: object, least: int, what: str) -> None:
    if not _is_int(value) or value < least:  # type: ignore[operator]
        msg = f"`{name}` must be {what}, got {_got(value)}."
        raise ValueError(msg)


def check_positive(name: str, value: object) -> None:
    """``value`` must be an integer >= 1."""
    _check_at_least(name, value, 1, "a positive integer")


def check_optional_positive(name: str, value: object) -> None:
    """``value`` must be an integer >= 1, or None for "no limit"."""
    if value is not None:
        _check_at_least(name, value, 1, "a positive integer or None (no limit)")


def check_non_negative(name: str, value: object) -> None:
    """``value`` must be an integer >= 0."""
    _check_at_least(name, value, 0, "an integer >= 0")


def check_optional_non_negative(name: str, value: object) -> None:
    """``value`` must be an integer >= 0, or None for the default."""
    if value is not None:
        check_non_negative(name, value)


def check_fraction(name: str, value: object) -> None:
    """``value`` must be a number in [0, 1], or None."""
    if value is not None and (not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1):
        msg = f"`{name}` must be a number between 0 and 1, or None, got {value!r}."
        raise ValueError(msg)


def check_flag(name: str, value: object) -> None:
    """``value`` must be True or False: a string such as "no" would read as True."""
    if not isinstance(value, bool):
        msg = f"`{name}` must be True or False, got {value!r}."
        raise ValueError(msg)
