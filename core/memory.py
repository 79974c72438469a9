"""How much memory a run may still use: the smaller of what the kernel says is available and what is left under
the memory limit of the cgroup cmpx runs in (containers and CI runners limit it there, while /proc/meminfo still
shows the whole host). Also what /dev/shm has left. No numpy."""

from __future__ import annotations

import os

SHM_DIR = "/dev/shm"
_CGROUP_ROOTS = (  # (mount point, limit file, usage file): cgroup v2, then v1's memory controller
    ("/sys/fs/cgroup", "memory.max", "memory.current"),
    ("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"),
)


def available_memory() -> int:
    """Bytes of memory a process may still allocate: MemAvailable, capped by the headroom of every memory cgroup
    this process is in (its own and those above it). 0 if unknown."""
    available = _meminfo_available()
    for limit_file, usage_file in _cgroup_files():
        limit, usage = _number(limit_file), _number(usage_file)
        if limit is not None and usage is not None and limit < (1 << 60):  # "max" or a huge v1 value: no limit
            headroom = max(0, limit - usage)
            available = headroom if available == 0 else min(available, headroom)
    return available


def default_memory_budget() -> int:
    """--memory-budget's default: half the memory available now (0 if unknown: no budget)."""
    return available_memory() // 2


def _cgroup_files() -> list[tuple[str, str]]:
    """(limit file, usage file) of this process's memory cgroup and each one above it, from /proc/self/cgroup (a
    container sees its own cgroup as the root)."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    paths = {"0": "/", "memory": "/"}  # the mount points' own files, also when /proc/self/cgroup says nothing
    for line in lines:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if number == "0" and not controllers:
            paths["0"] = path
        elif "memory" in controllers.split(","):
            paths["memory"] = path
    found = []
    for (root, limit, usage), key in zip(_CGROUP_ROOTS, ("0", "memory")):
        parts = [part for part in paths[key].split("/") if part and part != ".."]
        for depth in range(len(parts), -1, -1):
            directory = os.path.join(root, *parts[:depth])
            found.append((os.path.join(directory, limit), os.path.join(directory, usage)))
    return found


def shm_free(directory: str = SHM_DIR) -> int:
    """Bytes still free in the shared-memory file system."""
    try:
        status = os.statvfs(directory)
    except OSError:
        return 0
    return status.f_bavail * status.f_frsize


def _meminfo_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _number(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def size_text(nbytes: float) -> str:
    """``1.5 GiB``, ``64 MiB``, ``512 B``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(nbytes) < 1024 or unit == "TiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} TiB"
