"""The terminal: colour only on a TTY (never with NO_COLOR), and a one-line progress display for long waits
on a TTY (nothing at all otherwise, so logs and pipes get plain lines)."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

import click

from cmpx.printable import printable

STYLES: dict[str, dict[str, Any]] = {
    "PASSED": {"fg": "green"}, "FAILED": {"fg": "red", "bold": True}, "ERROR": {"fg": "red", "bold": True},
    "INVALID": {"fg": "magenta", "bold": True}, "warning": {"fg": "yellow"}}


def colour_wanted(stream: TextIO) -> bool:
    return not os.environ.get("NO_COLOR") and hasattr(stream, "isatty") and stream.isatty()


def paint(text: str, word: str, enabled: bool) -> str:
    """``text`` with its first occurrence of ``word`` styled, when colour is enabled."""
    if not enabled or word not in text:
        return text
    return text.replace(word, click.style(word, **STYLES[word]), 1)


@dataclass
class Progress:
    """Rewrites one status line on a TTY, e.g. ``load: onnxrt 2.1 s, trt 2.1 s``; silent elsewhere."""

    stream: TextIO = field(default_factory=lambda: sys.stderr)
    enabled: bool = False
    _shown: bool = False
    _last: float = 0.0

    @classmethod
    def for_terminal(cls, stream: TextIO | None = None) -> Progress:
        stream = stream or sys.stderr
        return cls(stream, hasattr(stream, "isatty") and stream.isatty())

    def update(self, phase: str, pending: list[str], elapsed: float, detail: str = "") -> None:
        now = time.monotonic()
        if not self.enabled or now - self._last < 0.2:
            return
        self._last = now
        self.show(f"{phase}: {', '.join(pending)} {elapsed:.1f} s{(' ' + detail) if detail else ''}")

    def show(self, line: str) -> None:
        """Replace the status line with ``line`` (on a TTY)."""
        if not self.enabled:
            return
        self.stream.write("\r\x1b[2K" + printable(line)[:200])
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._shown = False


class PipeSafeEcho:
    """``click.echo`` to stdout (or stderr) that outlives its reader: when the reader went away (``cmpx run ... |
    head -1``), the lines are dropped and the stream is pointed at /dev/null, so that the run goes on, its report
    files are written, and its exit code stays the verdict instead of a broken-pipe error."""

    def __init__(self, err: bool = False):
        self.err = err
        self.closed = False

    def __call__(self, text: str) -> None:
        if self.closed:
            return
        try:
            click.echo(text, err=self.err)
        except BrokenPipeError:
            self.closed = True
            stream = sys.stderr if self.err else sys.stdout
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, stream.fileno())
            finally:
                os.close(devnull)
