"""The budget report: the numbers that decide between windows and parents on your corpus.

:func:`budget_report` measures (:mod:`.measure`), :class:`CorpusReport` holds and renders the
tables (:mod:`.tables`), :func:`read_index` reads an existing index back (:mod:`.index`), and
:func:`write_plots` draws the figures (:mod:`.plots`).
"""

from langchain_expand.tools.report.index import read_index
from langchain_expand.tools.report.measure import budget_report
from langchain_expand.tools.report.plots import plot, write_plots
from langchain_expand.tools.report.tables import SCHEMA_PATH, CorpusReport, Sizes

__all__ = ["SCHEMA_PATH", "CorpusReport", "Sizes", "budget_report", "plot", "read_index", "write_plots"]
