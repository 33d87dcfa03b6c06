"""The README's examples run as written (issue #35, finding 10).

Every ``python`` block runs twice, each time in a new process, from a folder outside the clone,
on the data the package ships; every ``text`` block that shows a command-line session
(lines starting ``$ langchain-expand``) is replayed, and what each command prints must equal the
README's lines. A README example that no longer runs, or a sample output the code no longer
prints, fails here.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from langchain_expand.tools.cli import main

from .conftest import run_python

pytestmark = pytest.mark.integration  # the embedding model

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PROMPT = "$ langchain-expand "


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.S | re.M)


PYTHON = blocks("python")
SESSIONS = [block for block in blocks("text") if block.startswith(PROMPT)]


def test_the_readme_has_examples_to_run() -> None:
    assert len(PYTHON) >= 2  # the quickstart and the migration
    assert SESSIONS  # the command line's sample


@pytest.mark.parametrize("n", range(len(PYTHON)))
def test_python_example_runs_and_answers_alike_in_a_second_process(n: int, tmp_path: Path) -> None:
    # From a folder outside the clone, as a user of the installed package runs it; then in a
    # new process that only reopens and asks, its add_documents lines left out (issue #52,
    # finding 5: the migration example's children were in memory, so a restart answered []).
    reopened = "\n".join(line for line in PYTHON[n].splitlines() if ".add_documents(" not in line)
    printed = [run_python(code, cwd=tmp_path) for code in (PYTHON[n], reopened)]
    assert printed[0].strip(), "each example prints what it retrieved"
    assert printed[1] == printed[0]


def commands(session: str) -> list[tuple[list[str], list[str]]]:
    """The session's commands, each with the lines the README says it prints."""
    steps: list[tuple[list[str], list[str]]] = []
    for line in session.splitlines():
        if line.startswith(PROMPT):
            steps.append((shlex.split(line[len(PROMPT) :]), []))
        else:
            steps[-1][1].append(line.rstrip())
    return steps


@pytest.mark.parametrize("n", range(len(SESSIONS)))
def test_command_line_sample_prints_what_the_readme_shows(
    n: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    (tmp_path / "data").symlink_to(ROOT / "src" / "langchain_expand" / "data")  # run from src/langchain_expand
    monkeypatch.chdir(tmp_path)
    for argv, expected in commands(SESSIONS[n]):
        assert main(argv) == 0, argv
        printed = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
        assert printed == expected, f"langchain-expand {shlex.join(argv)}"
