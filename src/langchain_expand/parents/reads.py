"""What a parents query reads and counts, each once: gathering parents for a budget takes several rounds.

A budget gathers parents in rounds, asking the search for twice as many children each time, and
every round ranks, reads and fits again the parents the round before had (``retriever.py``).
:class:`CallReads` serves each parent (and head) from the docstore once a call, and counts each
text once, its count kept between calls (:func:`kept_count`); :func:`parent_units` keeps the
units the last parents cut to fit were split into. Each gives what reading, counting or
splitting again would, so none changes an answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from functools import lru_cache

from langchain_core.documents import Document
from langchain_core.stores import BaseStore

from langchain_expand.text.sentences import SentenceSplitter, Span, Splitter
from langchain_expand.text.tokens import counter_key
from langchain_expand.units import DOC_ID

__all__ = ["COUNTS_REMEMBERED", "UNITS_REMEMBERED", "CallReads", "kept_count", "parent_units"]

UNITS_REMEMBERED = 256
"""Parent texts whose units are kept between calls: a parent cut to fit one query is cut on the next that finds it."""
COUNTS_REMEMBERED = 8192
"""Parent texts whose token counts are kept between calls: a query counts every parent it gathers, most of them
found again by the queries after it."""


def kept_count(counter: Callable[[str], int], text: str) -> int:
    """``counter(text)``; the counts of the last ``COUNTS_REMEMBERED`` texts are kept between calls.

    A count is kept under the counter's class, its :func:`~langchain_expand.text.tokens.counter_key`
    (a ``TokenCounter``'s encoding) and a digest of the text (not the text: a parent may be long).
    A counter without a key (any callable but a ``TokenCounter``) counts every time, as wherever
    counts are kept; a subclass that counts otherwise (a chat format's overhead) keeps its own.
    """
    name = counter_key(counter)
    if name is None:
        return counter(text)
    kind: type = type(counter)
    kept = _kept(kind, name, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest())
    if not kept:  # two threads may both count it: the counts are equal
        kept.append(counter(text))
    return kept[0]


@lru_cache(maxsize=COUNTS_REMEMBERED)
def _kept(kind: type, name: str, digest: bytes) -> list[int]:
    """Where one text's count by one kind of counter and encoding is kept: empty until it is counted."""
    return []


class CallReads:
    """One call's reads of the docstore and counts of texts: each parent read once, each text counted once."""

    def __init__(
        self, docstore: BaseStore[str, Document], counter: Callable[[str], int], head_id: Callable[[str], str]
    ) -> None:
        """Reads from ``docstore``, counts with ``counter``; ``head_id`` names a document's head parent."""
        self._docstore = docstore
        self._counter = counter
        self._head_id = head_id
        self._read: dict[str, Document | None] = {}
        self._counts: dict[str, int] = {}

    def mget(self, ids: Sequence[str]) -> list[Document | None]:
        """The docstore's documents under ``ids`` (None where it has none), each read once this call."""
        missing = [i for i in dict.fromkeys(ids) if i not in self._read]
        if missing:
            self._read.update(zip(missing, self._docstore.mget(missing), strict=True))
        return [self._read[i] for i in ids]

    def heads(self, parents: Sequence[Document | None]) -> dict[str, Document | None]:
        """The head parent (its document's committed version) of each of ``parents``' documents."""
        doc_ids = list(dict.fromkeys(str(d.metadata.get(DOC_ID)) for d in parents if d is not None))
        return dict(zip(doc_ids, self.mget([self._head_id(d) for d in doc_ids]), strict=True))

    def count(self, text: str) -> int:
        """``text``'s token count by the retriever's counter: counted once this call, or kept from an earlier one."""
        counted = self._counts.get(text)
        if counted is None:
            counted = self._counts[text] = kept_count(self._counter, text)
        return counted


@lru_cache(maxsize=UNITS_REMEMBERED)
def _units(text: str, counter: Callable[[str], int]) -> tuple[Span, ...]:
    return tuple(SentenceSplitter(token_counter=counter)(text))


def parent_units(counter: Callable[[str], int]) -> Splitter:
    """``SentenceSplitter(token_counter=counter)``, what a parent is trimmed by to fit, with the last texts' units kept.

    Splitting a parent is most of a query that cuts one to fit (a Markdown parse and a count of
    every unit), and the next query that finds it cuts it again: the units of a text by one
    counter are always the same, so the last ``UNITS_REMEMBERED`` are kept (a counter that
    cannot be a key, an unhashable callable, splits every time).
    """
    try:
        hash(counter)
    except TypeError:
        return SentenceSplitter(token_counter=counter)
    return lambda text: list(_units(text, counter))
