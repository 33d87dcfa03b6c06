"""The command line as a user runs it: index, query, an interrupted index, a re-run."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import chromadb
import pytest
from langchain_core.embeddings import Embeddings

from langchain_expand.tools.cli import main

from .conftest import load_docs

pytestmark = pytest.mark.integration  # the embedding model, subprocesses or a server

CLI = [sys.executable, "-m", "langchain_expand"]


def small_docs(path: Path) -> Path:
    """The test meetings cut into documents of 15 lines, so indexing takes many batches."""
    rows = []
    for doc in load_docs("qmsum"):
        lines = doc["text"].split("\n")
        for i in range(0, len(lines), 15):
            rows.append({"doc_id": f"{doc['doc_id']}-{i // 15}", "text": "\n".join(lines[i : i + 15])})
    corpus = path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in rows if r["text"].strip()))
    return corpus


def cli(home: Path, *args: str) -> str:
    """Run the command in this process (the model loads once), return what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--home", str(home), *args]) == 0
    return out.getvalue()


def count(home: Path) -> int:
    return chromadb.PersistentClient(str(home / "chroma")).get_collection("sentences").count()


def index_until(home: Path, corpus: Path, line: str, sent: signal.Signals) -> tuple[subprocess.Popen[str], str]:
    """``index`` in a process of its own, sent ``sent`` once it logs ``line``; the process and its later stderr."""
    process = subprocess.Popen(
        [*CLI, "--home", str(home), "index", str(corpus), "--batch-docs", "2", "--verbose"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stderr is not None
    for logged in process.stderr:
        if logged.startswith(line):
            process.send_signal(sent)
            break
    rest = process.stderr.read()
    process.wait(timeout=60)
    return process, rest


def test_index_query_interrupted_index_and_rerun(tmp_path: Path) -> None:
    corpus = small_docs(tmp_path)
    n_docs = len(corpus.read_text().splitlines())
    reference, interrupted = tmp_path / "reference", tmp_path / "interrupted"
    assert f"indexed {n_docs} documents" in cli(reference, "index", str(corpus))

    process, _ = index_until(interrupted, corpus, "indexed 6 documents", signal.SIGKILL)
    assert process.returncode == -signal.SIGKILL
    partial = count(interrupted)
    assert 0 < partial < count(reference)

    cli(interrupted, "index", str(corpus))
    assert count(interrupted) == count(reference)
    cli(interrupted, "index", str(corpus))  # a third run changes nothing
    assert count(interrupted) == count(reference)

    question = "what should the remote control cost"
    ours = json.loads(cli(interrupted, "query", question, "--k", "3", "--format", "json"))
    theirs = json.loads(cli(reference, "query", question, "--k", "3", "--format", "json"))
    assert [r["page_content"] for r in ours["results"]] == [r["page_content"] for r in theirs["results"]]
    assert len(ours["results"]) == 3


def test_query_with_merge_and_budget_and_parent_mode(tmp_path: Path) -> None:
    data = Path(__file__).parent / "data"
    cli(tmp_path, "index", str(data / "qmsum" / "docs.jsonl"))
    cli(tmp_path, "index", "--mode", "parent", str(data / "emanual" / "docs.jsonl"))
    merged = json.loads(cli(tmp_path, "query", "remote design", "--merge", "--budget", "150", "--format", "json"))
    assert merged["context_tokens"] <= 150
    parents = json.loads(cli(tmp_path, "query", "pair the remote", "--mode", "parent", "--k", "2", "--format", "json"))
    assert len(parents["results"]) == 2
    assert all("children" in r["metadata"] for r in parents["results"])
    # a query scoped to one document (the README's "over many meetings or one"), in either mode
    unscoped = json.loads(cli(tmp_path, "query", "remote design", "--format", "json"))
    other = next(d for d in ("ES2005a", "IS1004a", "ES2013a") if d != unscoped["results"][0]["metadata"]["doc_id"])
    where = json.dumps({"doc_id": other})
    scoped = json.loads(cli(tmp_path, "query", "remote design", "--filter", where, "--format", "json"))
    assert {r["metadata"]["doc_id"] for r in scoped["results"]} == {other}
    where = '{"doc_id": {"$in": ["smart_tv_remote"]}}'
    parents = json.loads(cli(tmp_path, "query", "pair", "--mode", "parent", "--filter", where, "--format", "json"))
    assert parents["results"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["--home", str(tmp_path), "query", "pair", "--filter", '{"doc_id": "none"}']) == 1
    assert 'no unit answered the question among 3 indexed documents (--filter {"doc_id": "none"}' in err.getvalue()


def test_parent_mode_fuses_bm25_over_the_children_and_fills_an_older_index_without_embedding(tmp_path: Path) -> None:
    # issue #50: the README advises parents with a LexicalIndex for manuals and meetings; --lexical
    # was window mode's alone. An index built without one gets its rows on the next run.
    from langchain_expand import LexicalIndex

    manual = str(Path(__file__).parent / "data" / "emanual" / "docs.jsonl")
    first = cli(tmp_path, "index", "--mode", "parent", "--no-lexical", manual)
    assert " 0 unchanged" in first
    children = LexicalIndex(tmp_path / "lexical.sqlite", table="children")
    assert children.documents() == set()
    again = cli(tmp_path, "index", "--mode", "parent", manual)
    assert re.search(r"\b0 embedded", again), again  # the children's BM25 rows, from the docstore's parents
    assert children.documents()
    assert LexicalIndex(tmp_path / "lexical.sqlite").documents() == set()  # the sentences' table: window mode's
    question = "How do I reset my network settings?"
    found = json.loads(cli(tmp_path, "query", question, "--mode", "parent", "--budget", "500", "--format", "json"))
    assert found["results"][0]["page_content"].startswith("## Resetting Your Network")
    assert found["context_tokens"] <= 500


def test_the_models_loading_bar_shows_only_with_verbose(tmp_path: Path) -> None:
    """Issue #35, finding 5: every call printed 'Loading weights: 100%...'; now only index --verbose does."""
    corpus = tmp_path / "note.md"
    corpus.write_text("# Remote\nThe remote control costs 25 euros. It is yellow.\n", encoding="utf-8")
    verbose = subprocess.run(
        [*CLI, "--home", str(tmp_path), "index", str(corpus), "--verbose"], capture_output=True, text=True
    )
    assert verbose.returncode == 0, verbose.stderr
    assert "Loading weights" in verbose.stderr  # the bar this hides: the check below can fail
    asked = subprocess.run([*CLI, "--home", str(tmp_path), "query", "remote"], capture_output=True, text=True)
    assert asked.returncode == 0, asked.stderr
    assert "tokens joined" in asked.stdout
    assert "Loading weights" not in asked.stderr


def test_a_binary_file_is_refused_naming_it(tmp_path: Path) -> None:
    def run(path: Path) -> tuple[int, str]:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(["--home", str(tmp_path), "index", str(path)])
        return code, err.getvalue()

    bad = tmp_path / "image.txt"
    bad.write_bytes(b"\x89PNG\x00\x00binary")
    code, err = run(bad)
    assert code == 2
    assert f"{bad}: looks binary" in err
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9 au lait".encode("latin-1"))
    code, err = run(latin)
    assert code == 2
    assert "not valid UTF-8" in err


def test_jsonl_rows_stream_and_bad_rows_name_their_line(tmp_path: Path) -> None:
    from langchain_expand.tools.corpus import read_corpus

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text('{"doc_id": "a", "text": "One."}\n\n{"doc_id": "b", "text": "Two."}\nnot json\n')
    rows = read_corpus([corpus])
    assert next(rows).id == "a"  # the first document arrives before the bad line is read
    assert next(rows).id == "b"
    with pytest.raises(ValueError, match=r"docs.jsonl:4: not valid JSON"):
        next(rows)


def test_empty_results_are_errors_not_success(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def run(*argv: str) -> tuple[int, str]:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = main(["--home", str(tmp_path / "home"), *argv])
        return code, err.getvalue()

    code, err = run("query", "anything")
    assert code == 2
    assert "no window index in" in err
    assert "run `langchain-expand index --mode window PATH` first" in err
    assert not (tmp_path / "home" / "chroma").exists()  # asking created nothing
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "paper.pdf").write_bytes(b"%PDF-1.4")
    with caplog.at_level("WARNING"):
        code, err = run("index", str(empty))
    assert code == 2
    assert "found no documents in" in err
    assert f"(1 skipped: {empty / 'paper.pdf'}: only .txt, .md, .jsonl files are read)" in err
    assert "paper.pdf" not in caplog.text  # said once, in the error, not logged as well


@pytest.mark.parametrize("lexical", ["--lexical", "--no-lexical"])
def test_a_query_after_an_index_killed_before_its_first_commit_says_so_in_every_mode(
    lexical: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #35, finding 7: the hybrid path printed "0 units" and exited 0, the store-only one warned."""
    from langchain_expand.windows.layout import SentenceLayout

    def killed(self: SentenceLayout, todo: object) -> None:
        raise KeyboardInterrupt  # after every sentence is written, before any document is committed

    home, manual = tmp_path / "home", str(Path(__file__).parent / "data" / "emanual" / "docs.jsonl")
    with monkeypatch.context() as patched:
        patched.setattr(SentenceLayout, "write_heads", killed)
        assert main(["--home", str(home), lexical, "index", manual]) == 130
    assert count(home) > 0
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["--home", str(home), lexical, "query", "pair the remote"])
    assert code == 1
    assert "holds no complete document: an `index` run was interrupted" in err.getvalue()
    assert "Run the same `langchain-expand index` command again to resume." in err.getvalue()
    cli(home, lexical, "index", manual)  # resumed: the same query answers
    assert "\n   0 units" not in cli(home, lexical, "query", "pair the remote")


def test_a_repeated_document_id_is_an_error_naming_both_lines_and_replaces_nothing(tmp_path: Path) -> None:
    from langchain_expand.tools.corpus import read_corpus

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text(
        '{"doc_id": 1, "text": "First."}\n{"doc_id": "2", "text": "Two."}\n{"doc_id": "1", "text": "X."}\n'
    )
    rows = read_corpus([corpus])
    assert [next(rows).id, next(rows).id] == ["1", "2"]
    with pytest.raises(
        ValueError, match=r"docs.jsonl:3: doc_id '1' repeats the id of .*docs.jsonl:1 \(ids compare as text"
    ):
        next(rows)


@pytest.mark.integration
def test_the_cli_stops_at_a_repeated_id_across_batches_and_keeps_the_first(tmp_path: Path) -> None:
    corpus = tmp_path / "docs.jsonl"
    rows = [{"doc_id": 1, "text": "The cat sat on the mat."}, {"doc_id": 2, "text": "Dogs bark."}]
    rows.append({"doc_id": "1", "text": "A replacement that must not land."})
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["--home", str(tmp_path), "index", str(corpus), "--batch-docs", "1"])
    assert code == 2
    assert "doc_id '1' repeats the id of" in err.getvalue()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["--home", str(tmp_path), "query", "where did the cat sit", "--k", "1", "--format", "json"])
    (result,) = json.loads(out.getvalue())["results"]
    assert result["page_content"] == "The cat sat on the mat."


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget", "0"], "--budget must be a positive number of tokens, got 0; leave it out for no budget."),
        (["--k", "0"], "--k must be a positive number of units, got 0."),
        (["--before", "-1"], "--before must be 0 or more sentences, got -1."),
        (["--mode", "parent", "--before", "1", "--merge"], "--before, --merge only apply to window mode"),
        (
            ["--mode", "parent", "--no-merge"],
            "--no-merge only applies to window mode; parents come whole from the document's structure. Drop it,",
        ),
    ],
)
def test_query_flags_that_cannot_apply_are_errors_naming_the_flag(
    tmp_path: Path, args: list[str], message: str
) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["--home", str(tmp_path), "query", "anything", *args])
    assert code == 2
    assert message in err.getvalue()
    assert not (tmp_path / "chroma").exists()  # refused before any store was opened


def test_query_help_shows_the_retrievers_own_defaults() -> None:
    from langchain_expand import SentenceWindowRetriever

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["query", "--help"])
    from langchain_expand.windows.plan import DEFAULT_SIDE

    fields = SentenceWindowRetriever.model_fields
    assert fields["before"].default is None  # None: DEFAULT_SIDE sentences in a fixed window
    assert f"sentences before each hit (default: {DEFAULT_SIDE})" in out.getvalue()
    assert fields["k"].default is None
    assert "(default: as many as --budget holds," in out.getvalue()  # not "None windows" (issue #35)
    assert "None" not in out.getvalue()


def test_every_option_says_what_it_does_and_its_default_in_plain_text() -> None:
    import argparse

    from langchain_expand.tools.arguments import parser as _parser

    parser = _parser()
    commands = [parser] + [
        sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for sub in action.choices.values()
    ]
    for command in commands:
        text = command.format_help()
        assert "``" not in text  # no reStructuredText
        for action in command._actions:
            if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
                assert action.help, f"{command.prog} {action.dest} has no help"  # positionals too (issue #35)
            if action.option_strings and action.dest != "help":
                assert action.help, f"{command.prog} {action.option_strings[0]} has no help"
                if action.default not in (None, False, argparse.SUPPRESS):
                    assert "(default" in action.help, f"{command.prog} {action.option_strings[0]} hides its default"


@pytest.mark.parametrize("command", ["index", "query", "demo", "report"])
def test_shared_options_are_accepted_after_the_command_and_before_it(command: str) -> None:
    """Issue #35, finding 12: ``query "..." --home x`` was an error; before the command, it still wins."""
    from langchain_expand.tools.arguments import HOME
    from langchain_expand.tools.arguments import parser as _parser

    rest = {"index": ["docs"], "query": ["a question"], "demo": [], "report": []}[command]
    after = _parser().parse_args([command, *rest, "--home", "elsewhere", "--no-lexical", "--embed-batch", "8"])
    before = _parser().parse_args(["--home", "elsewhere", "--no-lexical", "--embed-batch", "8", command, *rest])
    untold = _parser().parse_args([command, *rest])
    for args in (after, before):
        assert (args.home, args.lexical, args.embed_batch) == (Path("elsewhere"), False, 8)
    assert (untold.home, untold.lexical, untold.embed_batch, untold.device) == (HOME, True, 64, "cpu")


def test_demo_answers_every_question_inside_its_budget(demo_run: tuple[Path, str]) -> None:
    from langchain_expand.tools.cli import DEMO_BUDGET, DEMO_QUESTIONS

    home, out = demo_run
    reports = [line for line in out.splitlines() if "tokens joined" in line]
    assert len(reports) == len(DEMO_QUESTIONS)
    for line in reports:
        tokens = int(line.split("units, ")[1].split(" tokens")[0])
        assert 0.8 * DEMO_BUDGET <= tokens <= DEMO_BUDGET
    assert (home / "demo" / "lexical.sqlite").exists()
    assert not (home / "chroma").exists()  # the user's index under --home is untouched (issue #35, finding 8)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["--home", str(home), "query", "remote control"]) == 2
    assert "no window index" in err.getvalue()


class FakeTerminal(io.StringIO):
    """stderr as a terminal, so the progress bar draws into a string."""

    def isatty(self) -> bool:
        return True


def test_reindexing_counts_embedded_unchanged_removed_and_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(3):
        (folder / f"note{i}.txt").write_text(f"Note {i} is about the remote. It has {i + 2} buttons.")
    home = tmp_path / "home"
    assert "3 documents (window mode)" in cli(home, "index", "--quiet", str(folder))
    assert cli(home, "index", "--quiet", str(folder)).endswith(": 0 embedded, 3 unchanged\n")

    (folder / "note0.txt").write_text("Note 0 now says the remote is yellow.")
    (folder / "note2.txt").unlink()
    (folder / "latin1.txt").write_bytes("Caf\xe9 notes.".encode("latin-1"))
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["--home", str(home), "index", "--quiet", str(folder)]) == 2  # a bad file stops the run
    assert "latin1.txt: not valid UTF-8" in err.getvalue()

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        out = cli(home, "index", "--quiet", "--skip-bad", str(folder))
    assert ": 1 embedded, 1 unchanged" in out
    assert "1 document in the index is not in" in out  # note2 is kept without --prune
    assert "latin1.txt: not valid UTF-8" in err.getvalue()
    out = cli(home, "index", "--quiet", "--skip-bad", "--prune", str(folder))
    assert out.splitlines()[-1].endswith(": 0 embedded, 2 unchanged, 1 removed")
    assert count(home) == 2 + 1  # note1: 2 sentences, note0: now 1


def test_indexing_shows_a_progress_bar_with_total_rate_and_eta(tmp_path: Path) -> None:
    """Issue #35, finding 6: a bar in bytes sat still for minutes inside a large document; it counts sentences."""
    from langchain_expand import SentenceSplitter, TokenCounter

    corpus = small_docs(tmp_path)
    big = tmp_path / "big.txt"  # one document of many embedding calls: the bar moves inside it
    big.write_text("\n".join(load_docs("qmsum")[0]["text"] for _ in range(3)))
    err = FakeTerminal()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["--home", str(tmp_path / "home"), "index", "--batch-docs", "8", str(corpus), str(big)]) == 0
    drawn = err.getvalue()
    splitter = SentenceSplitter(token_counter=TokenCounter(), table_rows=True)
    rows = [json.loads(line)["text"] for line in corpus.read_text().splitlines()]
    total = sum(len(splitter(text)) for text in [*rows, big.read_text()])
    assert "embedding sentences" in drawn
    assert re.search(r"[\d,]+ sentences/s", drawn)  # a rate, whatever the machine's speed
    assert re.search(r"\d:\d\d:\d\d", drawn)  # time remaining
    done = [int(n) for n in re.findall(rf"(\d+)/{total}\b", drawn)]
    assert done[-1] == total
    inside_big = [n for n in done if total - len(splitter(big.read_text())) < n < total]
    assert inside_big  # drawn while the big document was being embedded, before its commit

    err = io.StringIO()  # not a terminal: silent
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["--home", str(tmp_path / "home"), "index", "--batch-docs", "8", str(corpus)]) == 0
    assert err.getvalue() == ""


def test_one_file_is_one_document_from_any_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #34, finding 9: ``mixed/ok.md`` and, from inside ``mixed/``, ``ok.md`` were two documents."""
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "ok.md").write_text("# Warranty\n\nThe warranty lasts two years. Returns take thirty days.\n")
    home = tmp_path / "home"
    said = []
    for cwd, path in (
        (tmp_path, "mixed/ok.md"),
        (tmp_path / "mixed", "ok.md"),
        (tmp_path / "mixed", str(tmp_path / "mixed" / "ok.md")),
    ):
        monkeypatch.chdir(cwd)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["--home", str(home), "index", "--quiet", path]) == 0
        said.append(out.getvalue())
    assert "1 embedded, 0 unchanged" in said[0]
    assert all("0 embedded, 1 unchanged" in s and "--prune" not in s for s in said[1:]), said


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--version"],
        ["index", "--help"],
        ["query"],
        ["query", "q", "--k", "x"],
        ["query", "   "],  # issue #52, finding 11: refused only after a 21 s model load
        ["query", "q", "--budgett", "100"],
        ["query", "q", "--filter", "docs/a.md"],  # not JSON: refused before the model loads
    ],
    ids=str,
)
def test_help_version_and_argument_errors_never_load_the_model(argv: list[str]) -> None:
    """Issue #35, finding 5: --help took 15 s importing sentence_transformers to load the model."""
    from .conftest import run_python

    loaded = run_python(
        "import sys\n"
        "from langchain_expand.tools.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('sentence_transformers', 'torch', 'chromadb') if m in sys.modules))\n",
        *argv,
    )
    assert loaded.strip().splitlines()[-1] == "[]"


def test_an_unknown_option_names_the_closest_and_an_empty_question_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # issue #52, finding 11: `--budgett 100` got no suggestion
    with pytest.raises(SystemExit):
        main(["query", "how?", "--budgett", "100"])
    assert "unrecognized arguments: --budgett 100 (did you mean --budget?)" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # another command's option: "did you mean --quiet?" named the same option
        main(["query", "how?", "--quiet", "--skip-bad"])
    err = capsys.readouterr().err
    assert "(--quiet is an option of index only; --skip-bad is an option of index and report only)" in err
    assert main(["query", "  "]) == 2
    assert "The query is empty" in capsys.readouterr().err


def test_the_budget_takes_the_retrievers_name_too() -> None:
    from langchain_expand.tools.arguments import parser as _parser

    assert _parser().parse_args(["query", "how?", "--max-tokens", "300"]).budget == 300
    assert _parser().parse_args(["query", "how?", "--budget", "300"]).budget == 300


def test_version_is_the_installed_packages() -> None:
    from importlib.metadata import version

    import langchain_expand

    done = subprocess.run([*CLI, "--version"], capture_output=True, text=True, check=True)
    assert (
        done.stdout.strip()
        == f"langchain-expand {version('langchain-expand')}"
        == f"langchain-expand {langchain_expand.__version__}"
    )


def test_ctrl_c_while_indexing_says_how_to_resume_and_exits_130(tmp_path: Path) -> None:
    """Issue #35, finding 7: Ctrl-C during index printed about 30 lines of traceback."""
    process, rest = index_until(tmp_path / "home", small_docs(tmp_path), "indexed 2 documents", signal.SIGINT)
    assert process.returncode == 130
    assert "interrupted. What was written is kept: run the same command again to resume." in rest
    assert "Traceback" not in rest


class SignalsAt(Embeddings):
    """The model; sends this process ``sent`` as its ``at``-th call begins, as Ctrl-C or ``timeout`` would."""

    def __init__(self, model: Embeddings, sent: signal.Signals, at: int) -> None:
        self.model = model
        self.sent = sent
        self.at = at
        self.calls = 0
        self.embedded = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls == self.at:
            os.kill(os.getpid(), self.sent)
        self.embedded += len(texts)
        return self.model.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.model.embed_query(text)


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_a_large_file_at_the_next_step_and_the_rerun_resumes_from_what_was_written(
    sent: signal.Signals, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, minilm: Embeddings
) -> None:
    # issue #52, finding 1: Ctrl-C on one large file waited for the whole document (hours), a
    # second one exited and the rerun started at 0; SIGTERM (`timeout`) exited 124 saying nothing
    from langchain_expand.tools import indexing

    big = tmp_path / "big.md"
    big.write_text(
        "\n\n".join(f"# Week {w}\n" + " ".join(f"Task {w}-{i} ships on day {i}." for i in range(20)) for w in range(20))
    )
    home = tmp_path / "home"
    argv = ["--home", str(home), "index", str(big), "--write-batch", "50"]

    stopping = SignalsAt(minilm, sent, at=3)
    monkeypatch.setattr(indexing, "embeddings_of", lambda args: stopping)
    assert main(argv) == 128 + sent
    err = capsys.readouterr().err
    assert f"{sent.name}: stopping at the next step" in err
    assert "interrupted. What was written is kept: run the same command again to resume." in err
    assert stopping.embedded == 150  # the batch under way when the signal came is written, no other begun
    assert signal.getsignal(sent) is not indexing._Stop._first  # the handlers are put back

    resumed = SignalsAt(minilm, sent, at=0)
    monkeypatch.setattr(indexing, "embeddings_of", lambda args: resumed)
    assert main(argv) == 0
    assert "indexed 1 document" in capsys.readouterr().out
    assert resumed.embedded == 420 - 150  # 420 sentences (20 headings, 400 tasks): the rest alone
    reference = tmp_path / "reference"
    cli(reference, "index", str(big))
    assert count(home) == count(reference) == 420
    question = "When does task 7-3 ship?"
    answers = [json.loads(cli(h, "query", question, "--format", "json")) for h in (home, reference)]
    assert answers[0] == answers[1]
