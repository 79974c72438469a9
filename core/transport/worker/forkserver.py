"""The fork server: ``python -m cmpx.transport.worker.forkserver PARENT_PID SOCKET_FD``.

Starting a worker as a fresh interpreter costs about 0.25 s of CPU (the interpreter, numpy, msgpack, then the
framework), which a run with several backends, and ``cmpx reduce`` or ``cmpx precision`` with their dozens of
candidate runs, pay again for every worker. This process pays it once: it imports what every worker imports, and
on request the module of a backend whose descriptor says it may be imported before a fork (``forkable``), then
forks one worker per request. A forked worker runs the very loop of a spawned one (cmpx.transport.worker.main) in
a session of its own, with its pipes and its log passed over the socket, and dies with this process, which dies
with its coordinator. This process reaps its workers and sends each exit status back, as the coordinator cannot
wait for processes that are not its children.

Requests (one JSON object per datagram, on a SOCK_SEQPACKET socket, each answered in order): ``{"op": "fork",
"id": N, "cwd": DIR, "env": {...}}`` (the coordinator's working directory; ``env`` only where the worker's
environment is not this process's) with three descriptors (the worker's request pipe, its reply pipe, its log), answered ``{"op": "forked",
"id": N, "pid": P}`` or ``{"op": "failed", "id": N, "error": TEXT}``; ``{"op": "preload", "id": N, "target":
"module:Class"}``, answered ``{"op": "preloaded", "id": N}`` whether or not the import worked (a worker that
imports it again reports the failure). Unasked: ``{"op": "ready"}`` once the imports are done, and ``{"op": "exit",
"pid": P, "code": C}`` for each worker that ended (C as ``subprocess.Popen.returncode``: minus the signal that
killed it). When the coordinator closes the socket, this process waits for its workers to end, then exits.
"""

import json
import os
import select
import signal
import socket
import sys
import traceback

WORKER_NAME = b"cmpx-worker"  # /proc/PID/comm of a forked worker (its command line is this server's)
SERVER_NAME = b"cmpx-forkserver"
_PR_SET_NAME = 15


def main(argv):
    parent_pid, sock_fd = int(argv[0]), int(argv[1])
    from cmpx.transport.worker.parent_watch import die_with_parent

    die_with_parent(parent_pid)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _set_name(SERVER_NAME)
    sock = socket.socket(fileno=sock_fd)
    import numpy  # noqa: F401  what every worker imports, once
    from cmpx.transport.worker import main as worker

    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    children: set[int] = set()
    _send(sock, {"op": "ready"})
    while True:
        ready = select.select([sock.fileno(), wake_read], [], [])[0]
        if wake_read in ready:
            _drain(wake_read)
        _reap(sock, children)
        if sock.fileno() not in ready:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 8)
        except OSError:
            data, fds = b"", []
        if not data:  # the coordinator closed the socket: wait for the workers it still has, then end
            for fd in fds:
                os.close(fd)
            _wait_all(sock, children)
            return 0
        request = json.loads(data)
        if request["op"] == "preload":
            _preload(request.get("target", ""))
            _send(sock, {"op": "preloaded", "id": request["id"]})
        elif request["op"] == "fork":
            _send(sock, _fork(request, fds, worker.main, (sock.fileno(), wake_read, wake_write), children))


def _fork(request, fds, worker_main, own_fds, children):
    request_id = request["id"]
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return {"op": "failed", "id": request_id, "error": f"expected 3 descriptors, got {len(fds)}"}
    fd_in, fd_out, log = fds
    server_pid = os.getpid()  # the child's parent, taken before the fork: if this process dies before the child
    try:                      # asks for its parent-death signal, the child sees its parent changed and exits
        pid = os.fork()
    except OSError as exc:
        os.write(log, f"cmpx: the fork server could not fork a worker: {exc}\n".encode())
        for fd in fds:
            os.close(fd)
        return {"op": "failed", "id": request_id, "error": str(exc), "errno": exc.errno}
    if pid == 0:
        _become_worker(fd_in, fd_out, log, worker_main, own_fds, request, server_pid)
    children.add(pid)
    for fd in fds:
        os.close(fd)
    return {"op": "forked", "id": request_id, "pid": pid}


def _reseed_numpy():
    """Every forked worker would otherwise draw the server's numpy global random stream (``numpy.random.rand`` in
    a plugin's backend): the same numbers in each worker and each run, where spawned workers each seed from the
    OS. Python's own ``random`` reseeds itself after a fork; numpy does not."""
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def _become_worker(fd_in, fd_out, log, worker_main, own_fds, request, server_pid):
    """In the forked child: what a spawned worker starts with (its own session, the coordinator's working directory
    and the worker's environment, stdin from /dev/null, stdout and stderr to its log, only its pipes open), then
    the worker's loop. Never returns."""
    code = 70
    try:
        os.setsid()
        try:
            os.chdir(request.get("cwd") or ".")
        except OSError:
            pass  # a directory gone since: the worker is told absolute paths, as a spawned one would be
        env = request.get("env")
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _reseed_numpy()
        for fd in own_fds:
            os.close(fd)
        _set_name(WORKER_NAME)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        keep = {0, 1, 2, fd_in, fd_out}
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass  # the descriptor listdir itself used
        args = [str(fd_in), str(fd_out), str(server_pid)]
        sys.argv = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "__main__.py"), *args]
        sys.orig_argv = [sys.executable, "-m", "cmpx.transport.worker", *args]
        code = worker_main(args)
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _preload(target):
    import importlib

    try:
        importlib.import_module(target.split(":", 1)[0])
    except BaseException:  # the worker imports it again and reports what fails
        pass


def _reap(sock, children):
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            children.clear()
            return
        if pid == 0:
            return
        children.discard(pid)
        _send(sock, {"op": "exit", "pid": pid, "code": os.waitstatus_to_exitcode(status)})


def _wait_all(sock, children):
    while children:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue
        children.discard(pid)
        _send(sock, {"op": "exit", "pid": pid, "code": os.waitstatus_to_exitcode(status)})


def _send(sock, message):
    try:
        sock.send(json.dumps(message).encode())
    except OSError:
        pass  # the coordinator is gone: its workers die with this process


def _drain(fd):
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _set_name(name):
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(_PR_SET_NAME, ctypes.c_char_p(name), 0, 0, 0)
        except (OSError, AttributeError):
            pass


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))  # no interpreter finalization (numpy, a framework): the coordinator may wait for it
