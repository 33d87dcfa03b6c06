"""How a document's units are stored in a vector store, and read back.

Every unit (a sentence) is one record whose text is the unit alone, so the unit is
what gets embedded. Its metadata carries its position, so windows are computed at
query time from ids, with no window text stored:

- ``lcx_doc``, ``lcx_i``, ``lcx_n``: document id, unit index, unit count;
- ``lcx_start``: the unit's char offset in the source text. A sentence ends its text's
  length later (:func:`sentence_span`); a parent's child keeps its end as ``lcx_end``, as
  the sentence records of earlier versions do;
- ``lcx_gap``: the source text between this unit and the next one, so a window is
  rebuilt exactly as it stands in the source;
- ``lcx_rev``: a hash of the source text; unit 0 (the head) is written last and acts
  as the commit marker, so a window never mixes two versions of a document;
- the document's own metadata.

Vector stores such as Chroma accept only ``str``, ``int``, ``float`` and ``bool``
metadata values. Lists and dicts are stored as JSON strings and ``None`` is stored
as an absent key; the names of such keys are kept in ``lcx_json`` and ``lcx_none``,
so the original metadata comes back unchanged on the way out.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import types
from collections.abc import Callable, Container, Iterator, Mapping, Sequence, Set
from typing import Any

from langchain_core.documents import Document

from langchain_expand.text.cues import Cues, cues
from langchain_expand.units import PREFIX, STORED_END, STORED_GAP, STORED_JSON, STORED_NONE, STORED_START

__all__ = [
    "UnitIds",
    "check_text",
    "decode_metadata",
    "document_ids",
    "encode_metadata",
    "record_cues",
    "revision",
    "sentence_span",
    "unit_id",
    "unit_owner",
    "unit_position",
]

_SCALARS = (str, int, float, bool)
_INT64 = (-(2**63), 2**63 - 1)
"""The integers a store keeps as integers: Chroma rounds larger ones to floats, or clamps them."""
_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_ID_CHARS = 400
"""Longest document id: its parent keys (``id.p12``) and unit ids (``id.p12::40``) must fit a
docstore key (512 characters) with room to spare."""


_HASH_CHUNK = 1 << 20
"""Characters hashed at a time (UTF-8 encodes code point by code point, so the digest is the
same as hashing the whole text at once)."""


def unit_id(doc_id: str, index: int) -> str:
    """The store id of unit ``index`` of document ``doc_id``."""
    return f"{doc_id}::{index}"


def sentence_span(record: Document) -> tuple[int, int]:
    """A sentence record's char offsets in its document: ``[start, end)``.

    The end is the start plus the record's text (a record holds its sentence's text as it
    stands in the document), so it is not stored: each key is one more row Chroma writes for
    every record. Records written before keep it as ``lcx_end``, which is read; a document
    written again loses it, as any key its new version lacks.
    """
    start = int(record.metadata[STORED_START])
    end = record.metadata.get(STORED_END)
    return start, start + len(record.page_content) if end is None else int(end)


def unit_owner(unit: str) -> str:
    """The document id in a unit id: ``unit_owner(unit_id(d, i)) == d``."""
    return unit.rpartition("::")[0]


def unit_position(unit: str) -> tuple[str, int] | None:
    """The document id and index in a unit id, ``(d, i)`` for ``unit_id(d, i)``; None for another id."""
    owner, _, index = unit.rpartition("::")
    return (owner, int(index)) if owner and index.isascii() and index.isdigit() else None


class UnitIds(Set[str]):
    """The ids ``unit_id(owner, i)`` for ``i < count``, answered without building them.

    A 50 MB document has about 800,000 sentences; their ids as strings would take more memory
    than the text. Membership is a parse, iteration yields them one at a time.
    """

    __slots__ = ("count", "owner")

    def __init__(self, owner: str, count: int) -> None:
        """The first ``count`` unit ids of ``owner``."""
        self.owner = owner
        self.count = count

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, str):
            return False
        owner, sep, index = item.rpartition("::")
        return (
            bool(sep)
            and owner == self.owner
            and index.isascii()
            and index.isdigit()
            and index == str(int(index))
            and int(index) < self.count
        )

    def __iter__(self) -> Iterator[str]:
        return (unit_id(self.owner, i) for i in range(self.count))

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"UnitIds({self.owner!r}, {self.count})"


def revision(text: str, *settings: object) -> str:
    """A short hash that changes whenever the text, or the settings that split it, do."""
    salt = "\x00".join(fingerprint(s) for s in settings)
    digest = hashlib.sha256()
    for at in range(0, len(text), _HASH_CHUNK):  # a chunk at a time: a large text is not copied whole
        digest.update(text[at : at + _HASH_CHUNK].encode("utf-8", "surrogatepass"))
    digest.update(("\x00" + salt).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:16]


def metadata_fingerprint(metadata: Mapping[str, Any]) -> str:
    """The metadata as canonical JSON, so a revision changes when any of it does.

    Records carry their document's metadata (filters read it), so new metadata under the same
    text is a new version: without this, ``add_documents`` would keep serving the old values.
    """
    return json.dumps(metadata, sort_keys=True, default=repr, ensure_ascii=False)


def same_embedded_text(revised: Callable[[str], str], head: Mapping[str, Any], added: Container[str], key: str) -> bool:
    """Whether a stored head commits the text ``revised`` hashes, split and prefixed alike: only the metadata differs.

    ``revised`` gives the new version's revision with another metadata fingerprint; ``head`` is
    the stored head's metadata, ``added`` the keys the retriever adds to a document's, ``key``
    the one holding its revision. Recomputed with the metadata the head stores, the revision is
    the head's own exactly then, so every stored vector of the document is of the text the new
    version embeds, and can be written again as it is.
    """
    return revised(metadata_fingerprint({k: v for k, v in head.items() if k not in added})) == head.get(key)


def fingerprint(obj: object) -> str:
    """A stable description of a splitter's settings, so that changing them re-splits on the next add.

    - an object: its type and its plain attributes (str, int, float, bool, None), each under
      the name its class's ``revision_names`` maps it to, and the type under its class's
      ``revision_type`` where it has one (so renaming either re-embeds nothing);
    - a function or lambda: its qualified name, a hash of its code (body and constants), and
      its defaults and closure values, each described the same way;
    - a ``functools.partial``: its function and its arguments, described the same way.

    What it cannot see (a setting held in a nested object, or in state a function reads at
    call time) does not re-split: give such a splitter a plain attribute that names its version.
    """
    return _described(obj, depth=0)


def _described(obj: object, depth: int) -> str:
    if obj is None or isinstance(obj, str | int | float | bool):
        return repr(obj)
    if depth > 4:  # a closure over itself, or a deep chain of partials
        return type(obj).__qualname__
    if isinstance(obj, functools.partial):
        args = [_described(a, depth + 1) for a in obj.args]
        kwargs = [f"{k}={_described(v, depth + 1)}" for k, v in sorted(obj.keywords.items())]
        return f"partial({_described(obj.func, depth + 1)}, {', '.join([*args, *kwargs])})"
    if isinstance(obj, types.MethodType):
        return f"{_described(obj.__func__, depth + 1)} of {_described(obj.__self__, depth + 1)}"
    if isinstance(obj, types.FunctionType):
        code = obj.__code__
        body = hashlib.sha256(code.co_code + repr(code.co_consts).encode("utf-8", "surrogatepass")).hexdigest()[:12]
        defaults = [_described(d, depth + 1) for d in obj.__defaults__ or ()]
        cells = [_described(c.cell_contents, depth + 1) for c in obj.__closure__ or () if _filled(c)]
        return f"{obj.__module__}.{obj.__qualname__}#{body}{defaults}{cells}"
    if isinstance(obj, list | tuple):
        return f"{type(obj).__name__}[{', '.join(_described(v, depth + 1) for v in obj)}]"
    try:
        attrs = vars(obj)
    except TypeError:
        return repr(obj)
    names = getattr(type(obj), "revision_names", {})  # an attribute renamed keeps its stored name
    plain = sorted(
        (names.get(k, k), v) for k, v in attrs.items() if isinstance(v, str | int | float | bool | type(None))
    )
    kind = getattr(type(obj), "revision_type", f"{type(obj).__module__}.{type(obj).__qualname__}")
    return f"{kind}{plain}"


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018  (an empty cell raises)
    except ValueError:
        return False
    return True


def content_id(text: str) -> str:
    """A deterministic document id derived from the content."""
    return "doc-" + revision(text)


def document_ids(documents: Sequence[Document], ids: Sequence[str | None] | None) -> list[str]:
    """One id per document: from ``ids``, else ``Document.id``, else a hash of the text.

    Raises:
        ValueError: When ``ids`` has the wrong length, a document is not text, or two
            documents of one call share an id.
    """
    if isinstance(documents, str | Document) or not isinstance(documents, Sequence):
        msg = f"add_documents takes a list of Documents, got a {type(documents).__name__}; pass [Document(text), ...]."
        raise TypeError(msg)
    strays = [(n, d) for n, d in enumerate(documents) if not isinstance(d, Document)]
    if strays:
        n, stray = strays[0]
        msg = (
            f"add_documents takes Documents; item {n} is a {type(stray).__name__}. "
            "Wrap each text: Document(page_content=text, metadata={...})."
        )
        raise TypeError(msg)
    if ids is not None and len(ids) != len(documents):
        msg = f"`ids` has {len(ids)} entries for {len(documents)} documents; give one id per document."
        raise ValueError(msg)
    out: list[str] = []
    seen: dict[str, int] = {}
    for position, doc in enumerate(documents):
        text = doc.page_content
        given = ids[position] if ids is not None else None
        doc_id = given or doc.id or (content_id(text) if isinstance(text, str) else None)
        if not isinstance(text, str) or doc_id is None:
            msg = f"Document {position} has no text (page_content is {type(text).__name__}). Give it a str."
            raise ValueError(msg)
        if not isinstance(doc_id, str) or len(doc_id) > MAX_ID_CHARS or "\x00" in doc_id:
            shown = f"{doc_id[:60]}..." if isinstance(doc_id, str) and len(doc_id) > 60 else doc_id
            msg = (
                f"Document {position} has the id {shown!r}: ids are text of at most {MAX_ID_CHARS} characters "
                "without NUL (a docstore key and a vector-store id are made from it). Give it a shorter id, "
                "e.g. a hash of the long one."
            )
            raise ValueError(msg)
        if doc_id in seen:
            msg = (
                f"Documents {seen[doc_id]} and {position} share the id {doc_id!r}; "
                "ids must be unique in one call. Drop the duplicate or give it its own id."
            )
            raise ValueError(msg)
        try:
            doc_id.encode("utf-8")
        except UnicodeEncodeError as exc:
            msg = (
                f"Document {position} has the id {doc_id!r}, which holds a lone surrogate {doc_id[exc.start]!r} "
                f"at char {exc.start}: it has no UTF-8 form and no store can write it. Give it an id without one."
            )
            raise ValueError(msg) from None
        seen[doc_id] = position
        out.append(doc_id)
    return out


def checked_text(text: object, doc_id: str) -> str:
    """A document's text to index: refused, naming the document, where it is empty or no store can write it."""
    if not isinstance(text, str) or not text.strip():
        msg = f"Document {doc_id!r} has no text to index (empty or whitespace only). Remove it or give it text."
        raise ValueError(msg)
    check_text(text, doc_id)
    return text


def check_text(text: str, doc_id: str, what: str = "text") -> None:
    """Refuse text no store can write: a lone surrogate (half of a UTF-16 pair) has no UTF-8 form.

    Such text usually comes from a file decoded with ``errors="surrogateescape"``; every store
    fails on it mid-write, so it is refused before the first write, naming the document.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        msg = (
            f"Document {doc_id!r}: its {what} holds a lone surrogate {text[exc.start]!r} at char {exc.start}, "
            "which has no UTF-8 form and no store can write. Decode the source with errors='replace', "
            "or remove the character."
        )
        raise ValueError(msg) from None


def encode_metadata(metadata: Mapping[str, Any], doc_id: str, *, lists: bool = False) -> dict[str, Any]:
    """Turn a document's metadata into values every vector store accepts.

    A list, a dict or None is stored as JSON text (None as a key named in ``lcx_none``), which
    every store takes. With ``lists`` (a store that holds arrays and filters them: Chroma's
    ``$contains``), a non-empty list of one scalar kind (all str, all int, all float or all
    bool) stays a list, so an access list can be filtered on.

    Raises:
        ValueError: When a key uses the reserved ``lcx_`` prefix, or a value is not
            JSON-serialisable; the message names the document and the key.
    """
    out: dict[str, Any] = {}
    as_json: list[str] = []
    as_none: list[str] = []
    for key, value in metadata.items():
        if not isinstance(key, str) or not key or key.startswith(PREFIX) or "," in key:
            msg = (
                f"Document {doc_id!r}: metadata key {key!r} is reserved or unusable "
                f"(keys must be non-empty strings without ',' that do not start with {PREFIX!r}). "
                "Rename the key."
            )
            raise ValueError(msg)
        check_text(key, doc_id, f"metadata key {key!r}")
        if isinstance(value, str):
            check_text(value, doc_id, f"metadata {key!r}")
        if isinstance(value, float) and not math.isfinite(value):
            msg = (
                f"Document {doc_id!r}: metadata {key!r} is {value}, which vector stores drop or refuse "
                "(JSON has no NaN or infinity). Store None, or the value as a string."
            )
            raise ValueError(msg)
        if isinstance(value, int) and not isinstance(value, bool) and not _INT64[0] <= value <= _INT64[1]:
            msg = (
                f"Document {doc_id!r}: metadata {key!r} is {value}, past a 64-bit integer, which vector stores "
                "round to a float or clamp (a filter on it then finds another document). Store it as a string."
            )
            raise ValueError(msg)
        if value is None:
            as_none.append(key)
        elif isinstance(value, _SCALARS) or (lists and _held_as_list(value)):
            out[key] = value
        else:
            try:
                out[key] = json.dumps(value, sort_keys=True, allow_nan=False)
            except (TypeError, ValueError) as exc:
                msg = (
                    f"Document {doc_id!r}: metadata {key!r} holds a {type(value).__name__}, "
                    "which is neither a scalar nor JSON-serialisable. Convert it to a "
                    "str, number, bool, list or dict."
                )
                raise ValueError(msg) from exc
            as_json.append(key)
    if as_json:
        out[STORED_JSON] = ",".join(as_json)
    if as_none:
        out[STORED_NONE] = ",".join(as_none)
    return out


def _held_as_list(value: Any) -> bool:
    """Whether ``value`` is a list a store of arrays holds as one: not empty, of one scalar kind, each item writable.

    Any other list stays JSON text, as every list was: a mix of kinds, a lone surrogate, NaN, an int past 64 bits.
    """
    if not isinstance(value, list) or not value or len({type(v) for v in value}) != 1:
        return False
    kind = type(value[0])
    if kind is float:
        return all(math.isfinite(v) for v in value)
    if kind is int:
        return all(_INT64[0] <= v <= _INT64[1] for v in value)
    return kind is bool or (kind is str and not any(_SURROGATE.search(v) for v in value))


def decode_metadata(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The document's own metadata, as it was before :func:`encode_metadata`."""
    out = {k: v for k, v in stored.items() if not k.startswith(PREFIX)}
    for key in _keys(stored.get(STORED_JSON)):
        out[key] = json.loads(out[key])
    for key in _keys(stored.get(STORED_NONE)):
        out[key] = None
    return out


def _keys(joined: Any) -> list[str]:
    return joined.split(",") if isinstance(joined, str) and joined else []


def record_cues(record: Document) -> Cues:
    """A sentence record's :class:`~langchain_expand.text.cues.Cues`, from its text and stored gap."""
    return cues(record.page_content, str(record.metadata.get(STORED_GAP, "")))
