"""Opening the files users hand to cmpx (models, saved runs, lists, scripts) as regular files only, and keeping a
saved run's references inside its directory.

A FIFO or a device named where a file is expected would block a read forever or never end: every user file is
opened non-blocking, checked to be a regular file, and only then read. A path found inside a file cmpx reads (a
saved run's manifest, an ONNX tensor's external data) must stay inside the directory it came from.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from typing import IO

from cmpx.errors import UsageError


class NotARegularFile(UsageError):
    pass


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def open_regular(path: str, what: str, mode: str = "rb", encoding: str | None = None) -> IO:
    """``path`` opened for reading, if it is a regular file; UsageError naming ``what`` and the path otherwise
    (missing, unreadable, a FIFO, a device, a directory)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise NotARegularFile(f"{what} not found: {path} (check the path)") from None
    except OSError as exc:
        raise NotARegularFile(f"{what} {path} cannot be opened ({exc.strerror})") from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise NotARegularFile(f"{what} {path} is {_kind(status.st_mode)}; give a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode, encoding=encoding) if "b" not in mode else os.fdopen(fd, mode)
    except BaseException:
        os.close(fd)
        raise


def check_regular(path: str, what: str) -> None:
    """Raise the error ``open_regular`` would, without keeping the file open."""
    open_regular(path, what).close()


def inside(directory: str, reference: object, what: str) -> str:
    """The path a file found in ``directory`` refers to with ``reference`` (a saved run's file entry, an external
    data location), if it is a relative path that stays inside ``directory`` (symbolic links resolved) and names
    a regular file; UsageError otherwise. The message names the reference, never the file's contents."""
    if not isinstance(reference, str) or not reference:
        raise UsageError(f"{what}: file entry {reference!r} is not a relative path")
    if os.path.isabs(reference) or ".." in reference.replace("\\", "/").split("/"):
        raise UsageError(f"{what}: file entry {reference!r} points outside its directory {directory}; cmpx reads "
                         "only files inside it (move the file there)")
    root = os.path.realpath(directory)
    target = os.path.realpath(os.path.join(root, reference))
    if os.path.commonpath([root, target]) != root:
        raise UsageError(f"{what}: file entry {reference!r} leads outside {directory} (through a symbolic link); "
                         "cmpx reads only files inside it (move the file there)")
    check_regular(target, f"{what}: file entry {reference!r}")
    return target


def expand_list_files(option: str, words: Iterable[str], what: str) -> list[str]:
    """``words`` with each ``@FILE`` replaced by the lines of FILE (blank lines and # comments skipped, a line
    that starts with '"' read as a JSON string: see ``list_line``); a file
    that cannot be read is a UsageError naming ``option`` and saying what it should hold (``what``, e.g. "one
    tensor name or pattern per line")."""
    expanded: list[str] = []
    for word in words:
        if not word.startswith("@"):
            expanded.append(word)
            continue
        if word == "@":
            raise UsageError(f"{option}: '@' names no file; write the list's path after it: @kept.txt")
        try:
            with open_regular(word[1:], f"{option} list", "r", encoding="utf-8") as f:
                lines = [line.strip() for line in f]
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{option}: cannot read {word[1:]} ({type(exc).__name__}); give a text file with "
                             f"{what}") from None
        for number, line in enumerate(lines, 1):
            if line and not line.startswith("#"):
                expanded.append(_unquoted(line, f"{option}: {word[1:]} line {number}"))
    return expanded


def list_line(name: str) -> str:
    """``name`` as one line of a list ``expand_list_files`` reads back exactly: as it is, or as a JSON string
    where it would otherwise be taken for a comment or lose characters (a leading '#' or '"', surrounding
    spaces, a line break, nothing at all)."""
    if name and name == name.strip() and not name.startswith(("#", '"')) and not any(c in name for c in "\r\n"):
        return name
    return json.dumps(name, ensure_ascii=False)


def _unquoted(line: str, where: str) -> str:
    if not line.startswith('"'):
        return line
    try:
        name = json.loads(line)
    except ValueError:
        name = None
    if not isinstance(name, str):
        raise UsageError(f"{where}: {line[:60]!r} starts with '\"' but is not one JSON string; quote a name "
                         'as JSON ("#name", " name ") or write it without the leading quote')
    return name
