"""The Ray executor: each cell a Ray task with its run's resources, on the cluster at ``--ray-address`` (or
RAY_ADDRESS), on a Ray this process is already connected to, or on a local Ray started here and shut down at the
end. The task runs cmpx.sweep.cell on its worker process's main thread; the outcome, report included, comes back
through Ray, so the results directory only has to exist where the sweep runs. Models and the files runs read must
be at the same path on every node, but for model files shipped through Ray's object store (--ship-models).

Failures of the cluster are not verdicts: a cell whose process, node or memory failed is run again by Ray (up to
INFRASTRUCTURE_RETRIES times; a cell's own failure, which it returns, never is), and what still fails is an
infrastructure failure (exit 6); a cell no node can hold is refused before any cell runs, or, when no node has
one of its resources yet, waits up to --pending-timeout; a lost head ends the sweep (ClusterLost, exit 6) with
the finished cells kept (cmpx.sweep.ray_cluster)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from cmpx.errors import ExitCode, UsageError, telling_line
from cmpx.sweep.outcome import CellOutcome
from cmpx.sweep.executors import Events, Job
from cmpx.sweep.shipping import ModelShipment
from cmpx.sweep.window import Window
from cmpx.sweep.ray_cluster import (CHECK_SECONDS, DEFAULT_PENDING_TIMEOUT, HeadWatch, NodeWatch, WaitingCells,
                                    check_runs_fit, demand, gcs_address, head_lost_seconds, node_capacities)
from cmpx.sweep.ray_failures import INFRASTRUCTURE_RETRIES, OOM_RETRIES_ENV, infrastructure_failure

TICK_SECONDS = 0.25
INTERRUPT_GRACE_SECONDS = 15.0


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("--executor ray needs Ray: pip install 'cmpx[ray]'") from None
    return ray


def task_options(resources: dict[str, float]) -> dict[str, Any]:
    """Ray's options for a cell that needs ``resources`` ({"GPU": 1}, {"CPU": 2}, {"memory": bytes}, or any
    custom resource of the cluster). A cell takes one CPU unless it says otherwise. Ray runs it again when its
    process or node failed (max_retries counts system failures only), never when it raised or returned a failure
    (retry_exceptions): a cell's own failure is its result."""
    options: dict[str, Any] = {"num_cpus": 1, "max_retries": INFRASTRUCTURE_RETRIES, "retry_exceptions": False}
    custom = {}
    for name, amount in resources.items():
        if name == "CPU":
            options["num_cpus"] = amount
        elif name == "GPU":
            options["num_gpus"] = amount
        elif name == "memory":
            options["memory"] = amount
        else:
            custom[name] = amount
    if custom:
        options["resources"] = custom
    return options


class RayExecutor:
    """``address``: a cluster to connect to (else RAY_ADDRESS, else a local Ray with ``local_cpus`` CPUs);
    ``limit``: at most this many cells submitted at once (None: a window sized by the cluster,
    cmpx.sweep.window); ``pending_timeout``: how long a cell may wait for a node able to hold it (None: the
    default; 0: no limit)."""

    def __init__(self, address: str | None, local_cpus: int, limit: int | None,
                 warn: Callable[[str], None] = lambda message: None, ship_models: bool = False,
                 pending_timeout: float | None = None):
        self.ray = import_ray()
        self.warn = warn
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        if self.address and not self.ray.is_initialized():
            _check_reachable(self.address)
        self.local_cpus = local_cpus
        self.limit = limit
        self.ship_models = ship_models  # through the object store (cmpx.sweep.shipping)
        timeout = DEFAULT_PENDING_TIMEOUT if pending_timeout is None else pending_timeout
        self.waiting = WaitingCells(timeout or None)
        self.nodes = NodeWatch(self.ray)

    def describe(self) -> str:
        if self.ray.is_initialized():
            return "the Ray this process is connected to"
        return self.address or f"a local Ray with {self.local_cpus} CPU(s), started for this sweep"

    def run(self, jobs: Sequence[Job], events: Events) -> None:
        ray = self.ray
        started_here = self._connect()
        try:
            self._check_resources(jobs, started_here)
            from cmpx.sweep.cell import run_cell_task

            remote = ray.remote(run_cell_task)
            shipment = ModelShipment(ray, jobs) if self.ship_models else None
            window = Window(jobs, self.limit, ray.cluster_resources)
            in_flight: dict[Any, Job] = {}
            waiting: list[Any] = []  # the refs in flight, as ray.wait gives them back (not rebuilt each time)
            head = HeadWatch(gcs_address(ray), head_lost_seconds())
            checked = time.monotonic()
            try:
                while window.pending or in_flight:
                    for job in window.take():
                        task = shipment.task(job) if shipment else job.task
                        ref = remote.options(**task_options(job.resources)).remote(task)
                        in_flight[ref] = job
                        waiting.append(ref)
                        events.started(job)
                    done, waiting = _ready(ray, waiting)
                    for ref in done:
                        job = in_flight.pop(ref)
                        window.finished(job)
                        events.finished(job, self._outcome(ref))
                    if time.monotonic() - checked >= CHECK_SECONDS:
                        checked = time.monotonic()
                        for ref, outcome in self._watch(head, in_flight):
                            job = in_flight.pop(ref)
                            waiting.remove(ref)
                            window.finished(job)
                            events.finished(job, outcome)
                    events.tick()
            except KeyboardInterrupt:
                self._interrupt(in_flight, events)
                raise
        finally:
            if started_here:
                ray.shutdown()

    def _connect(self) -> bool:
        """Connect unless already connected; True if this call connected (and so must shut down)."""
        ray = self.ray
        if ray.is_initialized():
            return False
        # ray.init replaces the SIGTERM handler with one that exits at once; cmpx's (an interrupt: the cells stop
        # their workers, the summary of what finished is written) is put back.
        handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGHUP)}
        # A cell killed by Ray's memory monitor is retried on a budget of its own (task_oom_retries, read by this
        # process, the task's owner; unbounded by default in recent Rays): the same bound as the other failures.
        os.environ.setdefault(OOM_RETRIES_ENV, str(INFRASTRUCTURE_RETRIES))
        try:
            if self.address:
                ray.init(address=self.address, logging_level=logging.WARNING, log_to_driver=False)
            else:  # "local": a new Ray, never the last cluster started on this machine (ray_current_cluster)
                ray.init(address="local", num_cpus=self.local_cpus, include_dashboard=False,
                         logging_level=logging.WARNING, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = f"the Ray cluster at {self.address}" if self.address else "a local Ray"
            raise UsageError(f"cannot start or reach {where}: {exc}") from None
        finally:
            if threading.current_thread() is threading.main_thread():
                for signum, handler in handlers.items():
                    if handler is not None:
                        signal.signal(signum, handler)
        return True

    def _check_resources(self, jobs: Sequence[Job], started_here: bool) -> None:
        runs = {job.cell.run_name: demand(job.resources) for job in jobs}
        local = started_here and not self.address
        for warning in check_runs_fit(runs, node_capacities(self.ray), local, self.waiting):
            self.warn(warning)

    def _watch(self, head: HeadWatch, in_flight: dict[Any, Job]) -> list[tuple[Any, CellOutcome]]:
        """Raises ClusterLost if the head is gone; cancels the cells that waited too long for a node and returns
        them with their outcome (the caller takes them out of flight)."""
        now = time.monotonic()
        head.check(now)
        nodes = self.nodes.capacities()
        if nodes is None:
            return []
        expired = self.waiting.expired({ref: demand(job.resources) for ref, job in in_flight.items()}, nodes, now)
        for news in self.waiting.news:
            self.warn(news)
        self.waiting.news.clear()
        for ref in expired:
            self.ray.cancel(ref)
        return [(ref, _failed(ExitCode.INFRASTRUCTURE, f"infrastructure failure: {why}")) for ref, why in expired.items()]

    def _outcome(self, ref: Any) -> CellOutcome:
        ray = self.ray
        try:
            return ray.get(ref)
        except ray.exceptions.TaskCancelledError:
            return _failed(ExitCode.INTERRUPTED, "interrupted")
        except ray.exceptions.RayTaskError as exc:  # the cell's own code raised: its failure, not the cluster's
            first = telling_line(str(exc))
            return _failed(ExitCode.INTERNAL, f"the Ray task running this cell failed: {type(exc).__name__}: {first}")
        except ray.exceptions.RayError as exc:  # its process, node or memory failed, past Ray's retries
            return _failed(ExitCode.INFRASTRUCTURE, infrastructure_failure(ray, exc))

    def _interrupt(self, in_flight: dict[Any, Job], events: Events) -> None:
        """Cancel every cell: those under way get a KeyboardInterrupt, stop their workers and answer; those that
        finish meanwhile are kept; any still running after the grace period are killed."""
        ray = self.ray
        for ref in in_flight:
            ray.cancel(ref)
        deadline = time.monotonic() + INTERRUPT_GRACE_SECONDS
        waiting = list(in_flight)
        while in_flight and time.monotonic() < deadline:
            done, waiting = _ready(ray, waiting)
            for ref in done:
                events.finished(in_flight.pop(ref), self._outcome(ref))
        for ref in in_flight:
            ray.cancel(ref, force=True)


def _ready(ray: Any, waiting: list[Any]) -> tuple[list[Any], list[Any]]:
    """The refs done now, and those still running: waits up to a tick for the first, then takes every other that
    is done too, so that a busy cluster's results come in batches and each call costs one pass over the window."""
    if not waiting:
        time.sleep(TICK_SECONDS)
        return [], waiting
    done, waiting = ray.wait(waiting, num_returns=1, timeout=TICK_SECONDS)
    if done and waiting:
        more, waiting = ray.wait(waiting, num_returns=len(waiting), timeout=0)
        done += more
    return done, waiting


def _check_reachable(address: str, seconds: float = 10.0) -> None:
    """A HOST:PORT (or ray://HOST:PORT) address nobody answers at is an error now: Ray itself would retry
    forever, logging each attempt."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", or a form Ray resolves itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=seconds).close()
    except OSError as exc:
        raise UsageError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


def _failed(code: ExitCode, failure: str) -> CellOutcome:
    return CellOutcome(code, failure=failure, log=failure)
