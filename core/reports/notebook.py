"""A Report in Jupyter: its cell rendering (``Report._repr_html_``: the verdict, the summary per pair, the first
divergence) and its results as records (one per pair, iteration and output) that ``pandas.DataFrame`` takes."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from cmpx.printable import printable
from cmpx.reports.terminal import Progress
from cmpx.reports.text_lines import pair_line

if TYPE_CHECKING:
    from cmpx.outcome.report_data import ReportData

COLOURS = {"PASSED": "#1a7f37", "NOT COMPARED": "#9a6700", "INTERRUPTED": "#9a6700"}  # else red: a failure


def records(report: ReportData) -> list[dict[str, Any]]:
    """One flat record per pair, iteration and compared output (``pandas.DataFrame(report.records())``)."""
    rows = []
    for pair in report.pairs:
        for output in pair.outputs:
            rows.append({"backend": pair.backend, "reference": pair.reference, "iteration": pair.iteration,
                         "output": output.output, "passed": output.passed, "elements": output.elements,
                         "max_abs": output.worst("abs"), "max_rel": output.worst("rel"),
                         "metrics": ", ".join(m.metric for m in output.metrics),
                         "failed": ", ".join(m.metric for m in output.metrics if not m.passed),
                         "note": output.note or None})
    return rows


def report_html(report: ReportData) -> str:
    """The HTML a notebook cell shows for a Report: escaped, self-contained, no script."""
    colour = COLOURS.get(report.verdict, "#cf222e")
    what = (f"{report.iterations} iteration(s) of {report.backends[0]} described" if not report.compared and
            report.backends else f"{len(report.tallies)} pair(s) over {report.iterations} iteration(s)")
    parts = [f'<div class="cmpx-report"><p><b style="color:{colour}">{_e(report.verdict)}</b> | {_e(what)} | '
             f"exit {int(report.exit_code)}</p>"]
    if report.tallies:
        parts.append("<table><thead><tr><th>backend</th><th>reference</th><th>summary</th></tr></thead><tbody>")
        for tally in report.tallies:
            parts.append(f"<tr><td>{_e(report.label(tally.backend))}</td><td>{_e(report.label(tally.reference))}"
                         f"</td><td>{_e(pair_line(tally))}</td></tr>")
        parts.append("</tbody></table>")
    divergence = report.first_divergence
    if divergence is not None:
        where = ", ".join(p for p in (divergence.node, divergence.op_type) if p)
        first = divergence.result.metrics[0].summary if divergence.result.metrics else divergence.result.note
        parts.append(f"<p>first divergence: <code>{_e(divergence.tensor)}</code> ({_e(where)}): {_e(first)}</p>")
    for error in report.failures.values():  # "faulty failed during load: RuntimeError: ..."
        parts.append(f"<p>{_e(str(error).splitlines()[0])}</p>")
    parts.append("</div>")
    return "".join(parts)


def _e(text: object) -> str:
    return html.escape(str(text))


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython's ZMQ shell), where a cell can show a live display."""
    import sys

    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class NotebookProgress(Progress):
    """The progress line as a display in the running cell, updated in place (what a terminal's status line is)."""

    def __init__(self) -> None:
        super().__init__(enabled=True)
        self._handle: Any = None

    def show(self, line: str) -> None:
        from IPython.display import display

        if self._handle is None:
            self._handle = display({"text/plain": printable(line)}, raw=True, display_id=True)
        else:
            self._handle.update({"text/plain": printable(line)}, raw=True)

    def clear(self) -> None:
        """The line stays until the next replaces it; ``done`` ends it."""

    def done(self, line: str) -> None:
        if self._handle is not None:
            self._handle.update({"text/plain": printable(line)}, raw=True)
