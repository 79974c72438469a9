"""The results directory, one folder per cell under ``cells/``:

    cells/KEY/report.json   the cell's --report-json document (absent if the run never started)
    cells/KEY/report.html   the report as an HTML page (the sweep's summary.html links it)
    cells/KEY/log.txt       the text report cmpx run would have printed, and the error if there was one
    cells/KEY/cell.json     the record: model, run, exit code, failure, timings, and the fingerprint of its inputs

``cell.json`` is written last, so a cell with one is complete; ``index.jsonl`` (cmpx.sweep.index) then gets the
cell's record and its report in sum, which is what a later sweep reads to resume. A later sweep into the same
directory takes a cell's earlier result as long as its report exists and its fingerprint (model content, args,
plugins, threads, the frameworks' and cmpx's versions: cmpx.sweep.matrix.Cell.fingerprint) is unchanged;
``--rerun failed`` runs again those that did not pass, ``--rerun all`` every cell.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, fields
from typing import Any

from cmpx.errors import ExitCode, UsageError
from cmpx.outputs import write_whole
from cmpx.reports.json_report import RunSummary
from cmpx.sweep.index import CellIndex
from cmpx.sweep.matrix import Cell
from cmpx.sweep.outcome import CellOutcome

VERDICT_EXIT_CODES = (ExitCode.PASSED, ExitCode.MISMATCH, ExitCode.BACKEND_FAILED)  # a report with a verdict;
# the others (usage error, internal error) never compared anything


PAGE = "report.html"  # a cell's report as an HTML page
MARKER = ".cmpx-sweep"  # what makes a directory a cmpx sweep's results (written when the first sweep starts)


@dataclass(frozen=True)
class CellRecord:
    """A finished cell's ``cell.json``: its model and run, what ``cmpx run`` exited with, why it gave no verdict
    (``failure``), timings, where it ran (``host``) with how many threads (``threads``), the fingerprint of its
    inputs, its files in the cell's folder (``report`` None when the run never started), and ``same_as``: the
    model (label) whose cell ran for this one, its file having the same content (None: this cell ran itself)."""

    model: str
    model_path: str
    run: str
    exit_code: int
    failure: str | None
    seconds: float | None
    host: str | None
    finished: str
    fingerprint: dict[str, Any]
    report: str | None
    log: str
    threads: int | None
    same_as: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> CellRecord | None:
        """The record ``data`` holds, or None when it is not a whole record (an older or damaged file)."""
        names = [f.name for f in fields(cls)]
        if not isinstance(data, dict) or not all(name in data for name in names):
            return None
        return cls(**{name: data[name] for name in names})


class CellStore:
    def __init__(self, out: str, force: bool = False):
        self.out = out
        self.cells = os.path.join(out, "cells")
        refuse_foreign(out, force)
        try:
            os.makedirs(self.cells, exist_ok=True)
            if not os.path.lexists(os.path.join(out, MARKER)):
                _write(os.path.join(out, MARKER), "cmpx sweep results: cells/, summary.json, summary.md, junit.xml\n")
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot create it: {exc.strerror or exc}") from None
        self.index = CellIndex(out)

    def folder(self, cell: Cell) -> str:
        return os.path.join(self.cells, cell.key)

    def record(self, cell: Cell) -> CellRecord | None:
        """The cell's record from an earlier sweep, if complete and readable."""
        try:
            with open(os.path.join(self.folder(cell), "cell.json"), encoding="utf-8") as f:
                return CellRecord.from_dict(json.load(f))
        except (OSError, ValueError):
            return None

    def reusable(self, cell: Cell, fingerprint: dict[str, Any], rerun: str | None) -> CellRecord | None:
        """The earlier record to keep instead of running the cell, or None to run it. Read from the index; from
        the cell's ``cell.json`` only when the index does not know the cell."""
        if rerun == "all":
            return None
        indexed = self.index.get(cell.key)
        record = self.record(cell) if indexed is None else CellRecord.from_dict(indexed.record)
        if record is None or record.fingerprint != fingerprint:
            return None
        if record.exit_code not in VERDICT_EXIT_CODES or not record.report:
            return None
        if not os.path.isfile(os.path.join(self.folder(cell), record.report)):
            return None
        if rerun == "failed" and record.exit_code != ExitCode.PASSED:
            return None
        return record

    def record_of(self, cell: Cell, fingerprint: dict[str, Any], outcome: CellOutcome,
                  same_as: str | None = None) -> CellRecord:
        """The record of a cell that just finished (``save`` writes it; ``same_as``: the model whose cell ran for
        it)."""
        return CellRecord(model=cell.label, model_path=cell.model, run=cell.run_name,
                          exit_code=int(outcome.exit_code), failure=outcome.failure, seconds=outcome.seconds,
                          host=outcome.host, finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                          fingerprint=fingerprint, report="report.json" if outcome.report is not None else None,
                          log="log.txt", threads=outcome.threads, same_as=same_as)

    def save(self, cell: Cell, record: CellRecord, outcome: CellOutcome, summary: RunSummary | None) -> None:
        """Write a finished cell's files, then its line of the index (``summary``: its report in sum)."""
        folder = self.folder(cell)
        self.index.forget(cell.key)  # until its files are whole again
        os.makedirs(folder, exist_ok=True)
        record_path = os.path.join(folder, "cell.json")
        if os.path.exists(record_path):
            os.unlink(record_path)  # incomplete until the new record is written
        report = outcome.report
        if report is not None:
            _write(os.path.join(folder, "report.json"), json.dumps(report, indent=1, allow_nan=False) + "\n")
        elif os.path.exists(os.path.join(folder, "report.json")):
            os.unlink(os.path.join(folder, "report.json"))
        if outcome.page is not None:
            _write(os.path.join(folder, PAGE), outcome.page)
        elif os.path.exists(os.path.join(folder, PAGE)):
            os.unlink(os.path.join(folder, PAGE))
        _write(os.path.join(folder, "log.txt"), outcome.log or "")
        _write(record_path, json.dumps(record.to_dict(), indent=1) + "\n")
        self.index.add(cell.key, record.to_dict(), summary)

    def kept_outcome(self, cell: Cell, record: CellRecord) -> CellOutcome:
        """A kept cell's outcome read back from its files, for another cell of the same inputs to take."""
        folder = self.folder(cell)
        report = None
        try:
            if record.report:
                with open(os.path.join(folder, record.report), encoding="utf-8") as f:
                    report = json.load(f)
            with open(os.path.join(folder, record.log), encoding="utf-8") as f:
                log = f.read()
        except (OSError, ValueError):
            log = ""
        return CellOutcome(record.exit_code, report, record.failure, log, record.seconds, record.host,
                           threads=record.threads)

    def report(self, cell: Cell, record: CellRecord) -> RunSummary | None:
        """A kept cell's report in sum: from the index, else its report.json read back typed (and then added to
        the index); None if it has none or it cannot be read."""
        indexed = self.index.get(cell.key)
        if indexed is not None:
            return indexed.summary
        summary = self.report_file(cell, record)
        self.index.learn(cell.key, record.to_dict(), summary)
        return summary

    def report_file(self, cell: Cell, record: CellRecord) -> RunSummary | None:
        if not record.report:
            return None
        try:
            with open(os.path.join(self.folder(cell), record.report), encoding="utf-8") as f:
                return RunSummary.from_document(json.load(f))
        except (OSError, ValueError):
            return None

    def finish(self) -> None:
        """The sweep is over: the index rewritten if it holds stale lines or misses kept cells."""
        self.index.compact()


def refuse_foreign(out: str, force: bool) -> None:
    """A non-empty ``out`` that is not a cmpx sweep's results is refused (its summary.md, summary.json, junit.xml
    would be replaced), unless ``force`` (--force-out). A sweep of an older cmpx (no
    marker: its cells/) counts as one."""
    if force or not os.path.isdir(out):
        if os.path.lexists(out) and not os.path.isdir(out):
            raise UsageError(f"--out {out}: exists and is not a directory; give a directory for the results")
        return
    entries = set(os.listdir(out))
    if not entries or MARKER in entries or os.path.isdir(os.path.join(out, "cells")):
        return
    shown = ", ".join(sorted(entries)[:3]) + (", ..." if len(entries) > 3 else "")
    raise UsageError(f"--out {out}: a directory holding other files ({shown}), not a cmpx sweep's results; give a "
                     "new or empty directory, or --force-out to write the results there anyway (summary.md, "
                     "summary.json, junit.xml and cells/ are replaced)")


def _write(path: str, text: str) -> None:
    """Write whole or not at all (an interrupted sweep leaves no half-written file; cmpx.outputs.write_whole)."""
    write_whole("--out", path, text)
