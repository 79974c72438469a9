"""A run's name space: the prefix of every shared-memory segment and scratch directory it makes, and a lock file
it holds while it lives, so that a later run can tell a dead run's leftovers from a live run's files.

Liveness is decided by the lock, not by a process id: a run in another PID namespace sharing /dev/shm (a
container) sees other runs' process ids as meaningless, but their locks as held. The lock file
``/dev/shm/cmpx-<pid>-<random>-lock`` is held with flock for the run's whole life and removed last; the kernel
releases it when the run's process dies however it dies, SIGKILL included. A sweep removes a prefix's files only
if it can take that lock itself (so the run is dead), and only files the current user owns; anything else (another
user's files, files without a lock: made by an older cmpx) is left alone.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import tempfile
import time

from cmpx.memory import SHM_DIR

PREFIX = "cmpx-"  # every file cmpx makes in /dev/shm
LOCK_SUFFIX = "lock"
SCRATCH = "scratch-"
# A lock under its temporary name is unlocked for a moment (between its creation and flock): one that young may be a
# run starting now, not a run that died before renaming it, and is left alone.
STAGING_GRACE_SECONDS = 60.0


class RunSpace:
    """The prefix ``cmpx-<pid>-<random>-`` of one run, with its lock held until ``close``."""

    def __init__(self) -> None:
        self.prefix = f"{PREFIX}{os.getpid()}-{os.urandom(4).hex()}-"
        # Made under a temporary name, locked, then renamed into place: a sweep never sees it unlocked.
        staging = os.path.join(SHM_DIR, f".{self.prefix}{LOCK_SUFFIX}")
        self._fd: int | None = os.open(staging, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        os.write(self._fd, " ".join(map(str, _ancestors())).encode() + b"\n")  # who started the run (tests ask)
        os.rename(staging, self.lock_path)
        self._scratch: list[str] = []

    @property
    def lock_path(self) -> str:
        return lock_path(self.prefix)

    def scratch_directory(self) -> str:
        """A new scratch directory of this run (transformed models), removed with it."""
        path = tempfile.mkdtemp(prefix=f"{self.prefix}{SCRATCH}")
        self._scratch.append(path)
        return path

    def close(self) -> None:
        """Remove every segment and scratch directory of the run, then its lock. Idempotent."""
        if self._fd is None:
            return
        _remove_files(self.prefix)
        for path in self._scratch:
            shutil.rmtree(path, ignore_errors=True)
        try:
            os.unlink(self.lock_path)
        except FileNotFoundError:
            pass
        os.close(self._fd)
        self._fd = None


def lock_path(prefix: str) -> str:
    return os.path.join(SHM_DIR, f"{prefix}{LOCK_SUFFIX}")


def sweep(prefix: str) -> list[str]:
    """Unlink every segment whose name starts with ``prefix`` (not its lock); return the names removed."""
    if not prefix.startswith(PREFIX) or len(prefix) <= len(PREFIX):
        raise ValueError(f"refusing to sweep with prefix {prefix!r}")
    return _remove_files(prefix)


def sweep_orphans() -> list[str]:
    """Remove the segments, scratch directories and lock of every dead run of this user (a run whose lock nobody
    holds); return what was removed. Live runs, other users' files and files without a lock are left alone."""
    removed = []
    try:
        names = os.listdir(SHM_DIR)
    except FileNotFoundError:
        return []
    for name in names:
        if name.startswith(f".{PREFIX}") and name.endswith(LOCK_SUFFIX):  # a run that died before renaming its lock
            fd = _take_dead_lock(os.path.join(SHM_DIR, name))
            if fd is not None:
                if time.time() - os.fstat(fd).st_mtime > STAGING_GRACE_SECONDS:
                    os.unlink(os.path.join(SHM_DIR, name))
                    removed.append(name)
                os.close(fd)
            continue
        if not (name.startswith(PREFIX) and name.endswith(LOCK_SUFFIX)):
            continue
        prefix = name[:-len(LOCK_SUFFIX)]
        fd = _take_dead_lock(os.path.join(SHM_DIR, name))
        if fd is None:
            continue
        try:
            removed += _remove_files(prefix)
            removed += _remove_scratch(prefix)
            os.unlink(os.path.join(SHM_DIR, name))
            removed.append(name)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def prefix_of(name: str) -> str:
    """The run prefix ``cmpx-<pid>-<random>-`` of a segment or lock name."""
    parts = name[len(PREFIX):].split("-", 2)
    return f"{PREFIX}{parts[0]}-{parts[1] if len(parts) > 1 else ''}-"


def started_by(prefix: str) -> list[int]:
    """The process ids above the run of ``prefix`` when it started (parent first, a few levels), as its lock file
    records them; empty when it has no lock file or records none. A test suite's leak check counts a dead run as
    its own only when the test's process is among them, so that tests in parallel processes do not count each
    other's killed runs."""
    try:
        fd = os.open(lock_path(prefix), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return []
    try:
        words = os.read(fd, 256).split()
    finally:
        os.close(fd)
    return [int(word) for word in words if word.isdigit()]


def _ancestors(levels: int = 4) -> list[int]:
    """This process's parent, its parent, ... up to ``levels`` (from /proc; as far as it can be read)."""
    found, pid = [], os.getpid()
    for _ in range(levels):
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1:
            break
        found.append(pid)
    return found


def is_alive(prefix: str) -> bool:
    """Whether the run of ``prefix`` holds its lock (False for a dead run, or one without a lock file)."""
    try:
        fd = os.open(lock_path(prefix), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases the shared lock taken to look
    return False


def _take_dead_lock(path: str) -> int | None:
    """An open, locked descriptor of the lock file at ``path`` if its run is dead and it is this user's; else
    None (alive, another user's, or gone)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_uid != os.getuid():
            raise OSError
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _remove_files(prefix: str) -> list[str]:
    removed = []
    try:
        names = sorted(n for n in os.listdir(SHM_DIR) if n.startswith(prefix) and n != f"{prefix}{LOCK_SUFFIX}")
    except FileNotFoundError:
        return []
    for name in names:
        path = os.path.join(SHM_DIR, name)
        try:
            if os.lstat(path).st_uid == os.getuid():
                os.unlink(path)
                removed.append(name)
        except OSError:
            continue
    return removed


def _remove_scratch(prefix: str) -> list[str]:
    removed = []
    root = tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(root) if n.startswith(f"{prefix}{SCRATCH}")]
    except OSError:
        return []
    for name in names:
        path = os.path.join(root, name)
        try:
            if os.lstat(path).st_uid == os.getuid() and stat.S_ISDIR(os.lstat(path).st_mode):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(name)
        except OSError:
            continue
    return removed
