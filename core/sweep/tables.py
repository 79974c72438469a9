"""``summary.md`` (models as rows, runs as columns, no colour; then each cell that did not pass, with its first
divergence) and ``junit.xml`` (one test case per cell; a failing one carries the tail of its log), both made from
the sweep's summary (cmpx.sweep.summary)."""

from __future__ import annotations

import math
from collections import Counter
import os
import xml.etree.ElementTree as ET

from cmpx._version import __version__
from cmpx.errors import telling_line
from cmpx.outputs import write_whole
from cmpx.printable import xml_safe
from cmpx.reports.json_report import strict
from cmpx.sweep.summary import CLEAN, NOT_RUN, CellEntry, SweepSummary

LOG_TAIL_LINES = 60  # of a failing cell's log, in its junit test case
LOG_TAIL_CHARS = 16_000


def short(entry: CellEntry) -> str:
    """A cell in a few words: its verdict and, for a failure, what failed."""
    word = entry.verdict
    if word == "mismatch" and entry.worst_abs is not None:
        return f"mismatch (abs {error_number(entry.worst_abs)}, rel {error_number(entry.worst_rel)})"
    if entry.failure and entry.failure.backends:
        return f"{word}: " + ", ".join(f"{b.backend} {b.phase}" for b in entry.failure.backends)
    return word


def detail(entry: CellEntry) -> str:
    """What went wrong, in one line."""
    if entry.failure:
        return telling_line(entry.failure.message) if entry.failure.message else entry.verdict
    failing = [p for p in entry.pairs if not p.passed]
    return "; ".join(f"{p.backend} vs {p.reference}: {p.iterations_passed}/{p.iterations} iterations and "
                     f"{p.outputs_passed}/{p.outputs} outputs passed, worst abs {error_number(p.worst_abs)}, "
                     f"worst rel {error_number(p.worst_rel)}" for p in failing) or entry.verdict


def divergence(entry: CellEntry) -> str | None:
    """Where the error first enters, in a few words: ``node conv0 (Conv), tensor conv, iteration 0``."""
    found = entry.first_divergence
    if found is None:
        return None
    pair, where = found
    parts = [f"node {where.node}" + (f" ({where.op_type})" if where.op_type else "") if where.node else None,
             f"tensor {where.tensor}" if where.tensor else None,
             f"iteration {where.iteration}" if where.iteration is not None else None]
    return ", ".join(p for p in parts if p) + f" ({pair.backend} vs {pair.reference})"


def error_number(value: float | None) -> str:
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
    problems = [e for e in summary.cells if e.verdict not in (*CLEAN, NOT_RUN)]
    if problems:
        lines += ["", "## Not passed", ""]
        lines += [f"- {_cell_text(e.model)} / {e.run}: {_cell_text(detail(e))}"
                  + (f"; first divergence: {_cell_text(divergence(e) or '')}" if divergence(e) else "")
                  + f" ({e.log or 'no log'})" for e in problems]
    return "\n".join(lines) + "\n"


def classnames(models: list[str]) -> dict[str, str]:
    """Each model's junit classname. Viewers split a classname at its dots (packages, then the class): the model's
    folders become the packages and its file name without suffix the class (``zoo/bert.onnx``: ``zoo.bert``), with
    any other dot an underscore; two models that would share one keep their suffixes (``zoo.bert_pb``)."""
    def name(label: str, suffix: bool) -> str:
        path = label if suffix else os.path.splitext(label)[0]
        return ".".join(part.replace(".", "_") for part in path.replace(os.sep, "/").split("/") if part)

    short = {model: name(model, False) for model in models}
    taken = Counter(short.values())
    return {m: name(m, True) if taken[short[m]] > 1 else short[m] for m in models}


def log_tail(out: str, entry: CellEntry) -> str:
    """The last lines of the cell's log (``LOG_TAIL_LINES``, at most ``LOG_TAIL_CHARS``), or why there are none."""
    if not entry.log:
        return ""
    try:
        with open(os.path.join(out, entry.log), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        return f"(no log: {entry.log}: {exc.strerror or exc})"
    text = "\n".join(lines[-LOG_TAIL_LINES:])[-LOG_TAIL_CHARS:]
    left_out = len(lines) > LOG_TAIL_LINES or len(text) == LOG_TAIL_CHARS
    return (f"(the end of {entry.log})\n" if left_out else "") + text


def junit(summary: SweepSummary, out: str | None = None) -> ET.Element:
    """The suite; ``out``: the results directory, whose cells' logs a failing test case's system-out ends."""
    suite = ET.Element("testsuite", name="cmpx sweep", tests=str(len(summary.cells)))
    failures = errors = skipped = 0
    names = classnames(list(dict.fromkeys(e.model for e in summary.cells)))
    for entry in summary.cells:
        seconds = entry.seconds
        case = ET.SubElement(suite, "testcase", classname=names[entry.model], name=entry.run, file=entry.model,
                             time=f"{seconds:.3f}" if isinstance(seconds, (int, float)) else "0")
        if entry.verdict == NOT_RUN:
            skipped += 1
            ET.SubElement(case, "skipped", message="not run (the sweep was interrupted, or lost its cluster)")
        elif entry.verdict == "mismatch":
            failures += 1
            where = divergence(entry)
            ET.SubElement(case, "failure", message=detail(entry)).text = f"report: {entry.report}" + (
                f"\nfirst divergence: {where}" if where else "")
        elif entry.verdict not in CLEAN:
            errors += 1
            element = ET.SubElement(case, "error", message=f"{entry.verdict}: {detail(entry)}")
            element.text = entry.failure.message if entry.failure is not None else ""
        if entry.verdict not in (*CLEAN, NOT_RUN) and out is not None:
            ET.SubElement(case, "system-out").text = log_tail(out, entry)
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
    text = ET.tostring(junit(summary, out), encoding="unicode", xml_declaration=True)
    write_whole("--out", os.path.join(out, "junit.xml"), text + "\n")
