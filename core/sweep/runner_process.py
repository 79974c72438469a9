"""The sweep's handle on one runner process (cmpx.sweep.runner): start it, hand it cells, read their outcomes, stop
it. Runners are started from the main thread (they die with the thread that started them)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from typing import IO, Any

from cmpx.errors import ExitCode
from cmpx.sweep.outcome import CellOutcome
from cmpx.transport.idle_threads import quiet_idle_threads

LOG_TAIL_BYTES = 4096


class RunnerProcess:
    """One runner. ``results`` is readable when an outcome (or the end of the process) is there."""

    def __init__(self) -> None:
        read_end, write_end = os.pipe()
        self.log = tempfile.TemporaryFile(prefix="cmpx-sweep-runner-")
        env = dict(os.environ)
        quiet_idle_threads(env)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "cmpx.sweep.runner", str(write_end), str(os.getpid())],
                pass_fds=(write_end,), stdin=subprocess.PIPE, stdout=self.log, stderr=self.log,
                start_new_session=True, env=env, text=True)
        except BaseException:
            os.close(read_end)
            self.log.close()
            raise
        finally:
            os.close(write_end)
        self.results = os.fdopen(read_end, "r", encoding="utf-8")
        self.stdin: IO[str] = self.process.stdin  # type: ignore[assignment]  # stdin=PIPE: typeshed cannot tell
        self.task: dict[str, Any] | None = None  # the cell under way
        self.interrupted = False

    def fileno(self) -> int:
        return self.results.fileno()

    def submit(self, task: dict[str, Any]) -> None:
        self.task = task
        try:
            self.stdin.write(json.dumps(task) + "\n")
            self.stdin.flush()
        except OSError:
            pass  # it died: its results end, and ``outcome`` says how

    def outcome(self) -> CellOutcome:
        """The outcome of the cell under way; call when ``results`` is readable. A runner that died instead
        gives an internal-error outcome that says how, with the end of its log."""
        line = self.results.readline()
        self.task = None
        if line.endswith("\n"):
            return CellOutcome.from_dict(json.loads(line))
        code = self.process.wait()
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        tail = self._log_tail()
        return CellOutcome(ExitCode.INTERNAL, failure=f"the process running this cell {how}", log=tail,
                           pid=self.process.pid)

    def run(self, task: dict[str, Any]) -> CellOutcome:
        """Run one cell and wait for its outcome."""
        self.submit(task)
        return self.outcome()

    def interrupt(self) -> None:
        """Interrupt the cell under way (its run stops its workers and answers), once."""
        if self.task is not None and not self.interrupted and self.process.poll() is None:
            self.interrupted = True
            self.process.send_signal(signal.SIGTERM)

    def stop(self, grace: float = 10.0) -> None:
        """End the runner: no more cells (it exits when idle), then SIGKILL after ``grace`` seconds."""
        try:
            self.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.results.close()
        self.log.close()

    def _log_tail(self) -> str:
        fd = self.log.fileno()
        size = os.fstat(fd).st_size
        return os.pread(fd, LOG_TAIL_BYTES, max(0, size - LOG_TAIL_BYTES)).decode("utf-8", "replace")
