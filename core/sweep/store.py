"""The results directory, one folder per cell under ``cells/``:

    cells/KEY/report.json   the cell's --report-json document (absent if the run never started)
    cells/KEY/log.txt       the text report cmpx run would have printed, and the error if there was one
    cells/KEY/cell.json     the record: model, run, exit code, failure, timings, and the fingerprint of its inputs

``cell.json`` is written last, so a cell with one is complete. A later sweep into the same directory takes a
cell's earlier result as long as its report exists and its fingerprint (model content, args, cmpx version) is
unchanged; ``--rerun failed`` runs again those that did not pass, ``--rerun all`` every cell.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from cmpx.errors import UsageError
from cmpx.outputs import write_whole
from cmpx.sweep.matrix import Cell

VERDICT_EXIT_CODES = (0, 1, 3)  # a report with a verdict; others (2, 4) never compared anything


MARKER = ".cmpx-sweep"  # what makes a directory a cmpx sweep's results (written when the first sweep starts)


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

    def folder(self, cell: Cell) -> str:
        return os.path.join(self.cells, cell.key)

    def record(self, cell: Cell) -> dict[str, Any] | None:
        """The cell's record from an earlier sweep, if complete and readable."""
        try:
            with open(os.path.join(self.folder(cell), "cell.json"), encoding="utf-8") as f:
                record = json.load(f)
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) else None

    def reusable(self, cell: Cell, fingerprint: dict[str, Any], rerun: str | None) -> dict[str, Any] | None:
        """The earlier record to keep instead of running the cell, or None to run it."""
        record = self.record(cell)
        if rerun == "all" or record is None or record.get("fingerprint") != fingerprint:
            return None
        if record.get("exit_code") not in VERDICT_EXIT_CODES or not record.get("report"):
            return None
        if not os.path.isfile(os.path.join(self.folder(cell), record["report"])):
            return None
        if rerun == "failed" and record.get("exit_code") != 0:
            return None
        return record

    def save(self, cell: Cell, fingerprint: dict[str, Any], outcome: dict[str, Any]) -> dict[str, Any]:
        """Write a finished cell's files; return its record."""
        folder = self.folder(cell)
        os.makedirs(folder, exist_ok=True)
        record_path = os.path.join(folder, "cell.json")
        if os.path.exists(record_path):
            os.unlink(record_path)  # incomplete until the new record is written
        report = outcome.get("report")
        if report is not None:
            _write(os.path.join(folder, "report.json"), json.dumps(report, indent=1, allow_nan=False) + "\n")
        elif os.path.exists(os.path.join(folder, "report.json")):
            os.unlink(os.path.join(folder, "report.json"))
        _write(os.path.join(folder, "log.txt"), outcome.get("log") or "")
        record = {"model": cell.label, "model_path": cell.model, "run": cell.run_name,
                  "exit_code": outcome["exit_code"], "failure": outcome.get("failure"),
                  "seconds": outcome.get("seconds"), "host": outcome.get("host"),
                  "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "fingerprint": fingerprint,
                  "report": "report.json" if report is not None else None, "log": "log.txt"}
        _write(record_path, json.dumps(record, indent=1) + "\n")
        return record

    def report(self, cell: Cell, record: dict[str, Any]) -> dict[str, Any] | None:
        if not record.get("report"):
            return None
        try:
            with open(os.path.join(self.folder(cell), record["report"]), encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None


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
