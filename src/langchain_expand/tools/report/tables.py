"""The budget report's tables: what was measured, and how it reads as text, Markdown and JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["SCHEMA_PATH", "CorpusReport", "DesignRow", "SentenceTable", "Sizes", "Verdict", "WindowRow"]


SCHEMA_PATH = Path(__file__).with_name("report.schema.json")


SENTENCE_WARNING_P95 = 128
"""Above this p95 (tokens, before the cap), sentences are not a unit to count on."""


@dataclass(frozen=True)
class Sizes:
    """A distribution by its median and its tail."""

    median: float
    p95: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Sizes:
        """Percentiles of ``values`` (linear interpolation); zeros when empty."""
        if not values:
            return cls(0.0, 0.0, 0.0, 0.0)
        a = np.asarray(values, dtype=float)
        med, p95, p99 = (float(x) for x in np.percentile(a, [50, 95, 99]))
        return cls(med, p95, p99, float(a.max()))


@dataclass(frozen=True)
class SentenceTable:
    """Are the sentences real? Sizes with the cap, sizes without, and what the cap split."""

    count: int
    tokens: Sizes
    uncapped: Sizes
    cap: int | None
    capped_share: float
    warning: str | None


@dataclass(frozen=True)
class WindowRow:
    """What one window configuration costs, measured and predicted."""

    before: int
    after: int
    sentences: int
    unit: Sizes
    predicted: float
    prediction_error: float
    prompt: Sizes
    prompt_merged: Sizes
    over_budget: float
    over_budget_merged: float


@dataclass(frozen=True)
class DesignRow:
    """One design's unit and prompt sizes at ``k``."""

    design: str
    unit: Sizes
    prompt: Sizes
    over_budget: float


@dataclass(frozen=True)
class Verdict:
    """``budget - reserve - p99 prompt``: positive is safe, negative means truncation fires."""

    design: str
    margin: float
    safe: bool


@dataclass
class CorpusReport:
    """Everything the report measured; ``to_json`` follows ``report.schema.json``."""

    corpus: str
    documents: int
    queries: int
    pseudo_queries: bool
    k: int
    budget: int
    reserve: int
    sentences: SentenceTable
    windows: list[WindowRow]
    index_seconds: float
    sweep_seconds: float
    reindex_seconds_saved: float
    read_from_index: bool
    parents_from: str | None
    designs: list[DesignRow]
    verdicts: list[Verdict]
    recommendation: str
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict, repr=False)
    """Raw sizes for the plots: ``{"units": {design: sizes}, "prompts": {design: sizes}}``."""

    def to_dict(self) -> dict[str, Any]:
        """Plain data, without the raw samples."""
        data = asdict(self)
        data.pop("samples")
        return data

    def to_json(self) -> str:
        """The report as JSON (see ``report.schema.json``)."""
        return json.dumps(self.to_dict(), indent=2)

    def to_markdown(self) -> str:
        """The four tables and the recommendation as Markdown."""
        return (
            "\n\n".join(f"### {title}\n\n" + _markdown(header, rows) for title, header, rows in self._tables())
            + f"\n\n### Recommendation\n\n{self.recommendation}\n"
        )

    def print_rich(self, console: Console | None = None) -> None:
        """The tables in the terminal, with rich; each fits 80 columns (cells wrap, never truncate)."""
        from rich.console import Console
        from rich.table import Table

        console = console or Console()
        for title, header, rows in self._tables():
            table = Table(title=title, title_justify="left")
            for name in header:
                left = name in ("design", "configuration")
                table.add_column(name, justify="left" if left else "right", overflow="fold")
            for row in rows:
                table.add_row(*row)
            console.print(table)
        console.print(f"[bold]Recommendation.[/bold] {self.recommendation}")

    def _tables(self) -> list[tuple[str, list[str], list[list[str]]]]:
        s = self.sentences
        source = "pseudo-queries sampled from the corpus" if self.pseudo_queries else "queries"
        how = (
            f"read from the index in {self.index_seconds:.1f}s, no document embedded"
            if self.read_from_index
            else f"embedded once in {self.index_seconds:.1f}s"
        )
        saved = (
            f"; re-indexing per window would have cost {self.reindex_seconds_saved:.0f}s more"
            if self.reindex_seconds_saved
            else ""
        )
        reserve = f" less a {self.reserve:,} reserve" if self.reserve else ""
        sentence_rows = [
            ["with the cap", f"{s.count:,}", *_sizes(s.tokens), f"{s.capped_share:.1%}"],
            ["without a cap", "", *_sizes(s.uncapped), ""],
        ]
        window_units, window_prompts = _window_cells(self.windows)
        designs = [
            [d.design, _n(d.unit.median), _n(d.unit.max), _n(d.prompt.median), _n(d.prompt.p99), f"{d.over_budget:.1%}"]
            for d in self.designs
        ]
        verdicts = [
            [v.design, f"{v.margin:+,.0f}", "safe" if v.safe else "truncation will fire"] for v in self.verdicts
        ]
        return [
            (
                f"Sentences ({self.corpus}; cap {s.cap} tokens; {s.warning or 'sentences look real'})",
                ["configuration", "sentences", "median", "p95", "p99", "max", "text the cap split"],
                sentence_rows,
            ),
            (
                f"Window sizes: {self.queries} {source}, one index ({how}; the sweep took "
                f"{self.sweep_seconds:.1f}s{saved})",
                ["window", "sentences", "median", "p99", "max", "predicted", "error"],
                window_units,
            ),
            (
                f"Prompt sizes at k={self.k}, budget {self.budget:,}{reserve}: unmerged, then merged",
                ["window", "median", "p99", "merged median", "merged p99", "over", "over merged"],
                window_prompts,
            ),
            (
                f"Windows against parents ({self.parents_from or 'no sections or headings found'}), "
                f"budget {self.budget:,}",
                ["design", "unit median", "unit max", "prompt median", "prompt p99", "over budget"],
                designs,
            ),
            (
                f"Verdict: budget {self.budget:,} - reserve {self.reserve:,} - p99 prompt = margin",
                ["configuration", "margin", "verdict"],
                verdicts,
            ),
        ]


def _window_cells(windows: list[WindowRow]) -> tuple[list[list[str]], list[list[str]]]:
    """The cells of the window sizes' table and of the prompt sizes' table, a row per window."""
    units = [
        [
            f"{w.before}:{w.after}",
            str(w.sentences),
            *map(_n, (w.unit.median, w.unit.p99, w.unit.max)),
            f"{w.predicted:,.0f}",
            f"{w.prediction_error:+.0%}",
        ]
        for w in windows
    ]
    prompts = [
        [
            f"{w.before}:{w.after}",
            *map(_n, (w.prompt.median, w.prompt.p99, w.prompt_merged.median, w.prompt_merged.p99)),
            f"{w.over_budget:.1%}",
            f"{w.over_budget_merged:.1%}",
        ]
        for w in windows
    ]
    return units, prompts


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _sizes(s: Sizes) -> list[str]:
    return [_n(s.median), _n(s.p95), _n(s.p99), _n(s.max)]


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
