"""The sweep's one writer: finished cells' files (cmpx.sweep.store.CellStore.save) written on a thread of its own,
in the order the cells finished, so that the loop that hands cells out and collects their outcomes never waits on
the disk (on a network file system each file is a round trip). At most ``QUEUED`` cells wait to be written; beyond
that the loop waits, and memory stays bounded. The first write that fails stops the writer: the next ``save`` and
``close`` raise it, as a write in the loop itself would have."""

from __future__ import annotations

import queue
import threading

from cmpx.reports.json_report import RunSummary
from cmpx.sweep.matrix import Cell
from cmpx.sweep.outcome import CellOutcome
from cmpx.sweep.store import CellRecord, CellStore

QUEUED = 64

_Item = tuple[Cell, CellRecord, CellOutcome, "RunSummary | None"]


class CellWriter:
    def __init__(self, store: CellStore):
        self.store = store
        self.failed: BaseException | None = None
        self._queue: queue.Queue[_Item | None] = queue.Queue(QUEUED)
        self._thread = threading.Thread(target=self._write, name="cmpx-sweep-writer", daemon=True)
        self._thread.start()

    def save(self, cell: Cell, record: CellRecord, outcome: CellOutcome, summary: RunSummary | None) -> None:
        self._raise()
        self._queue.put((cell, record, outcome, summary))

    def close(self) -> None:
        """Wait until every cell handed over is written; raise the first failure."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        self._raise()

    def _raise(self) -> None:
        if self.failed is not None:
            raise self.failed

    def _write(self) -> None:
        while (item := self._queue.get()) is not None:
            if self.failed is None:
                try:
                    self.store.save(*item)
                except BaseException as exc:  # handed to the sweep's thread by save() and close()
                    self.failed = exc
