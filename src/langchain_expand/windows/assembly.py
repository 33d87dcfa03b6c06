"""Assembly: each window's text from its run of sentences, checked against its document's head.

A window is built from sentences ``[first, last)`` read at one revision, the revision its
document's head commits; a unit whose sentences are missing or of another version is skipped
(a writer is at work) and its document named, so the caller can answer again without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.documents import Document

from langchain_expand.shrink import trim
from langchain_expand.store.lexical import LocalSentence
from langchain_expand.store.records import decode_metadata
from langchain_expand.text.cues import heading
from langchain_expand.text.tokens import chained_count, count_many, counter_key
from langchain_expand.units import (
    CROSSED,
    DOC_ID,
    END,
    HIT,
    HITS,
    N_SENTENCES,
    SCORE,
    SENTENCES,
    SPAN,
    START,
    TOKENS,
)
from langchain_expand.windows.hits import Hit
from langchain_expand.windows.plan import Unit
from langchain_expand.windows.reads import Reads, Run

__all__ = ["Runs", "assemble", "by_sections", "joined_text", "runs_of"]

logger = logging.getLogger(__name__)


Runs = Callable[[str, int, int], "Run | None"]
"""Asked for a document's sentences ``first`` to ``last - 1``, gives them at one revision; None where the store
holds no complete run of them at one revision."""


def assemble(
    units: list[Unit], runs: Runs, counter: Callable[[str], int], skipped: set[str] | None = None
) -> list[Document]:
    """Each unit's window, its text built from its run of sentences and counted by ``counter``.

    Units of a document the store holds no whole version of are skipped, with a warning.

    The ids of documents skipped are added to ``skipped``, so the caller can refill.
    """
    out: list[Document] = []
    derived: list[int | None] = []  # each window's count from its sentences', where exact
    key = counter_key(counter)
    for unit in units:
        run = runs(unit.doc_id, unit.first, unit.last)
        if run is None or any(_another(h, run, unit.first) for h in unit.hits):
            logger.warning(
                "Skipping a hit in document %r: the store holds no whole version of it at the revision "
                "matched (deleted since, or an add_documents interrupted or running: re-run it where the "
                "document should be there), or the match's text was changed after it was matched.",
                unit.doc_id,
            )
            if skipped is not None:
                skipped.add(unit.doc_id)
            continue
        out.append(window_of(unit, run))
        derived.append(None if key is None else run_tokens(counter, key, run.sentences))
    counted = iter(count_many(counter, [d.page_content for d, n in zip(out, derived, strict=True) if n is None]))
    for doc, tokens in zip(out, derived, strict=True):
        doc.metadata[TOKENS] = next(counted) if tokens is None else tokens
    return out


def _another(hit: Hit, run: Run, first: int) -> bool:
    """Whether ``run`` is not the version ``hit`` was matched in: another revision, or another sentence at its index."""
    if hit.matched is None:
        return hit.rev not in (None, run.rev)
    start, text = hit.matched  # a match-only result's hit, which names no revision
    sentence = run.sentences[hit.index - first]
    return start < sentence.start or not sentence.text.startswith(text, start - sentence.start)


def runs_of(reads: Reads, units: list[Unit]) -> Runs:
    """The units' sentences: held in memory, else the local copies, else the store's records.

    The snapshot's are sliced where it holds the document; past it, the local copies read at
    the heads' revisions serve a unit whole (their token counts with them), and the records are
    read only for a unit they do not.
    """
    if reads.snapshot is not None:  # sliced from the snapshot at their heads' revisions
        reads.heads(u.doc_id for u in units)
    else:
        reads.read_copies([(u.doc_id, i) for u in units for i in (0, *range(u.first, u.last))])
    runs = {(u.doc_id, u.first, u.last): reads.local_run(u.doc_id, u.first, u.last) for u in units}
    missing = [u for u in units if runs[(u.doc_id, u.first, u.last)] is None]
    if missing:
        reads.sentences(list(dict.fromkeys((u.doc_id, i) for u in missing for i in (0, *range(u.first, u.last)))))
        runs.update(((u.doc_id, u.first, u.last), reads.local_run(u.doc_id, u.first, u.last)) for u in missing)
    return lambda doc_id, first, last: runs.get((doc_id, first, last))


def run_tokens(counter: Callable[[str], int], key: str, sentences: Sequence[LocalSentence]) -> int | None:
    """A run's token count from its sentences' own and their joined counts (as the local copies keep them)."""
    counts = [s.tokens for s in sentences if s.counter == key and s.tokens is not None]
    if len(counts) != len(sentences):
        return None
    return chained_count(counter, [s.text for s in sentences], counts, [s.joined for s in sentences[:-1]])


def joined_text(sentences: Sequence[LocalSentence]) -> str:
    """Consecutive sentences as they stand in the source, gaps included."""
    parts = []
    for s in sentences[:-1]:
        parts += [s.text, s.gap]
    parts.append(sentences[-1].text)
    return "".join(parts)


def window_of(unit: Unit, run: Run) -> Document:
    best = unit.hits[0]
    sentences = run.sentences
    metadata: dict[str, Any] = {
        **decode_metadata(run.head.metadata),
        **best.extra,
        DOC_ID: unit.doc_id,
        HIT: best.index,
        HITS: [h.index for h in unit.hits],
        SPAN: [unit.first, unit.last],
        START: sentences[0].start,
        END: sentences[-1].end,
        SCORE: best.score,
        N_SENTENCES: unit.n,
        SENTENCES: [[s.start, s.end] for s in sentences],
        CROSSED: sum(heading(s.text) for s in sentences[1:]),
    }
    return Document(
        page_content=joined_text(sentences), metadata=metadata, id=f"{unit.doc_id}::{unit.first}-{unit.last}"
    )


def by_sections(windows: list[Document], counter: Callable[[str], int]) -> tuple[list[Document], bool]:
    """The windows less the headings they end on (the next section's, with none of its text), and whether any did.

    A window of headings alone is left out; one that ends on a heading below its hit is cut
    after the last sentence that is not one (:func:`~langchain_expand.shrink.trim`). Growth
    takes a heading with the sentence after it, but where that sentence did not fit the room
    left, or the fit cut a window from its end, the heading stayed alone.
    """
    out: list[Document] = []
    cut = False
    for window in windows:
        m = window.metadata
        base, spans = int(m[START]), [(int(a), int(b)) for a, b in m[SENTENCES]]
        headings = [heading(window.page_content[a - base : b - base]) for a, b in spans]
        end, hit = len(spans), int(m[HIT]) - int(m[SPAN][0])
        while end > hit + 1 and headings[end - 1]:
            end -= 1
        if all(headings[:end]):
            cut = True
            continue
        if end < len(spans):
            cut, window = True, trim(window, spans, (0, end), counter)
        out.append(window)
    return out, cut
