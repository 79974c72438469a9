"""What the Ray executor watches on its cluster: what each node can hold (a cell runs on one node, so a demand is
checked per node, never against the cluster's totals), cells that wait for a node able to hold them (bounded by
--pending-timeout), and the cluster's head (its GCS), whose loss ends the sweep (ClusterLost) before Ray would
end the process itself (exit 1, after RAY_gcs_rpc_server_reconnect_timeout_s, 60 s by default: the time Ray gives
a head to come back, as one with GCS fault tolerance does; cmpx waits half of it).

A node's capacities come from ``ray.nodes()`` (alive nodes, their static resources); a demand is what
cmpx.sweep.ray_executor.task_options asks of Ray: one CPU unless the run says otherwise, and the run's resources.
"""

from __future__ import annotations

import os
import socket
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

from cmpx.errors import ClusterLost, UsageError

GCS_RECONNECT_ENV = "RAY_gcs_rpc_server_reconnect_timeout_s"  # Ray's own limit, read by the driver process
CHECK_SECONDS = 1.0  # how often the head and the waiting cells are checked
DEFAULT_PENDING_TIMEOUT = 600.0  # --pending-timeout's default: a cell no node can hold waits this long

Capacity = dict[str, float]


def demand(resources: dict[str, float]) -> Capacity:
    """What one cell of a run with ``resources`` takes of one node."""
    return {"CPU": 1.0, **resources}


def node_capacities(ray: Any) -> list[Capacity]:
    """Each alive node's resources (its node-id and object-store entries left out)."""
    return [{name: amount for name, amount in node["Resources"].items()
             if not name.startswith("node:") and name != "object_store_memory"}
            for node in ray.nodes() if node.get("Alive")]


class NodeWatch:
    """The alive nodes' capacities as last read, each read in a daemon thread of its own: with the head down,
    ``ray.nodes()`` blocks until Ray ends the process, and the sweep must go on watching the head meanwhile."""

    def __init__(self, ray: Any):
        self.ray = ray
        self.latest: list[Capacity] | None = None
        self.reading: threading.Thread | None = None

    def capacities(self) -> list[Capacity] | None:
        """The last read (None before the first), and a new read started unless one is under way."""
        if self.reading is None or not self.reading.is_alive():
            self.reading = threading.Thread(target=self._read, name="cmpx-ray-nodes", daemon=True)
            self.reading.start()
        return self.latest

    def _read(self) -> None:
        try:
            self.latest = node_capacities(self.ray)
        except Exception:  # the head is gone or going: HeadWatch decides
            pass


def _amount(name: str, amount: float) -> str:
    return f"{name} {amount / 2**30:.1f} GiB" if name == "memory" else f"{name} {amount:g}"


def unheld(need: Capacity, nodes: Sequence[Capacity]) -> str | None:
    """None if one of ``nodes`` can hold ``need``; else why not, in words: what is needed on one node, and what
    the nodes have of it (nodes alike counted once)."""
    if any(all(node.get(name, 0) >= amount for name, amount in need.items()) for node in nodes):
        return None
    names = sorted(need)
    shapes = Counter(", ".join(_amount(name, node.get(name, 0)) for name in names) for node in nodes)
    have = "; ".join(shape if n == 1 else f"{shape} (x{n})" for shape, n in sorted(shapes.items()))
    return (f"{' and '.join(_amount(name, need[name]) for name in names)} on one node, and no node of the cluster "
            f"holds that (its {len(nodes)} node(s): {have or 'none'})")


def lacks_a_kind(need: Capacity, nodes: Sequence[Capacity]) -> bool:
    """True if no node has some resource of ``need`` at all (a node that has it may still join)."""
    return any(all(name not in node for node in nodes) for name in need)


def _shape(need: Capacity) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(need.items()))


class WaitingCells:
    """Cells whose demand no alive node can hold, since when; ``expired`` names those waiting longer than the
    timeout (None: no limit) with why. ``news`` says, once per demand, why cells began to wait (a node that
    held them died, say), unless ``tell`` said it already."""

    def __init__(self, timeout: float | None):
        self.timeout = timeout
        self.since: dict[Any, float] = {}
        self.told: set[tuple[tuple[str, float], ...]] = set()
        self.news: list[str] = []

    def tell(self, need: Capacity) -> None:
        self.told.add(_shape(need))

    def limit(self) -> str:
        return f"up to {self.timeout:g} s (--pending-timeout)" if self.timeout else "with no limit"

    def expired(self, demands: dict[Any, Capacity], nodes: Sequence[Capacity], now: float) -> dict[Any, str]:
        why_by_shape: dict[tuple[tuple[str, float], ...], str | None] = {}
        found = {}
        for key, need in demands.items():
            shape = _shape(need)
            if shape not in why_by_shape:
                why_by_shape[shape] = unheld(need, nodes)
            why = why_by_shape[shape]
            if why is None:
                self.since.pop(key, None)
                continue
            if shape not in self.told:
                self.tell(need)
                self.news.append(f"cells wait for a node: they need {why}; they wait {self.limit()}")
            first = self.since.setdefault(key, now)
            if self.timeout is not None and now - first >= self.timeout:
                found[key] = f"waited {now - first:.0f} s (--pending-timeout) for a node: it needs {why}"
        for key in found:
            del self.since[key]
        return found


def check_runs_fit(runs: dict[str, Capacity], nodes: Sequence[Capacity], local: bool,
                   waiting: WaitingCells) -> list[str]:
    """A cell runs on one node: a run that no node can hold would wait forever. UsageError (before any cell runs,
    naming each such run, what it needs and what the nodes have), unless no node has one of its resources at all
    on a cluster: a node that has it may join (an autoscaler), so those cells wait (``waiting``, which is told
    so), and the warnings returned say so (Ray's own would stay hidden with the cells' output). ``local``: the Ray
    was started for this sweep, where no node joins."""
    refused: dict[str, str] = {}
    warnings = []
    for run, need in runs.items():
        why = unheld(need, nodes)
        if why is None:
            continue
        if local or not lacks_a_kind(need, nodes):
            refused[run] = why
        else:
            waiting.tell(need)
            warnings.append(f"run {run!r} needs {why}: its cells wait for a node that has it, {waiting.limit()}")
    if refused:
        where = "the local Ray started for this sweep" if local else "the Ray cluster"
        raise UsageError("; ".join(f"run {run!r} needs {why}" for run, why in refused.items()) +
                         f" ({where}; change the run's resources, or use a cluster with such a node)")
    return warnings


def gcs_address(ray: Any) -> str | None:
    """HOST:PORT of the cluster's GCS (None where Ray does not say, as through Ray Client)."""
    try:
        address = ray.get_runtime_context().gcs_address
    except Exception:
        return None
    return address if isinstance(address, str) and ":" in address else None


def head_lost_seconds() -> float:
    """How long a head may not answer before the cluster counts as lost: half of what Ray allows."""
    try:
        return max(1.0, float(os.environ.get(GCS_RECONNECT_ENV, "60")) / 2)
    except ValueError:
        return 30.0


class HeadWatch:
    """Raises ClusterLost once the cluster's GCS at ``address`` (HOST:PORT; None: not watched) has not answered
    for ``lost_after`` seconds."""

    def __init__(self, address: str | None, lost_after: float):
        host, _, port = (address or "").rpartition(":")
        self.where = (host.strip("[]"), int(port)) if port.isdigit() else None
        self.address = address
        self.lost_after = lost_after
        self.down_since: float | None = None

    def check(self, now: float) -> None:
        if self.where is None:
            return
        try:
            socket.create_connection(self.where, timeout=CHECK_SECONDS).close()
            self.down_since = None
            return
        except OSError as exc:
            reason = exc.strerror or str(exc)
        if self.down_since is None:
            self.down_since = now
        if now - self.down_since >= self.lost_after:
            raise ClusterLost(f"lost the Ray cluster: its head (GCS at {self.address}) has not answered for "
                              f"{self.lost_after:g} s ({reason})")
