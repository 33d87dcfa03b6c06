"""The budget report on the small corpora in tests/data: invariants, not golden numbers."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import jsonschema
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_expand import SentenceWindowRetriever, chroma_store
from langchain_expand.tools.cli import main
from langchain_expand.tools.corpus import read_corpus
from langchain_expand.tools.report import SCHEMA_PATH, CorpusReport, Sizes, budget_report, plot, read_index, write_plots

pytestmark = pytest.mark.integration  # the embedding model, subprocesses or a server

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def manual_report(minilm: Embeddings) -> CorpusReport:
    docs = list(read_corpus([DATA / "emanual" / "docs.jsonl"]))
    queries = [json.loads(line)["query"] for line in (DATA / "emanual" / "queries.jsonl").open()][:60]
    return budget_report(
        docs, queries=queries, k=8, budget=1200, windows=[(0, 0), (1, 1), (2, 2), (3, 1), (8, 8)], embeddings=minilm
    )


def all_sizes(report: CorpusReport) -> list[Sizes]:
    s = report.sentences
    out = [s.tokens, s.uncapped]
    for w in report.windows:
        out += [w.unit, w.prompt, w.prompt_merged]
    for d in report.designs:
        out += [d.unit, d.prompt]
    return out


def test_percentiles_are_monotone(manual_report: CorpusReport) -> None:
    for sizes in all_sizes(manual_report):
        assert sizes.median <= sizes.p95 <= sizes.p99 <= sizes.max


def test_window_sizes_follow_the_formula_on_punctuated_text(manual_report: CorpusReport) -> None:
    rows = {(w.before, w.after): w for w in manual_report.windows}
    assert abs(rows[(0, 0)].prediction_error) < 0.25
    for key in [(1, 1), (2, 2), (3, 1)]:
        assert abs(rows[key].prediction_error) < 0.3  # retrieval favours longer sentences: a small positive bias
    # asymmetric and symmetric windows of five sentences cost about the same
    assert rows[(3, 1)].unit.median == pytest.approx(rows[(2, 2)].unit.median, rel=0.15)


def test_share_over_budget_follows_the_p99_prompt(manual_report: CorpusReport) -> None:
    limit = manual_report.budget - manual_report.reserve
    wide = next(w for w in manual_report.windows if (w.before, w.after) == (8, 8))
    assert wide.prompt.p99 > limit
    assert wide.over_budget > 0
    for w in manual_report.windows:
        if w.prompt.p99 > limit:
            assert w.over_budget > 0
        if w.prompt.max <= limit:
            assert w.over_budget == 0
    verdicts = {v.design: v for v in manual_report.verdicts}
    assert verdicts["window 8:8"].margin == pytest.approx(limit - wide.prompt.p99)
    assert not verdicts["window 8:8"].safe
    assert verdicts["window 0:0"].safe


def test_merging_never_makes_the_prompt_bigger(manual_report: CorpusReport) -> None:
    for w in manual_report.windows:
        assert w.prompt_merged.median <= w.prompt.median
        assert w.over_budget_merged <= w.over_budget


def test_parents_come_from_the_corpus_sections(manual_report: CorpusReport) -> None:
    assert manual_report.parents_from == "given sections"
    parent = next(d for d in manual_report.designs if d.design.startswith("parent"))
    assert parent.unit.max > 0
    assert "Parents" in manual_report.recommendation


def test_the_advice_says_how_many_prompts_a_p99_that_fits_leaves_over_the_budget(manual_report: CorpusReport) -> None:
    # it said "no query needs truncation" of a window whose p99 fit while 0.5% of prompts did not
    from dataclasses import replace

    from langchain_expand.tools.report.verdict import recommend

    widest = max(manual_report.windows, key=lambda w: w.sentences)
    limit = int(widest.prompt.p99) + 1
    for share, said in ((0.005, "0.5% of queries exceed it"), (0.0, "no query needs truncation")):
        rows = [replace(w, over_budget=share) if w is widest else w for w in manual_report.windows]
        advice = recommend(manual_report.sentences, rows, [], limit)
        assert said in advice
        assert ("no query" in advice) == (share == 0)


def test_json_output_validates_against_its_schema(manual_report: CorpusReport) -> None:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.validate(json.loads(manual_report.to_json()), schema)


def test_markdown_has_every_table(manual_report: CorpusReport) -> None:
    text = manual_report.to_markdown()
    for title in (
        "### Sentences",
        "### Window sizes",
        "### Prompt sizes",
        "### Windows against parents",
        "### Verdict",
        "### Recommendation",
    ):
        assert title in text


def test_plots_are_written(manual_report: CorpusReport, tmp_path: Path) -> None:
    paths = write_plots(manual_report, tmp_path / "plots")
    assert [p.name for p in paths] == ["units.png", "prompts.png"]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size > 5000


def test_plots_without_matplotlib_name_the_extra_that_installs_it(
    manual_report: CorpusReport, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as where it is not installed (an extra now)
    with pytest.raises(ImportError, match=r"pip install 'langchain-expand\[plots\]'"):
        write_plots(manual_report, tmp_path / "plots")


def test_unpunctuated_text_gets_a_warning_and_the_cap_bounds_windows(minilm: Embeddings) -> None:
    words = " ".join(f"node{i} status ok load {i % 7} queue {i % 13}" for i in range(900))
    docs = [Document(words, id="dump"), Document("A normal sentence. Another one here.", id="prose")]
    report = budget_report(docs, k=4, budget=2000, windows=[(1, 1)], embeddings=minilm, pseudo_queries=20, cap=64)
    assert report.pseudo_queries
    assert report.sentences.warning is not None
    assert report.sentences.capped_share > 0.9
    assert report.sentences.tokens.max <= 64
    assert report.windows[0].unit.max <= 3 * 64
    assert "not a reliable unit" in report.recommendation


def test_cli_report_prints_valid_json(tmp_path: Path) -> None:
    out = io.StringIO()
    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join(json.dumps({"query": q}) for q in ["remote design", "the budget", "buttons"]))
    with contextlib.redirect_stdout(out):
        code = main(
            [
                "report",
                str(DATA / "qmsum" / "docs.jsonl"),
                "--queries",
                str(queries),
                "--windows",
                "3:1,2:2",
                "--budget",
                "300",
                "--k",
                "4",
                "--format",
                "json",
                "--plots",
                str(tmp_path / "p"),
            ]
        )
    assert code == 0
    data = json.loads(out.getvalue())
    jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text()))
    assert [(w["before"], w["after"]) for w in data["windows"]] == [(3, 1), (2, 2)]
    assert data["queries"] == 3
    assert not data["pseudo_queries"]
    assert (tmp_path / "p" / "prompts.png").is_file()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--k", "0"], "--k must be 1 or more, got 0"),
        (["--budget", "500", "--reserve", "500"], "--reserve (500) must leave room in --budget (500)"),
    ],
)
def test_cli_report_errors_name_the_flag_typed(flags: list[str], message: str) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["report", str(DATA / "qmsum" / "docs.jsonl"), *flags]) == 2
    assert message in err.getvalue()


def test_cli_report_skips_what_it_cannot_read_with_skip_bad(tmp_path: Path) -> None:
    # `report` stopped at an empty file, and its error said to pass --skip-bad, which it did not take
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "manual.md").write_text("# Setup\n\nPlug it in. Press the button. Wait for the light.\n")
    (folder / "empty.md").write_text("\n")
    (folder / "latin1.txt").write_bytes("Caf\u00e9 au lait.".encode("latin-1"))
    flags = ["report", str(folder), "--k", "2", "--budget", "300", "--format", "json"]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(flags) == 2
    assert "empty.md: no text to index" in err.getvalue()
    assert "--skip-bad" in err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main([*flags, "--skip-bad"]) == 0
    assert json.loads(out.getvalue())["sentences"]["count"] == 4  # the heading and three sentences
    skipped = [line for line in err.getvalue().splitlines() if line.startswith("skipped ")]
    assert [line.split(":")[0] for line in skipped] == [
        f"skipped {folder / 'empty.md'}",
        f"skipped {folder / 'latin1.txt'}",
    ]
    assert "--skip-bad" not in err.getvalue()


def test_cli_rejects_a_malformed_window_list() -> None:
    with pytest.raises(SystemExit, match="before:after pairs"):
        main(["report", str(DATA / "qmsum" / "docs.jsonl"), "--windows", "3-1"])


def test_every_window_configuration_is_plotted_on_a_log_axis_with_budget_and_reserve(minilm: Embeddings) -> None:
    docs = list(read_corpus([DATA / "emanual" / "docs.jsonl"]))
    report = budget_report(
        docs, k=4, budget=1000, reserve=200, windows=[(0, 0), (2, 2), (4, 4)], embeddings=minilm, pseudo_queries=20
    )
    for kind in ("units", "prompts"):
        ax = plot(report, kind).axes[0]
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert {"window 0:0", "window 2:2", "window 4:4", "parents"} <= set(labels)
        assert ax.get_xscale() == "log"
    labels = [t.get_text() for t in plot(report, "prompts").axes[0].get_legend().get_texts()]
    assert "budget 1,000" in labels
    assert "budget less reserve 200: 800 for context" in labels


def test_terminal_tables_fit_80_columns_without_cutting_a_cell(manual_report: CorpusReport) -> None:
    from rich.console import Console

    console = Console(width=80, record=True, file=io.StringIO())
    manual_report.print_rich(console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text  # rich marks a truncated cell with an ellipsis
    for w in manual_report.windows:
        assert f"{w.before}:{w.after}" in text


@pytest.fixture(scope="module")
def indexed_folder(tmp_path_factory: pytest.TempPathFactory, minilm: Embeddings) -> Path:
    folder = tmp_path_factory.mktemp("indexed")
    retriever = SentenceWindowRetriever(vectorstore=chroma_store("manual", persist_directory=folder, embeddings=minilm))
    retriever.add_documents(list(read_corpus([DATA / "emanual" / "docs.jsonl"])))
    return folder


def test_the_report_on_an_index_embeds_nothing_and_measures_what_embedding_measures(
    indexed_folder: Path, minilm: Embeddings
) -> None:
    from .conftest import CountingEmbeddings

    counting = CountingEmbeddings(minilm)  # the same persisted index, opened with a counting model
    index = SentenceWindowRetriever(
        vectorstore=chroma_store("manual", persist_directory=indexed_folder, embeddings=counting)
    )
    settings = {"k": 6, "budget": 900, "windows": [(0, 0), (2, 2)], "pseudo_queries": 40}

    read = budget_report(index=index, **settings)
    assert counting.documents_embedded == 0
    assert counting.queries_embedded == 0
    assert read.read_from_index

    embedded = budget_report(list(read_corpus([DATA / "emanual" / "docs.jsonl"])), embeddings=minilm, **settings)
    assert read.sentences == embedded.sentences
    assert read.windows == embedded.windows  # same sentences, same hits, same windows
    assert read.designs == embedded.designs


def test_documents_rebuilt_from_the_index_are_the_source_text(indexed_folder: Path, minilm: Embeddings) -> None:
    (doc,), spans = read_index(chroma_store("manual", persist_directory=indexed_folder, embeddings=minilm))
    source = next(iter(read_corpus([DATA / "emanual" / "docs.jsonl"])))
    assert doc.page_content.strip() == source.page_content.strip()
    assert all(doc.page_content[s:e] == source.page_content[s:e] for s, e in spans[str(doc.id)])


def test_cli_report_reads_the_index_under_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert main(["--home", str(home), "index", str(DATA / "qmsum" / "docs.jsonl")]) == 0
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--home", str(home), "report", "--windows", "2:2", "--k", "4", "--format", "json"])
    assert code == 0
    data = json.loads(out.getvalue())
    jsonschema.validate(data, json.loads(SCHEMA_PATH.read_text()))
    assert data["read_from_index"]
    assert data["documents"] == 3


def test_cli_report_without_a_corpus_or_an_index_says_what_to_run(tmp_path: Path) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["--home", str(tmp_path / "empty"), "report"])
    assert code == 2
    assert "run `langchain-expand index --mode window PATH` first" in err.getvalue()
