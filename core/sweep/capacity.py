"""How many cells this machine runs at once by default: one per CPU this process may use, as long as memory
allows. A cell is a coordinator and a worker per backend, each an interpreter with numpy and its framework
(about 160 MiB together on a small model with two backends, measured in bench/README.md), plus copies of the
model's weights. The default keeps a wide margin, since frameworks such as OpenVINO take more."""

from __future__ import annotations

import os
from collections.abc import Sequence

CELL_MEMORY_BYTES = 512 << 20  # a small model's cell, with room to spare
MODEL_COPIES = 4  # the weights in the coordinator's planning and in each backend, roughly


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except OSError:
        return None


def available_memory() -> int | None:
    """Bytes free for new processes: MemAvailable, or what the cgroup limit leaves if that is less (in a
    container /proc/meminfo shows the host's memory). None if neither can be read."""
    found = []
    meminfo = _read("/proc/meminfo")
    if meminfo:
        for line in meminfo.splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit, usage = _read(limit_file), _read(usage_file)
        if limit and usage and limit.strip().isdigit() and usage.strip().isdigit():
            found.append(max(0, int(limit) - int(usage)))
    return min(found) if found else None


def default_jobs(models: Sequence[str]) -> int:
    """Cells at once: the CPUs this process may use, fewer if memory would not hold that many cells of the
    largest model; at least one."""
    largest = max((os.path.getsize(m) for m in models if os.path.exists(m)), default=0)
    per_cell = max(CELL_MEMORY_BYTES, MODEL_COPIES * largest)
    memory = available_memory()
    by_memory = cpus() if memory is None else memory // per_cell
    return max(1, min(cpus(), by_memory))
