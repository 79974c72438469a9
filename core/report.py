"""``Report``: what one run found, as ``cmpx.run()`` returns it and as the CLI prints it: the run's data
(cmpx.outcome.report_data) with its renderings, the --report-json document and the text report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cmpx.outcome.report_data import ReportData


@dataclass(repr=False)
class Report(ReportData):
    """The outcome of one run (see ``ReportData`` for what it holds). ``to_json()`` is the --report-json document;
    ``text()`` the CLI's report."""

    def to_dict(self) -> dict[str, Any]:
        """The --report-json document as Python objects (NaN and infinities as the strings JSON needs)."""
        from cmpx.reports.json_report import run_document, strict

        return strict(run_document(self))

    def to_json(self, indent: int | None = 1) -> str:
        from cmpx.reports.json_report import to_json

        return to_json(self, indent)

    def text(self, verbosity: int = 1) -> str:
        """The report ``cmpx run`` prints (0 quiet, 1 normal, 2 verbose), from the retained results."""
        from cmpx.reports.text import TextReporter

        lines: list[str] = []
        reporter = TextReporter(self.plan, lines.append, verbosity=verbosity)
        reporter.started(self.result.runtimes)
        for warning in self.warnings:
            reporter.warning(warning)
        for name, seconds in self.result.load_seconds.items():
            reporter.loaded(name, seconds)
        for error in self.result.failures.values():
            reporter.backend_failed(error)
        for pair in self.result.pairs:
            reporter.pair_compared(pair)
        for finding in self.result.non_finite:
            reporter.non_finite(finding)
        reporter.finished(self)
        return "\n".join(lines)

    def records(self) -> list[dict[str, Any]]:
        """One record per pair, iteration and compared output (backend, reference, iteration, output, passed,
        elements, max_abs, max_rel, metrics, failed, note): ``pandas.DataFrame(report.records())``."""
        from cmpx.reports.notebook import records

        return records(self)

    def to_pandas(self) -> Any:
        """``records()`` as a pandas DataFrame (needs pandas)."""
        import importlib

        try:
            pandas = importlib.import_module("pandas")  # optional, and untyped where it has no stubs
        except ImportError:
            raise ImportError("Report.to_pandas() needs pandas (pip install pandas); Report.records() gives the same "
                              "rows as plain dicts") from None
        return pandas.DataFrame(self.records())

    def _repr_html_(self) -> str:
        """How Jupyter shows a Report in a cell: the verdict, the summary per pair and the first divergence."""
        from cmpx.reports.notebook import report_html

        return report_html(self)

    def __repr__(self) -> str:
        return (f"<cmpx.Report {self.exit_code.name} | {len(self.result.tallies)} pair(s) over "
                f"{self.result.iterations} iteration(s) | backends: {', '.join(self.backends)}>")
