"""Where a run's workers come from: spares started before the command line is even parsed, or fresh ones.

A worker's interpreter takes about as long to start and import numpy as the coordinator takes to import click,
discover plugins and parse options, so the ``cmpx`` script spawns one spare per ``--backend`` it sees before doing
anything else (cmpx.cli.launch), and a run's ``Session`` assigns them to its backends. Whoever makes a pool
releases the spares left in it; whoever takes workers from it releases those.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from cmpx.transport import supervisor
from cmpx.transport.foreign import foreign_environment
from cmpx.transport.forking import ForkServer, ForkServerGone, ForkServers
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
    the head start); ``assign`` takes them in order, then forks workers from ``server`` (a fork server, owned by
    the caller) where the environment is the server's, and spawns the rest."""

    def __init__(self, spares: int = 0, env: dict[str, str] | None = None, server: ForkServer | None = None):
        self.env = worker_environment() if env is None else env
        self.server = server
        self._spares: list[Worker] = []
        try:
            for _ in range(spares):
                self._spares.append(supervisor.spawn_worker(self.env))
        except OSError:
            pass  # fewer spares: the run spawns what it lacks, and reports what fails then

    @classmethod
    def forked_from(cls, servers: ForkServers) -> WorkerPool:
        """A pool for one run whose workers are forked from the one of ``servers`` that serves this process's
        worker environment now (a server is started for it if need be; spawned if none can be)."""
        env = worker_environment()
        return cls(env=env, server=servers.for_environment(env))

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
                    worker = self._fork(backend, env) or supervisor.spawn_worker(env)
                workers[backend.name] = worker  # released with the others if Ctrl-C comes while it is told its backend
                supervisor.assign(worker, backend, settings)
        except BaseException:
            release_workers(workers)
            raise
        finally:
            self.release()
        return workers

    def _fork(self, backend: BackendPlan, env: dict[str, str]) -> Worker | None:
        """A worker forked from the server (its backend's module imported there first, if its descriptor allows),
        or None: no server, another environment, or a server that is gone."""
        server = self.server
        if server is None or not server.serves(env):
            return None
        try:
            if backend.spec.forkable:
                server.preload(backend.spec.target)
            return fork_worker(server, env)
        except ForkServerGone:
            return None

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


def fork_worker(server: ForkServer, env: dict[str, str] | None = None) -> Worker:
    """Have ``server`` fork a worker that does not know its backend yet (see ``assign``); its pid, and so its
    process descriptor, are known once the server has forked it (``watch``). Raises ForkServerGone (an OSError)
    if the server is gone."""
    child_in, parent_out = os.pipe()
    parent_in, child_out = os.pipe()
    log = tempfile.TemporaryFile(prefix="cmpx-worker-")
    try:
        process = server.fork(child_in, child_out, log.fileno(), env)
    except BaseException:
        for fd in (parent_out, parent_in):
            os.close(fd)
        log.close()
        raise
    finally:
        os.close(child_in)
        os.close(child_out)
    os.set_blocking(parent_in, False)
    return Worker("", process, parent_out, parent_in, log, None)
