"""Start backend workers and wait for their answers, seeing a death the moment it happens.

Each worker is a fresh interpreter (``python -m cmpx.transport.worker``; another Python for ``--backend NAME@PYTHON``,
see cmpx.transport.foreign), never a fork of the coordinator, in its own session so that Ctrl-C reaches only the coordinator, which then stops the workers itself. The coordinator
waits on every worker's pipe and process descriptor (pidfd) at once with one selector, so a crash is noticed
when it happens, not at the next poll; each request has its own deadline.
"""

from __future__ import annotations

import errno
import itertools
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Literal

from cmpx.errors import (BackendCrashed, BackendFailed, BackendProtocolError, BackendTimeout, ProtocolError,
                         RemoteTraceback)
from cmpx.transport import protocol
from cmpx.transport.foreign import worker_command
from cmpx.transport.forking import ForkedProcess
from cmpx.transport.messages import Load, Setup, ToWorker
from cmpx.transport.worker import CANNOT_START, CANNOT_START_PREFIX

if TYPE_CHECKING:
    from cmpx.plan import BackendPlan
    from cmpx.plugin.manager import PluginSettings

KILL_GRACE_SECONDS = 2.0
PROGRESS_TICK_SECONDS = 0.25
STDERR_TAIL_BYTES = 4096
STDERR_TAIL_LINES = 12


@dataclass
class Worker:
    """The coordinator's handle on one backend worker process."""

    name: str
    process: subprocess.Popen | ForkedProcess
    to_worker: int
    from_worker: int
    log: IO[bytes]  # the temporary file holding the worker's stdout and stderr
    pidfd: int | None  # None until known for a forked worker (see ``watch``), or where pidfd_open is missing
    decoder: protocol.FrameDecoder = field(default_factory=protocol.FrameDecoder)
    inbox: list[dict[str, Any]] = field(default_factory=list)
    status: str = ""  # the backend's latest progress text while a request is pending
    failure: BackendFailed | None = None
    python: str | None = None  # another Python than the coordinator's (--backend NAME@PYTHON)
    code_dir: str | None = None  # where the coordinator linked its worker code for that Python
    eof: bool = False  # the worker closed its end of the pipe
    exited: bool = False  # its process descriptor reported the exit
    closed: bool = False
    watched: bool = False  # a forked worker's process descriptor was looked for (``watch``)
    _ids: Any = field(default_factory=lambda: itertools.count(1))

    def next_id(self) -> int:
        return next(self._ids)

    @property
    def alive(self) -> bool:
        return self.failure is None and not self.closed

    def stderr_tail(self) -> str:
        fd = self.log.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, STDERR_TAIL_BYTES, max(0, size - STDERR_TAIL_BYTES))
        lines = data.decode("utf-8", "replace").splitlines()
        return "\n".join(lines[-STDERR_TAIL_LINES:])

    def stderr_text(self) -> str:
        fd = self.log.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8", "replace")


def spawn_worker(env: dict[str, str] | None = None, python: str | None = None, code_dir: str | None = None) -> Worker:
    """Start one worker process that does not know its backend yet (see ``assign``): under this Python, or under
    ``python`` with the worker code linked into ``code_dir`` (cmpx.transport.foreign). Must run on the main thread
    (the worker dies with the thread that forked it)."""
    child_in, parent_out = os.pipe()
    parent_in, child_out = os.pipe()
    log = tempfile.TemporaryFile(prefix="cmpx-worker-")
    fds = [str(child_in), str(child_out), str(os.getpid())]
    command = ([sys.executable, "-m", "cmpx.transport.worker", *fds] if python is None
               else worker_command(python, code_dir or "", fds))
    try:
        process = subprocess.Popen(command, pass_fds=(child_in, child_out), stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=log, start_new_session=True, env=env, close_fds=True)
    except BaseException:
        for fd in (child_in, parent_out, parent_in, child_out):
            os.close(fd)
        log.close()
        raise
    os.close(child_in)
    os.close(child_out)
    os.set_blocking(parent_in, False)
    pidfd = None
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(process.pid)
        except OSError:
            pidfd = None
    return Worker("", process, parent_out, parent_in, log, pidfd, python=python, code_dir=code_dir)


def watch(worker: Worker) -> int | None:
    """The worker's process descriptor, opened on first use for a forked worker (waiting for its fork). Raises the
    fork server's ForkFailed where it ran out of processes or memory (another failure: the worker is gone)."""
    if worker.pidfd is None and isinstance(worker.process, ForkedProcess) and not worker.watched:
        worker.watched = True
        pid = worker.process.pid
        error = worker.process.fork_error
        if error is not None and error.errno in (errno.EAGAIN, errno.ENOMEM):
            raise error  # out of processes or memory: the machine's limit, as when spawning fails
        if pid is not None and hasattr(os, "pidfd_open"):
            try:
                worker.pidfd = os.pidfd_open(pid)
            except OSError:
                worker.pidfd = None
    return worker.pidfd


def assign(worker: Worker, backend: BackendPlan, settings: PluginSettings) -> Worker:
    """Name the worker after its backend and send its ``setup``, so that it imports its backend now, before the
    load request."""
    worker.name = backend.name
    setup: Setup = {"op": "setup", "backend": backend.spec.name, "target": backend.spec.target,
                    "plugins": settings.to_message()}
    send(worker, setup, "start")
    return worker


def _recorded(worker: Worker) -> BackendFailed:
    """The failure of a worker that stopped: every path that stops one records why first."""
    assert worker.failure is not None, f"{worker.name} stopped without a failure recorded"
    return worker.failure


def load_request(op: Literal["load", "describe"], request_id: int, backend: BackendPlan, model: str, mark: Sequence[str]) -> Load:
    """A ``load`` (or ``describe``) request for ``backend``. Both are built here: a worker that described a model
    answers the load request for the very same fields without loading again."""
    return {"op": op, "id": request_id, "backend": backend.spec.name, "options": dict(backend.options),
            "model": model, "mark": list(mark)}


def send(worker: Worker, message: ToWorker, phase: str) -> None:
    """Send one frame; a worker that cannot take it is marked failed (never raises for that)."""
    if not worker.alive:
        return
    try:
        protocol.write_frame(worker.to_worker, message)
    except OSError:  # broken pipe: it is dead or dying
        _fail_dead(worker, phase)


def wait_replies(workers: Iterable[Worker], expect: str, phase: str, timeout: float | Mapping[str, float],
                 request_ids: dict[str, int] | None = None,
                 on_wait: Callable[[list[str], float, dict[str, str]], None] | None = None,
                 ) -> dict[str, dict[str, Any] | BackendFailed]:
    """Wait until each worker answers with op ``expect`` (or fails); return name -> message or error.

    ``timeout`` is in seconds, for all workers or per worker name. A worker that dies, sends an ``error``,
    breaks the protocol or misses its deadline gets a BackendFailed (and is stopped); the others are still
    waited for. ``on_wait(pending names, seconds elapsed, {name: the backend's progress text})`` is called about
    every 0.25 s while waiting, and whenever a backend reports progress.
    """
    workers = list(workers)
    pending = {w.name: w for w in workers if w.alive}
    results: dict[str, dict[str, Any] | BackendFailed] = {w.name: _recorded(w) for w in workers if not w.alive}
    started = time.monotonic()
    limits = {name: timeout if isinstance(timeout, (int, float)) else timeout[name] for name in pending}
    selector = selectors.DefaultSelector()
    for worker in pending.values():
        selector.register(worker.from_worker, selectors.EVENT_READ, (worker, "pipe", phase))
        pidfd = watch(worker)
        if pidfd is not None and not worker.exited:
            selector.register(pidfd, selectors.EVENT_READ, (worker, "exit", phase))
    drained = False
    try:
        while pending:
            for name, worker in list(pending.items()):
                reply = _take_reply(worker, expect, phase, (request_ids or {}).get(name))
                if reply is None and worker.failure is None and (worker.eof or worker.exited):
                    _fail_dead(worker, phase)
                if reply is not None or worker.failure is not None:
                    results[name] = reply if reply is not None else _recorded(worker)
                    worker.status = ""
                    _unregister(selector, pending.pop(name))
            if not pending:
                break
            now = time.monotonic()
            late = [name for name in pending if now - started >= limits[name]]
            if late and not drained:
                # Past a deadline: first read whatever is ready. A coordinator that was stopped (SIGSTOP, a laptop
                # asleep) finds its workers' answers waiting, and they are answers, not timeouts.
                for key, _ in selector.select(0):
                    _on_ready(selector, key)
                drained = True
                continue
            drained = False
            for name in late:
                _fail_late(pending[name], phase, limits[name])
                results[name] = _recorded(pending[name])
                _unregister(selector, pending.pop(name))
            if not pending:
                break
            remaining = min(started + limits[name] for name in pending) - now
            if on_wait is not None:
                on_wait(sorted(pending), now - started, {n: w.status for n, w in pending.items() if w.status})
                remaining = min(remaining, PROGRESS_TICK_SECONDS)
            for key, _ in selector.select(max(remaining, 0)):
                _on_ready(selector, key)
    finally:
        selector.close()
    return results


def _on_ready(selector: selectors.BaseSelector, key: selectors.SelectorKey) -> None:
    worker, kind, phase = key.data
    if kind == "exit":
        worker.exited = True
        selector.unregister(key.fd)
    _read_available(worker, phase)


def _fail_late(worker: Worker, phase: str, seconds: float) -> None:
    """Past its deadline: stop it; a frame left half-written is a protocol error, anything else a timeout."""
    stop(worker)
    if worker.decoder.pending:
        worker.failure = BackendProtocolError(worker.name, phase, f"truncated frame ({worker.decoder.pending} bytes, "
                                                                  f"then nothing for {seconds:g} s); worker stopped")
    else:
        worker.failure = BackendTimeout(worker.name, phase, seconds)


def _take_reply(worker: Worker, expect: str, phase: str, request_id: int | None) -> Any:
    for index, message in enumerate(worker.inbox):
        if request_id is not None and message.get("id") not in (None, request_id):
            continue
        if message["op"] == expect:
            reply = worker.inbox.pop(index)
            if expect == "hello" and reply.get("protocol") != protocol.PROTOCOL_VERSION:
                stop(worker)
                worker.failure = BackendFailed(worker.name, phase, _protocol_mismatch(worker, reply))
                return worker.failure
            return reply
        if message["op"] == "error":
            worker.inbox.pop(index)
            error = BackendFailed(worker.name, phase, f"{message.get('type')}: {message.get('message')}")
            error.__cause__ = RemoteTraceback(message.get("traceback") or "")
            return error
    return None


def _protocol_mismatch(worker: Worker, hello: dict[str, Any]) -> str:
    from cmpx._version import __version__

    installed = f"cmpx {hello['cmpx_version']}" if isinstance(hello.get("cmpx_version"), str) else "another cmpx"
    where = f"{worker.python} has {installed} installed" if worker.python else "the worker's Python has another " \
                                                                                 "cmpx installed"
    fix = (f"install cmpx {__version__} there, or uninstall it there and cmpx links its own worker code"
           if worker.python else "run the same cmpx version in both")
    return (f"its worker speaks cmpx protocol {hello.get('protocol')!r} and this coordinator protocol "
            f"{protocol.PROTOCOL_VERSION} ({where}); {fix}")


def _read_available(worker: Worker, phase: str) -> None:
    """Read whatever the worker has written, without blocking; note EOF; a bad frame fails the worker."""
    while not worker.eof:
        try:
            data = os.read(worker.from_worker, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            worker.eof = True
            return
        try:
            for message in worker.decoder.feed(data):
                if message["op"] == "progress":
                    worker.status = str(message.get("text", ""))
                else:
                    worker.inbox.append(message)
        except ProtocolError as exc:
            stop(worker)
            worker.failure = BackendProtocolError(worker.name, phase, str(exc))
            return


def _fail_dead(worker: Worker, phase: str) -> None:
    """The worker's pipe closed or its process exited without answering: reap it and say how it died."""
    process = worker.process
    try:
        process.wait(timeout=KILL_GRACE_SECONDS)
    except subprocess.TimeoutExpired:  # pipe closed but the process lingers: end it
        stop(worker)
    code = process.returncode
    reason = _cannot_start_reason(worker) if code == CANNOT_START else None
    if reason:  # its Python cannot run the worker: one line says why (cmpx.transport.worker.__main__)
        worker.failure = BackendFailed(worker.name, phase, reason)
        return
    if code == 0 and worker.decoder.pending:
        worker.failure = BackendProtocolError(worker.name, phase, "truncated frame before end of stream")
        return
    signal_name = None
    if code is not None and code < 0:
        try:
            signal_name = signal.Signals(-code).name
        except ValueError:
            signal_name = f"signal {-code}"
    worker.failure = BackendCrashed(worker.name, phase, exit_code=code, signal_name=signal_name,
                                    stderr_tail=worker.stderr_tail())


def _cannot_start_reason(worker: Worker) -> str | None:
    lines = [line for line in worker.stderr_tail().splitlines() if line.startswith(CANNOT_START_PREFIX)]
    return lines[-1][len(CANNOT_START_PREFIX):] if lines else None


def _unregister(selector: selectors.BaseSelector, worker: Worker) -> None:
    for fd in (worker.from_worker, worker.pidfd):
        if fd is not None:
            try:
                selector.unregister(fd)
            except (KeyError, ValueError):
                pass


def stop(worker: Worker, grace: float = KILL_GRACE_SECONDS) -> None:
    """Terminate the worker, then kill it if it has not exited after ``grace`` seconds."""
    process = worker.process
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def release(worker: Worker) -> None:
    """Stop the process if needed, end whatever it forked, close every descriptor (see ``release_all``)."""
    release_all([worker])


def release_all(workers: Iterable[Worker]) -> None:
    """Stop every worker: SIGTERM to all at once, SIGKILL to those still alive after one shared grace period;
    then SIGKILL each one's process group (a framework may fork helpers that would outlive it) and close every
    descriptor the coordinator holds for it. An interrupt during the grace (a second Ctrl-C) ends the grace: the
    rest are killed at once and cleaned up all the same before the interrupt goes on. Releasing twice is
    harmless."""
    workers = [w for w in workers if not w.closed]
    interrupted: BaseException | None = None
    for worker in workers:
        if worker.process.poll() is None:
            worker.process.terminate()
    deadline = time.monotonic() + KILL_GRACE_SECONDS
    for worker in workers:
        process = worker.process
        try:
            if interrupted is None:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        except KeyboardInterrupt as exc:
            interrupted = exc
        if process.poll() is None:
            process.kill()
    for worker in workers:
        try:
            worker.process.wait(timeout=KILL_GRACE_SECONDS)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            pass
        pid = worker.process.pid
        try:
            if pid is not None and pid > 0:
                os.killpg(pid, signal.SIGKILL)  # the worker leads its own session and process group
        except (ProcessLookupError, PermissionError):
            pass
        for fd in (worker.to_worker, worker.from_worker, worker.pidfd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        worker.log.close()
        worker.closed = True
    if interrupted is not None:
        raise interrupted
