"""What a run may leave behind, for tests to check it left nothing: worker processes, sweep runners,
shared-memory segments."""

from __future__ import annotations

import os

from cmpx.transport import runspace, shm


def _processes(module: bytes) -> dict[int, list[bytes]]:
    """Live processes running ``python -m MODULE ...``: pid -> the arguments after the module name."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if module in argv and state != "Z":
            found[int(entry)] = argv[argv.index(module) + 1:]
    return found


def worker_processes(parent: int | None = None) -> list[int]:
    """PIDs of live cmpx workers started by ``parent`` (default: this process)."""
    parent = os.getpid() if parent is None else parent
    # python -m cmpx.transport.worker FD_IN FD_OUT PARENT_PID
    return [pid for pid, args in _processes(b"cmpx.transport.worker").items() if args[2:3] == [str(parent).encode()]]


def runner_processes(parent: int | None = None) -> list[int]:
    """PIDs of live sweep runners started by ``parent`` (default: this process)."""
    parent = os.getpid() if parent is None else parent
    # python -m cmpx.sweep.runner RESULTS_FD PARENT_PID
    return [pid for pid, args in _processes(b"cmpx.sweep.runner").items() if args[1:2] == [str(parent).encode()]]


def orphaned_workers() -> list[int]:
    """PIDs of live cmpx workers whose coordinator is gone (they must die with it)."""
    return [pid for pid, args in _processes(b"cmpx.transport.worker").items()
            if args[2:3] and args[2].isdigit() and not _process_alive(int(args[2]))]


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def segments() -> set[str]:
    """cmpx files in /dev/shm that this process's runs could have left: its own, and those of runs that are no
    longer alive (a subprocess run; files without a run lock count too). Files of other live runs (a test suite
    running beside this one) and other users' files are not counted."""
    mine = f"{shm.PREFIX}{os.getpid()}-"
    found = set()
    for name in shm.list_segments():
        try:
            owned = os.lstat(os.path.join(shm.SHM_DIR, name)).st_uid == os.getuid()
        except FileNotFoundError:
            continue
        if owned and (name.startswith(mine) or _dead(runspace.prefix_of(name))):
            found.add(name)
    return found


def _dead(prefix: str) -> bool:
    """A run that holds no lock; for files without a lock file (an older cmpx's), a process id that is gone."""
    if os.path.exists(runspace.lock_path(prefix)):
        return not runspace.is_alive(prefix)
    pid = prefix[len(shm.PREFIX):].split("-", 1)[0]
    if not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    return False
