"""Which cells the Ray executor submits now: a bounded window of cells in flight, so that a sweep of 5,000 cells
neither hands Ray 5,000 tasks at once nor waits on 5,000 references each time round.

Cells are queued by what they need (their resources, one CPU unless they say otherwise), and each kind has a
window of its own, so that cells waiting for a GPU never hold back the CPU cells behind them. Without ``--jobs``
a window is ``SLOTS_PER_CPU`` times the cluster's CPUs (at least ``MIN_WINDOW``): enough queued in Ray for every
slot that frees to be refilled by Ray at once, while the driver collects outcomes. The cluster's size is read again
every ``REFRESH_SECONDS`` (an autoscaler adds nodes). With ``--jobs N`` at most N cells are in flight in all."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence

from cmpx.sweep.executors import Job

SLOTS_PER_CPU = 2
MIN_WINDOW = 16
REFRESH_SECONDS = 10.0


def kind(job: Job) -> tuple[tuple[str, float], ...]:
    """What a cell needs, as a key: its resources with the CPU it takes by default."""
    return tuple(sorted({"CPU": 1.0, **job.resources}.items()))


class Window:
    """``take()``: the cells to submit now; ``finished(job)`` when one is done; ``pending``: cells not yet taken."""

    def __init__(self, jobs: Sequence[Job], limit: int | None, cluster_resources: Callable[[], dict[str, float]]):
        self.queues: dict[tuple, deque[Job]] = {}
        for job in jobs:
            self.queues.setdefault(kind(job), deque()).append(job)
        self.pending = len(jobs)
        self.in_flight = dict.fromkeys(self.queues, 0)
        self.total = 0
        self.limit = limit
        self.cluster_resources = cluster_resources
        self.size = limit or MIN_WINDOW
        self._sized = -math.inf

    def _resize(self) -> None:
        if self.limit is not None or time.monotonic() - self._sized < REFRESH_SECONDS:
            return
        self._sized = time.monotonic()
        cpus = self.cluster_resources().get("CPU", 0)
        self.size = max(MIN_WINDOW, math.ceil(SLOTS_PER_CPU * cpus))

    def take(self) -> Iterator[Job]:
        """Cells of each kind in turn, while their kind's window and ``--jobs`` allow."""
        if not self.pending:
            return
        self._resize()
        taken = True
        while taken and self.pending and (self.limit is None or self.total < self.limit):
            taken = False
            for key, queue in self.queues.items():
                if queue and self.in_flight[key] < self.size and (self.limit is None or self.total < self.limit):
                    job = queue.popleft()
                    self.in_flight[key] += 1
                    self.total += 1
                    self.pending -= 1
                    taken = True
                    yield job

    def finished(self, job: Job) -> None:
        self.in_flight[kind(job)] -= 1
        self.total -= 1
