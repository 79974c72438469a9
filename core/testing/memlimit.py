"""Commands run in a fresh memory cgroup of their own (under this process's cgroup), for tests and benchmarks that
must bound or measure the memory of a whole run: the coordinator, every worker, and the shared memory they fill
(tmpfs pages are charged to the cgroup that touches them first). Needs root and the cgroup v1 memory controller, or
cgroup v2 with memory delegated; ``unavailable()`` says why not."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Sequence
from typing import Any

V1 = "/sys/fs/cgroup/memory"
V2 = "/sys/fs/cgroup"


def _own(controller_root: str) -> str | None:
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controller_root == V1 and "memory" in controllers.split(","):
            return V1 + path
        if controller_root == V2 and number == "0" and not controllers:
            return V2 + path
    return None


def _parent() -> tuple[str, str, str, str] | None:
    """(parent directory, limit file, peak file, kind) of the cgroup hierarchy to use."""
    own = _own(V1)
    if own and os.path.exists(os.path.join(own, "memory.max_usage_in_bytes")):
        return own, "memory.limit_in_bytes", "memory.max_usage_in_bytes", "v1"
    own = _own(V2)
    if own and os.path.exists(os.path.join(own, "memory.max")) and os.path.exists(os.path.join(own, "memory.peak")):
        return own, "memory.max", "memory.peak", "v2"
    return None


def unavailable() -> str | None:
    """Why memory cgroups cannot be made here, or None."""
    parent = _parent()
    if parent is None:
        return "no writable memory cgroup (needs the cgroup v1 memory controller, or v2 with memory.peak)"
    if not os.access(parent[0], os.W_OK):
        return f"cannot create a cgroup under {parent[0]} (needs root)"
    return None


class MemoryCgroup:
    """A fresh cgroup, limited to ``limit`` bytes (None: not limited). Start commands in it with ``run``; ``peak``
    is the most memory its processes held at once."""

    def __init__(self, limit: int | None = None):
        parent = _parent()
        if parent is None:
            raise OSError(unavailable())
        directory, self._limit_file, self._peak_file, _ = parent
        self.path = os.path.join(directory, f"cmpx-{uuid.uuid4().hex[:12]}")
        os.mkdir(self.path)
        if limit is not None:
            self._write(self._limit_file, str(limit))

    def _write(self, name: str, text: str) -> None:
        with open(os.path.join(self.path, name), "w") as f:
            f.write(text)

    def _enter(self) -> None:  # in the child, before it runs the command
        self._write("cgroup.procs", str(os.getpid()))

    def run(self, command: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess:
        return subprocess.run(list(command), preexec_fn=self._enter, **kwargs)

    def peak(self) -> int:
        with open(os.path.join(self.path, self._peak_file)) as f:
            return int(f.read())

    def close(self) -> None:
        for _ in range(50):  # its processes may still be exiting
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)

    def __enter__(self) -> MemoryCgroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
