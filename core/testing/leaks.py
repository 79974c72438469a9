"""What a run may leave behind, for tests to check it left nothing: worker processes, sweep runners,
shared-memory segments."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

from cmpx.transport import runspace, shm
from cmpx.transport.forking import process_exists


FORK_SERVER = b"cmpx.transport.worker.forkserver"


def _processes(module: bytes, name: bytes | None = None) -> dict[int, list[bytes]]:
    """Live processes running ``python -m MODULE ...`` (and named ``name``, if given: /proc/PID/comm): pid -> the
    arguments after the module name."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if module not in argv:
                continue
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if name is not None:
                with open(f"/proc/{entry}/comm", "rb") as f:
                    if f.read().strip() != name:
                        continue
        except OSError:
            continue
        if state != "Z":
            found[int(entry)] = argv[argv.index(module) + 1:]
    return found


def _forked_workers() -> dict[int, list[bytes]]:
    """Workers forked by a fork server: its command line (``... forkserver COORDINATOR_PID SOCKET_FD``), their own
    name (cmpx.transport.worker.forkserver)."""
    from cmpx.transport.worker.forkserver import WORKER_NAME

    return _processes(FORK_SERVER, WORKER_NAME)


def worker_processes(parent: int | None = None) -> list[int]:
    """PIDs of live cmpx workers started by ``parent`` (default: this process), spawned or forked by its fork
    server."""
    parent = os.getpid() if parent is None else parent
    me = str(parent).encode()
    # python -m cmpx.transport.worker FD_IN FD_OUT PARENT_PID
    spawned = [pid for pid, args in _processes(b"cmpx.transport.worker").items() if args[2:3] == [me]]
    return sorted(spawned + [pid for pid, args in _forked_workers().items() if args[:1] == [me]])


def fork_servers(parent: int | None = None) -> list[int]:
    """PIDs of live fork servers started by ``parent`` (default: this process)."""
    parent = os.getpid() if parent is None else parent
    from cmpx.transport.worker.forkserver import SERVER_NAME

    return [pid for pid, args in _processes(FORK_SERVER, SERVER_NAME).items() if args[:1] == [str(parent).encode()]]


def runner_processes(parent: int | None = None) -> list[int]:
    """PIDs of live sweep runners started by ``parent`` (default: this process)."""
    parent = os.getpid() if parent is None else parent
    # python -m cmpx.sweep.runner RESULTS_FD PARENT_PID
    return [pid for pid, args in _processes(b"cmpx.sweep.runner").items() if args[1:2] == [str(parent).encode()]]


def orphaned_workers() -> list[int]:
    """PIDs of live cmpx workers whose coordinator is gone (they must die with it)."""
    spawned = [pid for pid, args in _processes(b"cmpx.transport.worker").items()
               if args[2:3] and args[2].isdigit() and not process_exists(int(args[2]))]
    return sorted(spawned + [pid for pid, args in _forked_workers().items()
                             if args[:1] and args[0].isdigit() and not process_exists(int(args[0]))])


def segments() -> set[str]:
    """cmpx files in /dev/shm that this process's runs could have left: its own, and those of dead runs this
    process started (a subprocess run, a sweep's; its lock file records who started it), or that have no lock file
    to say (an older cmpx's). Files of other live runs, of runs other processes started (a test killing its own
    coordinator in a parallel test process) and other users' files are not counted."""
    me = os.getpid()
    mine = f"{shm.PREFIX}{me}-"
    found = set()
    for name in shm.list_segments():
        try:
            owned = os.lstat(os.path.join(shm.SHM_DIR, name)).st_uid == os.getuid()
        except FileNotFoundError:
            continue
        if not owned:
            continue
        prefix = runspace.prefix_of(name)
        if name.startswith(mine) or (_dead(prefix) and _started_here(prefix, me)):
            found.add(name)
    return found


def _started_here(prefix: str, me: int) -> bool:
    """Whether this process is among those that started the run ``prefix`` (or nothing records who did)."""
    if not os.path.exists(runspace.lock_path(prefix)):
        return True
    return me in runspace.started_by(prefix)


def _dead(prefix: str) -> bool:
    """A run that holds no lock; for files without a lock file (an older cmpx's), a process id that is gone."""
    if os.path.exists(runspace.lock_path(prefix)):
        return not runspace.is_alive(prefix)
    pid = prefix[len(shm.PREFIX):].split("-", 1)[0]
    return not pid.isdigit() or not process_exists(int(pid))


# A process killed with its group (a worker's helper) is gone a moment after the kill, not at once: on a busy
# machine the kernel may not have run its exit yet. A leak is a process still there after this.
SETTLE_SECONDS = 5.0
T = TypeVar("T")


def settled(live: Callable[[], list[T]]) -> list[T]:
    """``live()`` once it is empty, or what is still there after SETTLE_SECONDS."""
    deadline = time.monotonic() + SETTLE_SECONDS
    found = live()
    while found and time.monotonic() < deadline:
        time.sleep(0.05)
        found = live()
    return found
