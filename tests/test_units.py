"""The unit contract: metadata keys are named once, in units.py."""

from __future__ import annotations

import ast
from pathlib import Path

from langchain_expand import units

SRC = Path(units.__file__).parent

# Every metadata key the contract names, except "id" (a ChildRef field, but also a plain
# field name of Document and of the docstore's JSON, which are not unit metadata).
CONTRACT_KEYS = {
    value
    for name, value in vars(units).items()
    if name.isupper() and isinstance(value, str) and value != units.REF_ID and name != "PREFIX"
}


def _key_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants used the way metadata keys are: m["k"], m.get("k"), "k" in m, {"k": v}."""
    found: list[tuple[int, str]] = []

    def keyish(node: ast.AST | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in CONTRACT_KEYS:
            return node.value
        return None

    for node in ast.walk(tree):
        candidates: list[ast.AST | None] = []
        if isinstance(node, ast.Subscript):
            candidates.append(node.slice)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in {"get", "pop", "setdefault"} and node.args:
                candidates.append(node.args[0])
        elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            candidates.append(node.left)
        elif isinstance(node, ast.Dict):
            candidates.extend(node.keys)
        elif isinstance(node, ast.Set):
            candidates.extend(node.elts)
        for candidate in candidates:
            key = keyish(candidate)
            if key is not None:
                found.append((getattr(candidate, "lineno", 0), key))
    return found


def test_no_metadata_key_literal_outside_the_contract_module() -> None:
    offenders = []
    for path in sorted(SRC.glob("*.py")):
        if path.name == "units.py":
            continue
        for line, key in _key_literals(ast.parse(path.read_text(encoding="utf-8"))):
            offenders.append(f"{path.name}:{line}: {key!r}")
    assert offenders == [], "use the names in units.py:\n" + "\n".join(offenders)


def test_the_literal_check_catches_each_way_a_key_is_written() -> None:
    code = 'm["start_index"]; m.get("doc_id"); "span" in m; {"tokens": 1}; {"hits"}; m["text"]'
    assert sorted(key for _, key in _key_literals(ast.parse(code))) == [
        "doc_id",
        "hits",
        "span",
        "start_index",
        "tokens",
    ]


def test_storage_keys_carry_the_reserved_prefix() -> None:
    stored = [value for name, value in vars(units).items() if name.startswith("STORED_")]
    assert len(stored) == 9
    assert all(value.startswith(units.PREFIX) for value in stored)


def test_accessors_read_the_contract() -> None:
    window = {units.DOC_ID: "d", units.START: 3, units.END: 9, units.SPAN: [2, 5], units.HIT: 3}
    assert units.located(window)
    assert not units.is_window(window)  # no sentence offsets: cannot be trimmed by sentences
    assert units.is_window({**window, units.SENTENCES: [[3, 5], [6, 7], [8, 9]]})
    assert not units.located({units.DOC_ID: "d", units.START: "3", units.END: 9})
