"""What an executor is told and tells: the cells to run, and events as they start and finish."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from cmpx.sweep.matrix import Cell

if TYPE_CHECKING:
    from cmpx.sweep.outcome import CellOutcome


@dataclass(frozen=True)
class Job:
    """A cell to run: the task its process receives, and the resources it needs (Ray)."""

    cell: Cell
    task: dict[str, Any]
    resources: dict[str, float] = field(default_factory=dict)


class Events(Protocol):
    """The sweep's side: ``started(job)`` when a cell is handed to a process, ``finished(job, outcome)`` when its
    outcome is back (cmpx.sweep.cell), ``tick()`` at least every quarter second while waiting."""

    def started(self, job: Job) -> None: ...
    def finished(self, job: Job, outcome: CellOutcome) -> None: ...
    def tick(self) -> None: ...


class Executor(Protocol):
    """Runs every job and returns when all have finished. On KeyboardInterrupt it interrupts the cells under way,
    reports those that still finish, releases what it started and raises KeyboardInterrupt again."""

    def run(self, jobs: Sequence[Job], events: Events) -> None: ...
