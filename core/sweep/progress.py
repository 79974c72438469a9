"""What a sweep shows as it goes: one line per finished cell (for logs and pipes too), and on a terminal a status
line with the cells done, under way and not passed, the time so far and an estimate of the time left."""

from __future__ import annotations

import time
from collections.abc import Callable
from cmpx.reports.terminal import Progress
from cmpx.sweep.summary import CLEAN, CellEntry
from cmpx.sweep.tables import detail, short


class SweepProgress:
    def __init__(self, total: int, echo: Callable[[str], None], terminal: Progress):
        self.total = total  # cells to run in this sweep
        self.echo = echo
        self.terminal = terminal
        self.started = time.monotonic()
        self.done = 0
        self.running = 0
        self.failed = 0
        self._shown = 0.0

    def cell_started(self) -> None:
        self.running += 1
        self.tick()

    def cell_finished(self, entry: CellEntry) -> None:
        self.running -= 1
        self.done += 1
        self.failed += entry.verdict not in CLEAN
        seconds = entry.seconds
        took = f" ({seconds:.1f} s)" if isinstance(seconds, (int, float)) else ""
        line = f"[{self.done}/{self.total}] {entry.model} | {entry.run}: {short(entry)}{took}"
        self.terminal.clear()
        self.echo(line)
        if entry.verdict not in (*CLEAN, "mismatch"):  # a line of its own (one echo is one line)
            self.echo(f"        {detail(entry)}")
        self.tick(force=True)

    def cell_dropped(self) -> None:
        """A cell interrupted before its end: it will run again next time."""
        self.running -= 1

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._shown < 0.2:
            return
        self._shown = now
        elapsed = now - self.started
        left = f", about {elapsed / self.done * (self.total - self.done):.0f} s left" if self.done else ""
        self.terminal.show(f"sweep: {self.done}/{self.total} cells done, {self.running} under way, {self.failed} not "
                           f"passed | {elapsed:.1f} s{left}")

    def clear(self) -> None:
        self.terminal.clear()
