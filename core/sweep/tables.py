"""``summary.md`` (models as rows, runs as columns, no colour) and ``junit.xml`` (one test case per cell), both
made from the sweep's summary (cmpx.sweep.summary)."""

from __future__ import annotations

import math
import os
import xml.etree.ElementTree as ET

from cmpx._version import __version__
from cmpx.errors import telling_line
from cmpx.outputs import write_whole
from cmpx.printable import xml_safe
from cmpx.reports.json_report import strict
from cmpx.sweep.summary import NOT_RUN, CellEntry, SweepSummary


def short(entry: CellEntry) -> str:
    """A cell in a few words: its verdict and, for a failure, what failed."""
    word = entry.verdict
    if word == "mismatch" and entry.worst_abs is not None:
        return f"mismatch (abs {_number(entry.worst_abs)}, rel {_number(entry.worst_rel)})"
    if entry.failure and entry.failure.backends:
        return f"{word}: " + ", ".join(f"{b.backend} {b.phase}" for b in entry.failure.backends)
    return word


def detail(entry: CellEntry) -> str:
    """What went wrong, in one line."""
    if entry.failure:
        return telling_line(entry.failure.message) if entry.failure.message else entry.verdict
    failing = [p for p in entry.pairs if not p.passed]
    return "; ".join(f"{p.backend} vs {p.reference}: {p.iterations_passed}/{p.iterations} iterations and "
                     f"{p.outputs_passed}/{p.outputs} outputs passed, worst abs {_number(p.worst_abs)}, "
                     f"worst rel {_number(p.worst_rel)}" for p in failing) or entry.verdict


def _number(value: float | None) -> str:
    """A worst error: three digits, ``NaN`` and ``Infinity`` as the JSON summary writes them."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(strict(value))
    return f"{value:.3g}" if isinstance(value, (int, float)) else str(value)


def _cell_text(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(summary: SweepSummary) -> str:
    entries = {(e.model, e.run): e for e in summary.cells}
    counts = ", ".join(f"{n} {verdict}" for verdict, n in summary.counts.items())
    lines = [f"# cmpx sweep: {os.path.basename(summary.sweep_file)}", "",
             f"{len(summary.cells)} cells: {counts} | exit {int(summary.exit_code)}"
             f"{' (interrupted)' if summary.interrupted else ''} | {summary.seconds:.1f} s | "
             f"executor {summary.executor} | cmpx {__version__}", "",
             *([f"Stopped: {_cell_text(summary.cluster_failure)}", ""] if summary.cluster_failure else []),
             "| model | " + " | ".join(_cell_text(run) for run in summary.runs) + " |",
             "|---|" + "---|" * len(summary.runs)]
    for model in summary.models:
        row = [short(entries[(model, run)]) if (model, run) in entries else NOT_RUN for run in summary.runs]
        lines.append(f"| {_cell_text(model)} | " + " | ".join(_cell_text(text) for text in row) + " |")
    problems = [e for e in summary.cells if e.verdict not in ("passed", NOT_RUN)]
    if problems:
        lines += ["", "## Not passed", ""]
        lines += [f"- {_cell_text(e.model)} / {e.run}: {_cell_text(detail(e))} ({e.log or 'no log'})"
                  for e in problems]
    return "\n".join(lines) + "\n"


def junit(summary: SweepSummary) -> ET.Element:
    suite = ET.Element("testsuite", name="cmpx sweep", tests=str(len(summary.cells)))
    failures = errors = skipped = 0
    for entry in summary.cells:
        seconds = entry.seconds
        case = ET.SubElement(suite, "testcase", classname=entry.model, name=entry.run,
                             time=f"{seconds:.3f}" if isinstance(seconds, (int, float)) else "0")
        if entry.verdict == NOT_RUN:
            skipped += 1
            ET.SubElement(case, "skipped", message="not run (the sweep was interrupted, or lost its cluster)")
        elif entry.verdict == "mismatch":
            failures += 1
            ET.SubElement(case, "failure", message=detail(entry)).text = f"report: {entry.report}"
        elif entry.verdict != "passed":
            errors += 1
            element = ET.SubElement(case, "error", message=f"{entry.verdict}: {detail(entry)}")
            element.text = entry.failure.message if entry.failure is not None else ""
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    suite.set("time", f"{summary.seconds:.3f}")
    root = ET.Element("testsuites")
    root.append(xml_safe(suite))  # names from sweep files and models: what XML 1.0 cannot hold is escaped
    ET.indent(root)
    return root


def write_tables(out: str, summary: SweepSummary) -> None:
    """summary.md and junit.xml, each replaced whole."""
    write_whole("--out", os.path.join(out, "summary.md"), markdown(summary))
    text = ET.tostring(junit(summary), encoding="unicode", xml_declaration=True)
    write_whole("--out", os.path.join(out, "junit.xml"), text + "\n")
