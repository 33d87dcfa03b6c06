"""docs/recipes.md runs as written: each ``python`` block in a new process, in one folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import run_python

pytestmark = pytest.mark.integration  # the embedding model, subprocesses

RECIPES = (Path(__file__).resolve().parents[1] / "docs" / "recipes.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```python\n(.*?)^```", RECIPES, flags=re.S | re.M)


def test_each_recipe_runs_and_does_what_it_says(tmp_path: Path) -> None:
    ran = (run_python(block, cwd=tmp_path).strip() for block in BLOCKS)
    serialised, ensemble, tool, indexed, sections, clauses, access = ran
    assert serialised == "400"
    units, tokens = map(int, ensemble.split())  # issue #52, finding 10: 3 overlapping pairs, 671 tokens
    assert units >= 1
    assert tokens <= 400
    assert re.fullmatch(r"\[galaxy_s10, chars \d+-\d+\]", tool), tool
    assert indexed == "4 3 1"  # issue #52, finding 7: index() refused the retriever
    assert sections == "Wireless PowerShare True"  # issue #50: the manual's own section, hybrid parents
    assert clauses == "3. Service Levels True"  # a plain-text contract's clause, found by its number
    assert access == "ana True True\nben False True"  # an access list, filtered with $contains: no leak
