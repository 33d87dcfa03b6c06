"""The budget report's figures (matplotlib, an optional extra)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from langchain_expand.tools.report.tables import CorpusReport

if TYPE_CHECKING:
    from types import ModuleType

    from matplotlib.figure import Figure

__all__ = ["plot", "write_plots"]


def write_plots(report: CorpusReport, folder: Path | str) -> list[Path]:
    """Histograms of unit and prompt sizes, one outline per window configuration and parents.

    The size axis is logarithmic: parents run to thousands of tokens where windows stay
    at tens, and on a linear axis the windows shrink to a spike. The prompt plot marks the
    budget, and the budget less the reserve where there is one.

    Returns:
        The PNG files written.
    """
    plt = _pyplot()
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in ("units", "prompts"):
        fig = plot(report, kind)
        path = out / f"{kind}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def plot(report: CorpusReport, kind: Literal["units", "prompts"]) -> Figure:
    """One figure of :func:`write_plots`: unit or prompt sizes, every design, log axis."""
    plt = _pyplot()

    title = "Unit size (tokens)" if kind == "units" else f"Prompt size at k={report.k} (tokens)"
    series = {label: v for label, v in report.samples.get(kind, {}).items() if any(x > 0 for x in v)}
    fig: Figure
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if series:
        low = min(x for v in series.values() for x in v if x > 0)
        high = max(max(v) for v in series.values())
        if kind == "prompts":
            high = max(high, report.budget)
        bins = [float(b) for b in np.geomspace(max(low, 1.0), max(high, 2.0) * 1.05, 50)]
        for label, values in series.items():
            ax.hist([x for x in values if x > 0], bins=bins, histtype="step", linewidth=1.5, label=label)
        ax.set_xscale("log")
    if kind == "prompts":
        ax.axvline(report.budget, color="red", linestyle="--", label=f"budget {report.budget:,}")
        if report.reserve:
            limit = report.budget - report.reserve
            label = f"budget less reserve {report.reserve:,}: {limit:,} for context"
            ax.axvline(limit, color="darkred", linestyle=":", label=label)
    ax.set_xlabel(f"{title}, log scale")
    ax.set_ylabel("count")
    ax.set_title(f"{report.corpus}: {title.lower()}")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def _pyplot() -> ModuleType:
    """Matplotlib's ``pyplot``, drawing to files (Agg).

    Raises:
        ImportError: Without matplotlib; the message names the extra that installs it.
    """
    try:
        import matplotlib
    except ModuleNotFoundError as exc:
        msg = "The report's plots need matplotlib: pip install 'langchain-expand[plots]'."
        raise ImportError(msg) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
