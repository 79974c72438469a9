"""Workers forked from a fork server (cmpx.transport.worker.forkserver) are workers like spawned ones: they run their
backends, are found by the leak checks, die by the signal that killed them and say so, die with the server, and
are never forked for another environment or with a framework that is not declared forkable imported."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from cmpx.errors import BackendCrashed
from cmpx.plugin.manager import PluginSettings, make_plugin_manager
from cmpx.testing.leaks import fork_servers, orphaned_workers, settled, worker_processes
from cmpx.transport import supervisor
from cmpx.transport.forking import ForkedProcess, ForkServer
from cmpx.transport.pool import WorkerPool, release_workers, worker_environment

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = str(REPO / "examples" / "models" / "conv.onnx")


def _backends(*names: str, plugins=()) -> list[SimpleNamespace]:
    manager = make_plugin_manager(extra=list(plugins))
    return [SimpleNamespace(name=f"{name}#{i}", spec=manager.backends.get(name), python=None)
            for i, name in enumerate(names)]


def _load(workers, model=EXAMPLE, timeout=60):
    ids = {}
    for worker in workers.values():
        ids[worker.name] = worker.next_id()
        supervisor.send(worker, {"op": "load", "id": ids[worker.name], "backend": worker.name.split("#")[0],
                                 "options": {}, "model": model, "mark": []}, "load")
    return supervisor.wait_replies(workers.values(), "ready", "load", timeout, ids)


def _comm(pid: int) -> str:
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


@pytest.fixture
def server():
    server = ForkServer(worker_environment())
    yield server
    server.close()
    assert server.process.pid not in fork_servers()  # (the suite's own server, for in-process runs, stays)


def test_forked_workers_run_their_backends_with_the_framework_imported_once(server):
    workers = WorkerPool(server=server).assign(_backends("onnxrt", "onnxref", "onnxrt"), PluginSettings())
    try:
        assert all(isinstance(w.process, ForkedProcess) for w in workers.values())
        replies = _load(workers)
        assert all(isinstance(r, dict) and r["op"] == "ready" for r in replies.values()), replies
        pids = sorted(w.process.pid for w in workers.values())
        assert worker_processes() == pids  # the leak checks find them like spawned ones
        assert {_comm(pid) for pid in pids} == {"cmpx-worker"}
        assert server.preloaded == {"cmpx_onnxrt.backend", "cmpx_onnxref.backend"}
        assert server.process.pid in fork_servers()
    finally:
        release_workers(workers)
    assert settled(worker_processes) == []
    assert all(w.process.returncode is not None for w in workers.values())


def test_a_forked_worker_killed_by_a_signal_is_reported_by_that_signal(server):
    workers = WorkerPool(server=server).assign(_backends("onnxrt"), PluginSettings())
    try:
        (worker,) = workers.values()
        assert _load(workers)["onnxrt#0"]["op"] == "ready"
        os.kill(worker.process.pid, signal.SIGSEGV)
        supervisor.send(worker, {"op": "infer", "id": worker.next_id(), "inputs": {}}, "infer")
        failure = supervisor.wait_replies([worker], "result", "infer", 30)["onnxrt#0"]
        assert isinstance(failure, BackendCrashed) and failure.signal_name == "SIGSEGV", failure
        assert worker.process.returncode == -signal.SIGSEGV
    finally:
        release_workers(workers)


def test_a_backend_not_declared_forkable_is_imported_after_the_fork_not_in_the_server(server):
    workers = WorkerPool(server=server).assign(_backends("faulty", plugins=["cmpx_test_faulty"]),
                                               PluginSettings.from_cli(["cmpx_test_faulty"]))
    try:
        assert isinstance(workers["faulty#0"].process, ForkedProcess)
        assert _load(workers)["faulty#0"]["op"] == "ready"
        assert server.preloaded == set()
    finally:
        release_workers(workers)


def test_another_environment_gets_a_spawned_worker(server):
    pool = WorkerPool(env=server.env, server=server)
    os.environ["CMPX_TEST_OTHER_ENVIRONMENT"] = "1"
    try:
        workers = pool.assign(_backends("onnxrt"), PluginSettings())
    finally:
        del os.environ["CMPX_TEST_OTHER_ENVIRONMENT"]
    try:
        assert isinstance(workers["onnxrt#0"].process, subprocess.Popen)
        assert server.preloaded == set()
    finally:
        release_workers(workers)


def test_workers_die_with_their_server_and_a_dead_server_is_replaced_by_spawning(server):
    pool = WorkerPool(server=server)
    workers = pool.assign(_backends("onnxrt"), PluginSettings())
    try:
        pid = workers["onnxrt#0"].process.pid
        server.process.kill()
        server.process.wait()
        assert settled(lambda: [p for p in worker_processes() if p == pid]) == []
        failure = _load(workers, timeout=30)["onnxrt#0"]
        assert isinstance(failure, BackendCrashed) and failure.signal_name == "SIGKILL", failure
    finally:
        release_workers(workers)
    again = pool.assign(_backends("onnxrt"), PluginSettings())
    try:
        assert isinstance(again["onnxrt#0"].process, subprocess.Popen)
        assert _load(again)["onnxrt#0"]["op"] == "ready"
    finally:
        release_workers(again)


def test_a_killed_coordinator_takes_its_server_and_forked_workers_with_it(tmp_path):
    """A coordinator killed with SIGKILL runs no cleanup: its fork server dies with it, and the workers with that."""
    code = ("import sys, time\n"
            "from types import SimpleNamespace\n"
            "from cmpx.plugin.manager import PluginSettings, make_plugin_manager\n"
            "from cmpx.transport.forking import ForkServer\n"
            "from cmpx.transport.pool import WorkerPool, worker_environment\n"
            "spec = make_plugin_manager().backends.get('onnxrt')\n"
            "workers = WorkerPool(server=ForkServer(worker_environment())).assign(\n"
            "    [SimpleNamespace(name='onnxrt', spec=spec, python=None)], PluginSettings())\n"
            "print(workers['onnxrt'].process.pid, flush=True)\n"
            "time.sleep(60)\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        worker = int(process.stdout.readline())
        deadline = time.monotonic() + 30
        while worker not in worker_processes(process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)  # a forked worker takes its own name a moment after the fork
        assert worker in worker_processes(process.pid)
        assert len(fork_servers(process.pid)) == 1
    finally:
        process.kill()
        process.wait()
    assert settled(lambda: worker_processes(process.pid) + fork_servers(process.pid)) == []
    assert orphaned_workers() == []


def test_a_two_backend_command_forks_its_workers_and_leaves_no_server(tmp_path):
    """``cmpx run`` with two backends forks both workers from one server; nothing of it is left after the exit."""
    spy = tmp_path / "spy.txt"
    process = subprocess.Popen([sys.executable, "-m", "cmpx", "run", EXAMPLE, "--backend", "onnxrt", "--backend",
                                "onnxref", "-p", "cmpx_test_forkspy"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, env=dict(os.environ, CMPX_FORK_SPY=str(spy)))
    output = process.communicate(timeout=120)[0]
    assert process.returncode == 0, output
    assert "2 output(s), 260 element(s) compared" in output
    assert spy.read_text().split() == ["cmpx-worker", "cmpx-worker"]  # each worker's own name: both forked
    assert settled(lambda: fork_servers(process.pid) + worker_processes(process.pid)) == []


def test_a_fork_refused_for_want_of_processes_is_the_machines_limit_not_a_backend_failure(server):
    """``ulimit -u`` reached: the server's fork fails with EAGAIN (root, as here, is exempt, so the server's answer
    is the one it sends then). Waiting on that worker raises the error, which the CLI's boundary turns into exit 2
    naming the limit, as when spawning a worker fails."""
    import errno

    from cmpx.limits import exhausted
    from cmpx.transport.forking import ForkFailed
    from cmpx.transport.pool import fork_worker

    worker = fork_worker(server)
    request = worker.process._request
    worker.process.pid  # the real fork, answered
    supervisor.release(worker)
    refused = fork_worker(server)
    real = refused.process._request
    server.reply(real)  # forked after all: end it, and stand in the answer a refused fork gets
    server._replies[real] = {"op": "failed", "id": real, "error": "[Errno 11] Resource temporarily unavailable",
                             "errno": errno.EAGAIN}
    refused.process._request = real
    try:
        with pytest.raises(ForkFailed) as raised:
            supervisor.wait_replies([refused], "hello", "start", 10)
        assert exhausted(raised.value) == "processes (ulimit -u)"
        assert request is not None
    finally:
        supervisor.release(refused)


def test_the_python_api_forks_the_workers_of_many_runs_from_one_server(tmp_path):
    import cmpx

    spy, draws = tmp_path / "spy.txt", tmp_path / "draws.txt"
    os.environ["CMPX_FORK_SPY"], os.environ["CMPX_FORK_SPY_DRAWS"] = str(spy), str(draws)
    try:
        with cmpx.ForkServers() as servers:
            reports = [cmpx.run(EXAMPLE, ["onnxrt", "onnxref"], plugins=["cmpx_test_forkspy"], fork_servers=servers)
                       for _ in range(3)]
            (server,) = servers._servers
            assert server.preloaded == {"cmpx_onnxrt.backend", "cmpx_onnxref.backend"}
        assert settled(lambda: [server.process.pid] if server.process.poll() is None else []) == []
    finally:
        del os.environ["CMPX_FORK_SPY"], os.environ["CMPX_FORK_SPY_DRAWS"]
    assert [report.exit_code for report in reports] == [0, 0, 0]
    assert all(report.pairs and len(report.pairs[0].outputs) == 2 and report.pairs[0].passed for report in reports)
    assert spy.read_text().split() == ["cmpx-worker"] * 6  # every worker forked, two per run
    assert len(set(draws.read_text().split())) == 6  # each its own numpy random stream, as a spawned worker has
    assert worker_processes() == []


def test_a_forked_worker_works_in_the_coordinators_directory_of_the_moment(tmp_path, monkeypatch):
    """A sweep's runner enters each cell's directory; a spawned worker starts there, and so must a forked one,
    although its server started elsewhere: a model named relative to it is found."""
    import shutil

    import cmpx

    with cmpx.ForkServers() as servers:
        assert cmpx.run(EXAMPLE, ["onnxrt", "onnxref"], fork_servers=servers).exit_code == 0  # the server starts here
        shutil.copy(EXAMPLE, tmp_path / "here.onnx")
        monkeypatch.chdir(tmp_path)
        report = cmpx.run("here.onnx", ["onnxrt", "onnxref"], fork_servers=servers, save_outputs="saved.json")
    assert report.exit_code == 0, report.failures
    assert (tmp_path / "saved.json").is_file()
