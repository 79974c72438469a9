"""The coordinator's side of the fork server (cmpx.transport.worker.forkserver): one process that imports what
workers import once, then forks a worker per request.

``ForkServer.fork`` only sends the request: the server forks once it has done what was asked before (its own
imports, a backend's preload), while the coordinator goes on reading the model, as it does while spawned workers
import. ``ForkedProcess`` stands for the worker where a ``subprocess.Popen`` stands for a spawned one (``pid``,
``poll``, ``wait``, ``terminate``, ``kill``, ``returncode``); its exit status comes from the server, which is its
parent. A server that cannot be started or has died is ``broken``: the pool spawns workers instead.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from cmpx.transport.worker import CANNOT_START

# Variables that change from one run to the next while nothing a worker imports reads them: a test runner's name of
# the current test. A fork server serves environments that differ only in these.
PER_RUN_VARIABLES = frozenset({"PYTEST_CURRENT_TEST"})
START_SECONDS = 60.0  # the most a fork may wait for the server's imports and the preloads asked before it


class ForkServerGone(OSError):
    """The fork server did not answer (it could not start, or it died)."""


class ForkFailed(OSError):
    """The fork server could not fork a worker (errno EAGAIN: out of processes, ENOMEM: out of memory)."""

    starts_a_process = True  # an EAGAIN or ENOMEM here is a machine limit (cmpx.limits.exhausted)


class ForkServer:
    """One fork server, started at once under ``env`` (a worker's environment: a worker may be forked from it only
    for that same environment). Close it after its workers are released."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "cmpx.transport.worker.forkserver", str(os.getpid()), str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True, env=env, close_fds=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._socket = ours
        self._lock = threading.Lock()
        self._ids = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self._exits: dict[int, int] = {}
        self.preloaded: set[str] = set()
        self.broken = False

    def preload(self, target: str) -> None:
        """Have the server import ``target``'s module before its next fork (once per module; no wait)."""
        module = target.split(":", 1)[0]
        if module in self.preloaded or self.broken:
            return
        self.preloaded.add(module)
        self._request({"op": "preload", "target": target})

    def serves(self, env: dict[str, str]) -> bool:
        """Whether a worker for environment ``env`` may be forked from this server: the server's own environment,
        but for variables nothing reads before a worker's first request (PER_RUN_VARIABLES), which the forked
        worker is given."""
        if self.broken:
            return False
        names = (set(env) | set(self.env)) - PER_RUN_VARIABLES
        return all(env.get(name) == self.env.get(name) for name in names)

    def fork(self, fd_in: int, fd_out: int, log: int, env: dict[str, str] | None = None) -> ForkedProcess:
        """Ask for a worker reading requests from ``fd_in`` and writing replies to ``fd_out``, with ``log`` as its
        stdout and stderr (the descriptors are copied to the server; the caller keeps and closes its own), and
        ``env`` as its environment (one the server ``serves``; default: the server's)."""
        if self.broken:
            raise ForkServerGone("the fork server is gone")
        request: dict[str, Any] = {"op": "fork", "cwd": os.getcwd()}  # as a spawned worker's: this process's now
        if env is not None and env != self.env:
            request["env"] = env
        return ForkedProcess(self, self._request(request, (fd_in, fd_out, log)))

    def _request(self, message: dict[str, Any], fds: tuple[int, ...] = ()) -> int:
        with self._lock:
            self._ids += 1
            message["id"] = self._ids
            try:
                socket.send_fds(self._socket, [json.dumps(message).encode()], list(fds))
            except OSError as exc:
                self.broken = True
                raise ForkServerGone(f"the fork server is gone: {exc}") from exc
            return self._ids

    def reply(self, request_id: int, timeout: float = START_SECONDS) -> dict[str, Any]:
        """The server's answer to request ``request_id``, waiting up to ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while request_id not in self._replies:
            remaining = deadline - time.monotonic()
            if self.broken or remaining <= 0:
                self.broken = True
                raise ForkServerGone("the fork server did not answer")
            self._pump(remaining)
        return self._replies.pop(request_id)

    def exit_code(self, pid: int, timeout: float) -> int | None:
        """The exit status of worker ``pid`` once the server has reaped it; None if it has not within ``timeout``
        seconds. A worker of a dead server died with it (its parent-death signal): -SIGKILL."""
        deadline = time.monotonic() + timeout
        while pid not in self._exits:
            if self.broken:
                if not process_exists(pid):
                    return -signal.SIGKILL
                time.sleep(min(0.05, max(timeout, 0.0)))
                return None
            remaining = deadline - time.monotonic()
            self._pump(max(remaining, 0.0))
            if remaining <= 0:
                break
        return self._exits.get(pid)

    def _pump(self, timeout: float) -> None:
        """Read what the server sent within ``timeout`` seconds (0: only what is there)."""
        with self._lock:
            waited = False
            while True:
                ready = select.select([self._socket], [], [], 0 if waited else timeout)[0]
                if not ready:
                    return
                waited = True
                try:
                    data = self._socket.recv(1 << 16)
                except OSError:
                    data = b""
                if not data:
                    self.broken = True
                    return
                message = json.loads(data)
                if message["op"] == "exit":
                    self._exits[message["pid"]] = message["code"]
                elif "id" in message:
                    self._replies[message["id"]] = message

    def close(self, grace: float = 5.0) -> None:
        """Close the socket; the server waits for its workers (release them first), then exits. One that has not
        exited after ``grace`` seconds is killed, and its workers with it. ``grace`` 0: do not wait (a process about
        to exit: the server ends by itself, or with this process)."""
        self.broken = True
        try:
            self._socket.close()
        finally:
            if grace > 0:
                try:
                    self.process.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()


class ForkServers:
    """Fork servers by worker environment, each started on first use, for a process that runs one run after another
    whose environments may differ (a sweep's runner: a cell's ``threads``; ``cmpx.run(..., fork_servers=)`` in a
    loop). Past ``limit`` environments there is no server for a new one (None: its workers are spawned). A context
    manager: the servers are closed at its end."""

    def __init__(self, limit: int = 2):
        self.limit = limit
        self._servers: list[ForkServer] = []

    def for_environment(self, env: dict[str, str]) -> ForkServer | None:
        for server in self._servers:
            if server.serves(env):
                return server
        self._servers = [server for server in self._servers if not server.broken]
        if len(self._servers) >= self.limit:
            return None
        try:
            server = ForkServer(env)
        except OSError:
            return None
        self._servers.append(server)
        return server

    def close(self) -> None:
        """Close every server (after the runs that used them ended)."""
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()

    def __enter__(self) -> ForkServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ForkedProcess:
    """A worker forked by a ForkServer, with the part of ``subprocess.Popen``'s interface the supervisor uses. Its
    ``pid`` is known once the server answered the fork request (reading it waits for that); a fork that failed
    leaves ``pid`` None and ``returncode`` CANNOT_START (the reason is in the worker's log)."""

    def __init__(self, server: ForkServer, request_id: int):
        self.server = server
        self.args = f"a worker forked by the fork server {server.process.pid}"
        self.returncode: int | None = None
        self._request: int | None = request_id
        self._pid: int | None = None
        self._pidfd: int | None = None
        self.fork_error: ForkFailed | None = None  # why the server could not fork it

    @property
    def pid(self) -> int | None:
        if self._request is not None:
            request, self._request = self._request, None
            try:
                reply = self.server.reply(request)
            except ForkServerGone:
                reply = {"op": "failed"}
            if reply["op"] == "forked":
                self._pid = int(reply["pid"])
                try:
                    self._pidfd = os.pidfd_open(self._pid)
                except (OSError, AttributeError):
                    self._pidfd = None
            else:
                self.returncode = CANNOT_START
                self.fork_error = ForkFailed(reply.get("errno") or 0, reply.get("error") or "the fork server is gone")
        return self._pid

    def poll(self) -> int | None:
        if self.returncode is None and self.pid is not None:
            self.returncode = self.server.exit_code(self.pid, 0.0)
            if self.returncode is not None:
                self._close_pidfd()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            remaining = 0.5 if deadline is None else min(0.5, deadline - time.monotonic())
            if remaining <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            assert self.pid is not None
            self.server.exit_code(self.pid, remaining)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is not None or self.pid is None:
            return
        try:
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signum)
            else:
                os.kill(self.pid, signum)
        except ProcessLookupError:
            pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _close_pidfd(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    def __del__(self) -> None:
        self._close_pidfd()


def process_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user counts as existing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
