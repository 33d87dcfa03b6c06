"""Every cookbook runs offline on the bundled data and prints what it promises."""

from __future__ import annotations

import contextlib
import io
import os
import re
import runpy
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # the embedding model, subprocesses or a server

COOKBOOKS = Path(__file__).parents[1] / "cookbooks"


def run(name: str, *args: str) -> str:
    """Run a cookbook as ``python cookbooks/NAME.py ARGS`` would, in this process (the model loads once).

    Without a chat model or cross-encoder configured, whatever the environment says.
    """
    hidden = ("LANGCHAIN_EXPAND_CHAT_MODEL", "LANGCHAIN_EXPAND_CROSS_ENCODER")
    saved_env = {k: os.environ.pop(k) for k in hidden if k in os.environ}
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(COOKBOOKS / f"{name}.py"), *args]
    sys.path.insert(0, str(COOKBOOKS))
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(sys.argv[0], run_name="__main__")
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        os.environ.update(saved_env)
        sys.modules.pop("_common", None)
    return out.getvalue()


def test_cookbooks_are_all_tested() -> None:
    scripts = {p.stem for p in COOKBOOKS.glob("*.py") if not p.name.startswith("_")}
    assert scripts == {
        "quickstart",
        "transcripts",
        "reference_docs",
        "rerank_then_expand",
        "budget_report",
        "server_mode",
    }


def test_quickstart_prints_a_prompt_inside_its_budget() -> None:
    out = run("quickstart")
    tokens = int(re.search(r"final prompt \((\d+) tokens", out).group(1))  # type: ignore[union-attr]
    assert 0 < tokens <= 1200
    assert "[1] " in out
    assert "Human: What did the team decide" in out


def test_transcripts_shows_equal_cost_windows_and_a_merge_saving() -> None:
    out = run("transcripts")
    sizes = {m.group(1): int(m.group(2)) for m in re.finditer(r"window (\d:\d): median (\d+) tokens", out)}
    assert sizes["2:2"] == pytest.approx(sizes["3:1"], rel=0.2)
    saved = int(re.search(r"merging saved (\d+) tokens", out).group(1))  # type: ignore[union-attr]
    assert saved > 0
    assert ">>" in out


def test_reference_docs_trims_parents_under_the_budgets() -> None:
    out = run("reference_docs")
    budgeted = out.split("budgets:")[-1]
    assert "trimmed around its best child" in budgeted
    assert int(re.search(r"(\d+) tokens", budgeted).group(1)) <= 400  # type: ignore[union-attr]
    per_parent = re.findall(r"score 0\.\d+, (\d+) tokens", budgeted)
    assert len(per_parent) == 4
    assert all(int(tokens) <= 150 for tokens in per_parent)


def test_rerank_then_expand_reports_both_scores() -> None:
    out = run("rerank_then_expand")
    assert "bundled MiniLM cosine" in out
    assert len(re.findall(r"retrieval 0\.\d+, rerank 0\.\d+", out)) == 4


def test_budget_report_prints_every_table() -> None:
    out = run("budget_report")
    tables = ("### Sentences", "### Window sizes", "### Prompt sizes", "### Windows against parents", "### Verdict")
    for title in tables:
        assert title in out


def test_server_mode_survives_a_chroma_restart() -> None:
    out = run("server_mode")
    assert "after a server restart, the same windows: True" in out
    assert out.count("parent: ") == 2
