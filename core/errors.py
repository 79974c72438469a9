"""The exceptions cmpx raises and the exit codes they stand for. The CLI boundary turns them into messages and
exit codes; the Python API (``cmpx.run``) lets them propagate."""

from __future__ import annotations

import re
from enum import IntEnum
from typing import Any


class ExitCode(IntEnum):
    """What ``cmpx`` exits with, and what ``Report.exit_code`` says. Defined here and nowhere else."""

    PASSED = 0  # every compared output passed
    MISMATCH = 1  # at least one output mismatched, or --validate found NaN/Inf, or nothing was compared
    USAGE = 2  # bad usage or input, found before any inference
    BACKEND_FAILED = 3  # a backend failed (error, crash, timeout); the others were still compared
    INTERNAL = 4  # a bug or an environment cmpx did not foresee: never read as a verdict
    NOT_REPRODUCED = 5  # cmpx reduce wrote a subgraph that does not fail by itself (against the saved outputs)
    INFRASTRUCTURE = 6  # cmpx sweep: the cluster failed (head lost; a cell's node, worker or memory past its retries)
    INTERRUPTED = 130  # Ctrl-C, SIGTERM or SIGHUP: workers stopped, shared memory released


class CmpxError(Exception):
    """Base of every error cmpx raises on purpose."""

    exit_code = ExitCode.INTERNAL


class UsageError(CmpxError):
    """Something the user typed or gave is wrong; found before any inference (exit 2)."""

    exit_code = ExitCode.USAGE


class ModelError(UsageError):
    """The model file is missing, unreadable or not a model cmpx can use (exit 2)."""


class PluginError(UsageError):
    """A plugin failed to load, registered something invalid, clashes with another plugin, or an essential plugin
    was blocked (exit 2 when the run needs it)."""


class LimitReached(CmpxError):
    """A limit of the machine stops the run: /dev/shm full, memory, open files (exit 2 in the coordinator; in a
    worker it is that backend's failure, exit 3). The message names the limit, what was needed and what is left."""

    exit_code = ExitCode.USAGE


class OutputFailed(CmpxError):
    """A report or saved run could not be written (full or read-only disk...); the message says what was kept
    (exit 2)."""

    exit_code = ExitCode.USAGE


class ClusterLost(CmpxError):
    """The sweep lost its Ray cluster (its head stopped answering): the cells that finished are kept and summarized,
    the others are not run (exit 6, never a verdict)."""

    exit_code = ExitCode.INFRASTRUCTURE


class ProtocolError(CmpxError):
    """A worker sent something that is not a valid frame or message (reported as that backend's failure)."""


class BackendFailed(CmpxError):
    """A backend failed in its worker: an exception, a crash, a timeout or a protocol error (exit 3).

    ``backend`` is the backend's run name, ``phase`` one of start/load/infer/close (or transform). ``kind`` is
    how it failed, decided by the class that is raised where the failure happens and read by every report and
    by ``cmpx reduce``: ``error`` (the backend raised, or refused), ``protocol`` (BackendProtocolError),
    ``crash`` (BackendCrashed), ``timeout`` (BackendTimeout).
    """

    exit_code = ExitCode.BACKEND_FAILED
    kind = "error"

    def __init__(self, backend: str, phase: str, message: str):
        super().__init__(f"{backend} failed during {phase}: {message}")
        self.backend = backend
        self.phase = phase
        self.detail = message

    @property
    def how(self) -> str:
        """How it failed, in a word or two: its kind (a crash by a signal says the signal)."""
        return self.kind

    def record(self) -> dict[str, Any]:
        """The failure as data, as the --report-json document holds it under its backend: ``phase``, ``message``,
        ``kind``, what that kind knows more (a crash's exit code, signal and stderr; a timeout's seconds), and
        the worker's traceback when there is one."""
        record: dict[str, Any] = {"phase": self.phase, "message": self.detail, "kind": self.kind,
                                  **self._particulars()}
        if self.__cause__ is not None:
            record["remote_traceback"] = str(self.__cause__)
        return record

    def _particulars(self) -> dict[str, Any]:
        return {}


class BackendProtocolError(BackendFailed):
    """A worker broke the protocol: a bad, truncated or unexpected frame (the frame's ProtocolError says which),
    or a reply that does not say what it must."""

    kind = "protocol"

    def __init__(self, backend: str, phase: str, message: str):
        super().__init__(backend, phase, f"protocol error: {message}")


class RemoteTraceback(Exception):
    """Carries the formatted traceback of an exception raised inside a worker."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return self.text


class BackendCrashed(BackendFailed):
    """The worker process died without saying goodbye (signal or exit code)."""

    kind = "crash"

    def __init__(self, backend: str, phase: str, *, exit_code: int | None, signal_name: str | None,
                 stderr_tail: str):
        how = f"killed by {signal_name}" if signal_name else f"exited with code {exit_code}"
        super().__init__(backend, phase, f"worker {how}")
        self.worker_exit_code = exit_code
        self.signal_name = signal_name
        self.stderr_tail = stderr_tail

    @property
    def how(self) -> str:
        return f"signal {self.signal_name}" if self.signal_name else self.kind

    def _particulars(self) -> dict[str, Any]:
        return {"exit_code": self.worker_exit_code, "signal": self.signal_name, "stderr_tail": self.stderr_tail}


class BackendTimeout(BackendFailed):
    """The worker did not answer within the deadline and was stopped."""

    kind = "timeout"

    def __init__(self, backend: str, phase: str, seconds: float):
        limit = "the limit for starting a worker" if phase == "start" else "--timeout"
        super().__init__(backend, phase, f"no answer within {seconds:g} s ({limit}); worker stopped")
        self.seconds = seconds

    def _particulars(self) -> dict[str, Any]:
        return {"seconds": self.seconds}


def exit_code_of(exc: BaseException) -> ExitCode:
    """The exit code an exception stands for; anything cmpx did not raise on purpose is INTERNAL."""
    code: Any = getattr(exc, "exit_code", None)
    return code if isinstance(code, ExitCode) else ExitCode.INTERNAL


def bounded(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters, keeping its head and tail and saying how much was cut: an error
    message can be tens of megabytes (the reference evaluator prints whole tensors)."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}\n[... {len(text) - 2 * keep} characters cut ...]\n{text[-keep:]}"


_LOCATION = re.compile(r"^(?P<prefix>(?:(?:[^:]|:(?! ))*?: )*?)(?:Exception from |Check '.*' failed at )?"
                       r"[\w./\\-]+\.(?:cpp|cc|cxx|c|h|hpp|py):\d+:?\s*$")


_REASON = re.compile(r"not support|[Nn]o conversion rule|[Uu]nsupported|not implemented|cannot|could not")


def telling_line(text: str) -> str:
    """The line of an error message that says what went wrong, for a one-line summary: the first line, unless it
    only says where in a framework's source the error was raised (OpenVINO's ``Exception from
    src/inference/src/cpp/core.cpp:105:``, ``Check '...' failed at ...cpp:207:``); then the first line after it
    that says something, after what the first line said before the location (``openvino failed during load:
    RuntimeError: OpenVINO does not support ...``)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    first = _LOCATION.match(lines[0])
    if not first:
        return lines[0]
    said = [line.lstrip("- ") for line in lines[1:] if not _LOCATION.match(line)]
    reason = next((line for line in said if _REASON.search(line)), None) or next(
        (line for line in said if not line.endswith(":")), None) or next(iter(said), None)
    return lines[0] if reason is None else first.group("prefix") + reason
