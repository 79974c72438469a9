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
    "INVALID": {"fg": "magenta", "bold": True}, "NOT COMPARED": {"fg": "yellow"}, "warning": {"fg": "yellow"}}


def colour_wanted(stream: TextIO) -> bool:
    """Colour on a TTY; never with NO_COLOR set (no-color.org), always with FORCE_COLOR set (not to 0 or empty: a
    CI log that shows colours) unless NO_COLOR is set too."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR", "") not in ("", "0", "false"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()


def terminal_width(stream: TextIO) -> int | None:
    """The columns of the terminal ``stream`` writes to; None for a pipe or a file (their lines are never cut)."""
    if not (hasattr(stream, "isatty") and stream.isatty()):
        return None
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError):
        return None
    return columns if columns >= 20 else None


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
    _steps: dict[str, tuple[float, int]] = field(default_factory=dict)  # per kind of step: when first seen, done then
    prefix: str = ""  # what the line is part of (cmpx reduce: which candidate)

    @classmethod
    def for_terminal(cls, stream: TextIO | None = None) -> Progress:
        stream = stream or sys.stderr
        return cls(stream, hasattr(stream, "isatty") and stream.isatty())

    def begin(self, kind: str, done: int = 0) -> None:
        """Steps of ``kind`` (e.g. ``iteration``) start now, ``done`` of them already done: the estimate of what is
        left counts from here."""
        self._steps[kind] = (time.monotonic(), done)

    def update(self, phase: str, pending: list[str], elapsed: float, detail: str = "",
               step: tuple[str, int, int | None] | None = None) -> None:
        """``step``: (its kind, how many steps of that kind are done, how many there are, None if unknown): the
        line then says the time spent on them and, once one is done, an estimate of what is left."""
        now = time.monotonic()
        if step is not None:
            self._steps.setdefault(step[0], (now, step[1]))
        if not self.enabled or now - self._last < 0.2:
            return
        self._last = now
        line = f"{self.prefix}{phase}: {', '.join(pending)} {elapsed:.1f} s{(' ' + detail) if detail else ''}"
        self.show(line + (f" | {self.estimate(*step, now=now)}" if step is not None else ""))

    def estimate(self, kind: str, done: int, total: int | None, now: float | None = None) -> str:
        """``12 s elapsed, ~30 s left``: the time since steps of ``kind`` began, and the rest at their pace."""
        now = time.monotonic() if now is None else now
        began, done_then = self._steps.get(kind, (now, done))
        spent = now - began
        text = f"{clock(spent)} elapsed"
        if total is not None and done > done_then and total >= done:
            text += f", ~{clock(spent / (done - done_then) * (total - done))} left"
        return text

    def show(self, line: str) -> None:
        """Replace the status line with ``line`` (on a TTY)."""
        if not self.enabled:
            return
        width = terminal_width(self.stream) or 200  # one line: longer ones would scroll instead of being rewritten
        self.stream.write("\r\x1b[2K" + printable(line)[:width - 1])
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
            self._shown = False


def clock(seconds: float) -> str:
    """A duration to read at a glance: ``8 s``, ``3 min 12 s``, ``1 h 05 min``."""
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


class PipeSafeEcho:
    """``click.echo`` to stdout (or stderr) that outlives its reader: when the reader went away (``cmpx run ... |
    head -1``), the lines are dropped and the stream is pointed at /dev/null, so that the run goes on, its report
    files are written, and its exit code stays the verdict instead of a broken-pipe error."""

    def __init__(self, err: bool = False, colour: bool | None = None):
        self.err = err
        self.colour = colour  # True: keep the styles on a pipe too (FORCE_COLOR); None: click strips them there
        self.closed = False

    def __call__(self, text: str) -> None:
        if self.closed:
            return
        try:
            click.echo(text, err=self.err, color=self.colour)
        except BrokenPipeError:
            self.closed = True
            stream = sys.stderr if self.err else sys.stdout
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, stream.fileno())
            finally:
                os.close(devnull)
