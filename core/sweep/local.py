"""The local executor: cells in parallel on this machine, each in a runner process (cmpx.sweep.runner) that runs
cells one after the other on its main thread. At most ``jobs`` runners at once."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Sequence
from multiprocessing.connection import wait

from cmpx.sweep.executors import Events, Job
from cmpx.sweep.runner_process import RunnerProcess

TICK_SECONDS = 0.25
INTERRUPT_GRACE_SECONDS = 15.0


class LocalExecutor:
    def __init__(self, jobs: int):
        self.jobs = jobs

    def run(self, jobs: Sequence[Job], events: Events) -> None:
        pending = deque(jobs)
        started: list[RunnerProcess] = []
        idle: list[RunnerProcess] = []
        busy: dict[RunnerProcess, Job] = {}
        try:
            while pending or busy:
                while pending and (idle or len(busy) < self.jobs):
                    if not idle:
                        started.append(RunnerProcess())
                        idle.append(started[-1])
                    runner = idle.pop()
                    job = pending.popleft()
                    runner.submit(job.task)
                    busy[runner] = job
                    events.started(job)
                for runner in _ready(busy):
                    job = busy.pop(runner)
                    outcome = runner.outcome()
                    if runner.process.poll() is None and not outcome.interrupted:
                        idle.append(runner)
                    events.finished(job, outcome)
                events.tick()
        except KeyboardInterrupt:
            self._interrupt(busy, events)
            raise
        finally:
            for runner in started:
                runner.stop(grace=0.0 if runner in busy else 10.0)  # one interrupted but silent: no more waiting

    @staticmethod
    def _interrupt(busy: dict[RunnerProcess, Job], events: Events) -> None:
        """Interrupt every cell under way and take the outcomes of those that finish meanwhile."""
        for runner in busy:
            runner.interrupt()
        deadline = time.monotonic() + INTERRUPT_GRACE_SECONDS
        while busy and time.monotonic() < deadline:
            for runner in _ready(busy):
                events.finished(busy.pop(runner), runner.outcome())


def _ready(runners: Iterable[RunnerProcess]) -> list[RunnerProcess]:
    """The runners with an outcome to read (or ended), waiting up to a tick."""
    # wait() takes any object with fileno(), as its documentation says; typeshed lists connections, sockets and ints
    return wait(list(runners), timeout=TICK_SECONDS)  # type: ignore[arg-type, return-value]
