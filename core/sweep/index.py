"""``index.jsonl`` in the results directory: one line per finished cell, its record (what ``cell.json`` holds) and
its report in sum (cmpx.reports.json_report.RunSummary.to_document), so that resuming a sweep of 5,000 cells reads
one file, not every cell's ``cell.json`` and full ``report.json``.

Lines are appended as cells finish: ``{"key": K}`` before a cell's files are replaced (the index forgets it), then
``{"key": K, "record": ..., "summary": ...}`` once its ``cell.json`` is written, so that an index cut short at any
point never claims more than the cells' files hold; the last line of a key wins, and a line that does not parse
(cut short by a kill) is skipped. A cell the index does not know is read from its files (results of an older cmpx,
or a deleted index), and ``compact()`` rewrites the index whole with one line per known cell when it holds stale
lines or misses cells.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import IO, Any

from cmpx.outputs import OutputFailed, write_whole
from cmpx.reports.json_report import RunSummary

INDEX_FILE = "index.jsonl"


@dataclass(frozen=True)
class Indexed:
    """A cell as the index holds it: ``record`` as ``cell.json`` holds it (cmpx.sweep.store.CellRecord.to_dict),
    its report in sum (None when the run never started)."""

    record: dict[str, Any]
    summary: RunSummary | None


class CellIndex:
    def __init__(self, out: str):
        self.path = os.path.join(out, INDEX_FILE)
        self.cells: dict[str, Indexed] = {}
        self.lines = 0  # in the file, stale ones included
        self.missing = False  # a known cell is not in the file
        self._file: IO[str] | None = None
        try:
            with open(self.path, encoding="utf-8") as f:
                for line in f:
                    self.lines += 1
                    self._take(line)
        except (OSError, UnicodeDecodeError):
            pass

    def _take(self, line: str) -> None:
        try:
            data = json.loads(line)
            key = data["key"]
            if "record" not in data:
                self.cells.pop(key, None)
                return
            record = data["record"]
            summary = None if data["summary"] is None else RunSummary.from_document(data["summary"])
        except (ValueError, KeyError, TypeError):
            return
        if isinstance(key, str) and isinstance(record, dict):
            self.cells[key] = Indexed(record, summary)

    def get(self, key: str) -> Indexed | None:
        return self.cells.get(key)

    def learn(self, key: str, record: dict[str, Any], summary: RunSummary | None) -> None:
        """A cell read from its files: kept in the index at the next ``compact``."""
        self.cells[key] = Indexed(record, summary)
        self.missing = True

    def forget(self, key: str) -> None:
        self.cells.pop(key, None)
        self._append({"key": key})

    def add(self, key: str, record: dict[str, Any], summary: RunSummary | None) -> None:
        self.cells[key] = Indexed(record, summary)
        self._append(_line(key, self.cells[key]))

    def _append(self, data: dict[str, Any]) -> None:
        try:
            if self._file is None:
                self._file = open(self.path, "a", encoding="utf-8")
            self._file.write(json.dumps(data, allow_nan=False) + "\n")
            self._file.flush()  # a line at a time: a kill cuts at most the last one short
        except OSError as exc:
            raise OutputFailed(f"--out {self.path}: {exc.strerror or exc}") from None
        self.lines += 1

    def compact(self) -> None:
        """Rewrite the index with one line per known cell if it holds more lines than that, or misses some."""
        self.close()
        if self.lines == len(self.cells) and not self.missing:
            return
        write_whole("--out", self.path, "".join(json.dumps(_line(key, indexed), allow_nan=False) + "\n"
                                                for key, indexed in self.cells.items()))
        self.lines, self.missing = len(self.cells), False

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _line(key: str, indexed: Indexed) -> dict[str, Any]:
    return {"key": key, "record": indexed.record,
            "summary": None if indexed.summary is None else indexed.summary.to_document()}
