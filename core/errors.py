"""The exceptions cmpx raises. The CLI boundary turns them into messages and exit codes."""

from __future__ import annotations


class CmpxError(Exception):
    """Base of every error cmpx raises on purpose."""


class UsageError(CmpxError):
    """Something the user typed is wrong; found before any inference (exit 2)."""


class ModelError(UsageError):
    """The model file is missing, unreadable or not a model cmpx can use (exit 2)."""


class PluginError(CmpxError):
    """A plugin failed to load, registered something invalid, or clashes with another plugin."""


class ProtocolError(CmpxError):
    """A worker sent something that is not a valid frame or message."""


class BackendError(CmpxError):
    """A backend failed in its worker: an exception, a crash, a timeout or a protocol error.

    ``backend`` is the backend's run name, ``phase`` one of start/load/infer/close.
    """

    def __init__(self, backend: str, phase: str, message: str):
        super().__init__(f"{backend} failed during {phase}: {message}")
        self.backend = backend
        self.phase = phase
        self.detail = message


class RemoteTraceback(Exception):
    """Carries the formatted traceback of an exception raised inside a worker."""

    def __init__(self, text: str):
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return self.text


class BackendCrashed(BackendError):
    """The worker process died without saying goodbye (signal or exit code)."""

    def __init__(self, backend: str, phase: str, *, exit_code: int | None, signal_name: str | None,
                 stderr_tail: str):
        how = f"killed by {signal_name}" if signal_name else f"exited with code {exit_code}"
        super().__init__(backend, phase, f"worker {how}")
        self.exit_code = exit_code
        self.signal_name = signal_name
        self.stderr_tail = stderr_tail


class BackendTimeout(BackendError):
    """The worker did not answer within the deadline and was stopped."""

    def __init__(self, backend: str, phase: str, seconds: float):
        super().__init__(backend, phase, f"no answer within {seconds:g} s (--timeout); worker stopped")
        self.seconds = seconds
