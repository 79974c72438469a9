"""Where a run's workers come from: spares started before the command line is even parsed, or fresh ones.

A worker's interpreter takes about as long to start and import numpy as the coordinator takes to import click,
discover plugins and parse options, so the ``cmpx`` script spawns one spare per ``--backend`` it sees before doing
anything else (cmpx.cli.launch), and a run's ``Session`` assigns them to its backends. Whoever makes a pool
releases the spares left in it; whoever takes workers from it releases those.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from cmpx.transport import supervisor
from cmpx.transport.foreign import foreign_environment
from cmpx.transport.idle_threads import quiet_idle_threads
from cmpx.transport.supervisor import Worker

if TYPE_CHECKING:
    from cmpx.plan import BackendPlan
    from cmpx.plugin.manager import PluginSettings


def worker_environment() -> dict[str, str]:
    """The environment every worker starts with: the coordinator's, with idle BLAS threads quieted."""
    env = dict(os.environ)
    quiet_idle_threads(env)
    return env


class WorkerPool:
    """Workers not yet assigned to a backend. ``spares`` are spawned at once (a failure to spawn them only loses
    the head start); ``assign`` takes them in order, and spawns more when they run out."""

    def __init__(self, spares: int = 0, env: dict[str, str] | None = None):
        self.env = worker_environment() if env is None else env
        self._spares: list[Worker] = []
        try:
            for _ in range(spares):
                self._spares.append(supervisor.spawn_worker(self.env))
        except OSError:
            pass  # fewer spares: the run spawns what it lacks, and reports what fails then

    @property
    def spares(self) -> int:
        return len(self._spares)

    def assign(self, backends: Sequence[BackendPlan], settings: PluginSettings,
               code_dir: str | None = None) -> dict[str, Worker]:
        """A worker per backend, each told its backend at once (it imports it while the coordinator reads the
        model). A backend with a Python of its own (``backend.python``) gets a fresh worker under that Python, never
        a spare, with the worker code linked into ``code_dir`` (cmpx.transport.foreign). The caller owns the
        workers returned and must ``release_workers`` them; spares left over are released now, since a run takes all
        the workers it needs at once."""
        env = worker_environment()
        workers: dict[str, Worker] = {}
        try:
            for backend in backends:
                if backend.python is not None:
                    worker = supervisor.spawn_worker(foreign_environment(env), backend.python, code_dir)
                elif self._spares and env == self.env:
                    worker = self._spares.pop(0)
                else:
                    worker = supervisor.spawn_worker(env)
                workers[backend.name] = worker  # released with the others if Ctrl-C comes while it is told its backend
                supervisor.assign(worker, backend, settings)
        except BaseException:
            release_workers(workers)
            raise
        finally:
            self.release()
        return workers

    def release(self) -> None:
        """Stop the spares no run took."""
        spares, self._spares = self._spares, []
        supervisor.release_all(spares)

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def release_workers(workers: Mapping[str, Worker]) -> None:
    """Stop the workers, all at once (see supervisor.release_all)."""
    supervisor.release_all(workers.values())
