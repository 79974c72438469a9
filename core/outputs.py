"""The files and directories a run writes: checked before any work, written so that a reader never finds a
truncated file under the final name."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO

from cmpx.errors import OutputFailed, UsageError


def check_file_output(option: str, path: str) -> None:
    """A file ``option`` will write at ``path``: its directory exists and is writable, and it is not a directory."""
    if os.path.isdir(path):
        raise UsageError(f"{option} {path} is a directory; give the path of a file to write")
    _check_parent(option, path)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise UsageError(f"{option} {path} exists and is not writable; choose another path")


def check_directory_output(option: str, path: str, must_be_empty: bool) -> None:
    """A directory ``option`` will write into: an existing (empty, if ``must_be_empty``) writable directory, or a
    new one in a writable directory."""
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise UsageError(f"{option} {path} exists and is not a directory; choose a new path")
        if must_be_empty and os.listdir(path):
            raise UsageError(f"{option} {path} already exists and is not an empty directory; choose a new path to "
                             "save to")
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"{option} {path} is not writable; choose another directory")
        return
    _check_parent(option, path)


def _check_parent(option: str, path: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"{option} {path}: the directory {parent} does not exist; create it, or choose another path")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: the directory {parent} is not writable (read-only file system or "
                         "permissions); choose another path")


def _creation_mode() -> int:
    """The mode ``open()`` gives a new file: 0o666 less the process's umask (read without changing it, where
    Linux shows it)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


class AtomicFile:
    """A file that appears at ``path`` only once complete: written as a temporary file in the same directory, then
    renamed by ``commit``; ``abandon`` removes it. An OSError (a full or read-only disk) while opening, writing or
    committing becomes an OutputFailed saying that nothing was written at ``path``."""

    def __init__(self, option: str, path: str, mode: str = "w"):
        self.option = option
        self.path = path
        directory = os.path.dirname(os.path.abspath(path))
        with self.failing():
            self.temporary: str | None
            fd, self.temporary = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".partial",
                                                  dir=directory)
            os.fchmod(fd, _creation_mode())  # mkstemp makes it private; a report is as readable as any new file
            self.file: IO = os.fdopen(fd, mode, encoding=None if "b" in mode else "utf-8")

    @contextmanager
    def failing(self) -> Iterator[None]:
        """Turn an OSError inside into an OutputFailed, removing the temporary file."""
        try:
            yield
        except OSError as exc:
            self.abandon()
            raise OutputFailed(f"{self.option} {self.path}: {exc.strerror or exc}; nothing was written there") \
                from None

    def commit(self) -> None:
        if self.temporary is None:
            raise ValueError(f"{self.path}: committed or abandoned already")
        with self.failing():
            self.file.close()
            os.replace(self.temporary, self.path)
            self.temporary = None

    def abandon(self) -> None:
        file = getattr(self, "file", None)
        if file is not None:
            try:
                file.close()
            except OSError:
                pass
        temporary = getattr(self, "temporary", None)
        if temporary is not None:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            self.temporary = None


def write_file(option: str, path: str, write: Callable[[IO], object], mode: str = "w") -> None:
    """Write ``path`` at once with ``write(file)``, atomically (see AtomicFile)."""
    target = AtomicFile(option, path, mode)
    try:
        with target.failing():
            write(target.file)
    except BaseException:
        target.abandon()
        raise
    target.commit()


def write_whole(option: str, path: str, text: str) -> None:
    """``text`` written to ``path`` whole or not at all, through a temporary file of a unique name made
    exclusively beside it (a link planted at a fixed temporary name is never followed), renamed into place
    (which replaces a link at ``path`` itself, never what it points to). OutputFailed if it cannot be."""
    target = AtomicFile(option, path)
    try:
        with target.failing():
            target.file.write(text)
        target.commit()
    finally:
        target.abandon()
