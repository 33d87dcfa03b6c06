"""The benchmarks (``benchmarks/``) name only what the library has: a rename in ``src`` breaks no script unseen."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))


def library_imports(script: Path) -> list[tuple[str, str | None]]:
    """Each ``(module, name)`` the script imports from ``langchain_expand`` (name None: the module itself)."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(script.read_text(), filename=str(script))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "langchain_expand":
            found += [(str(node.module), alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names if alias.name.split(".")[0] == "langchain_expand"]
    return found


def test_every_benchmark_is_found() -> None:
    assert {"evidence.py", "latency.py", "answers.py", "scale.py"} <= {s.name for s in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.name for s in SCRIPTS])
def test_a_benchmarks_imports_from_the_library_exist(script: Path) -> None:
    # evidence.py imported `windows.snapshot` after the module went (8ee8d29): the
    # evidence benchmark could not start, and no test ran it.
    missing = []
    for module, name in library_imports(script):
        try:
            imported = importlib.import_module(module)
        except ImportError:
            missing.append(module)
            continue
        if name is not None and not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{module}.{name}")
    assert missing == [], f"{script.name} imports what the library no longer has: {missing}"
