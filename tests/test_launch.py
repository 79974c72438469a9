"""A run's workers start while the coordinator still parses its command line (spare workers, one per --backend),
become the backends' workers once the options are checked, and never outlive the run, whatever happens."""

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import cmpx

from cmpx.options.argv import prescan
from cmpx.plugin.manager import PluginSettings, make_plugin_manager
from cmpx.testing.leaks import worker_processes
from cmpx.transport import forking, supervisor
from cmpx.transport.pool import WorkerPool, release_workers, worker_environment

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = str(REPO / "examples" / "models" / "conv.onnx")


@pytest.mark.parametrize("args, expected", [
    (["run", "m.onnx", "--backend", "onnxrt", "--backend", "onnxref"], 2),
    (["-p", "plugin_module", "run", "m.onnx", "--backend=onnxrt"], 1),
    (["--debug", "run", "--backend", "a", "--backend", "b", "--backend", "c", "m.onnx"], 3),
    (["run", "m.onnx"], 0),
    (["run", "m.onnx", "--backend", "onnxrt", "--help"], 0),
    (["run", "-h", "--backend", "onnxrt"], 0),
    (["run", "m.onnx", "--backend", "onnxrt", "--", "--backend", "x"], 1),
    (["plugins"], 0),
    (["tensors", "run"], 0),
    (["-p", "run", "plugins", "--backend", "x"], 0),  # "run" is -p's value; the command is plugins
    (["--help"], 0),
    ([], 0),
    (["run", "m.onnx", "--backend", "onnxrt", "--backend", "onnxrt@/opt/ort/bin/python"], 1),  # no spare for it
    (["run", "m.onnx", "--backend=onnxrt@env:old", "--backend", "onnxref"], 1),
])
def test_the_prescan_counts_the_backends_of_a_run_command_only(args, expected):
    assert prescan(args).backends == expected


def test_the_prescan_finds_plugins_and_debug_up_to_a_double_dash():
    scan = prescan(["-p", "a", "-pb", "--plugin", "c", "--plugin=d", "--debug", "run", "--", "-p", "e", "--debug"])
    assert scan.plugin_args == ("a", "b", "c", "d") and scan.debug
    assert not prescan(["run", "--", "--debug"]).debug


def _backends(*names: str) -> list[SimpleNamespace]:
    plugins = make_plugin_manager()
    return [SimpleNamespace(name=f"{name}#{i}", spec=plugins.backends.get(name), python=None)
            for i, name in enumerate(names)]


def test_spares_become_the_backends_workers_and_run_them():
    pool = WorkerPool(2)
    started = [worker.process.pid for worker in pool._spares]
    workers = pool.assign(_backends("onnxrt", "onnxref"), PluginSettings())
    try:
        assert [worker.process.pid for worker in workers.values()] == started
        assert pool.spares == 0
        ids = {}
        for worker in workers.values():
            ids[worker.name] = worker.next_id()
            supervisor.send(worker, {"op": "load", "id": ids[worker.name], "backend": worker.name.split("#")[0],
                                     "options": {}, "model": EXAMPLE, "mark": []}, "load")
        replies = supervisor.wait_replies(workers.values(), "ready", "load", 60, ids)
        assert all(isinstance(reply, dict) and reply["op"] == "ready" for reply in replies.values()), replies
    finally:
        release_workers(workers)
    assert worker_processes() == []


def test_spares_started_with_another_environment_are_not_used_and_are_stopped():
    pool = WorkerPool(1, dict(worker_environment(), CMPX_TEST_OTHER="1"))
    spare = pool._spares[0].process.pid
    workers = pool.assign(_backends("onnxrt"), PluginSettings())
    try:
        assert [worker.process.pid for worker in workers.values()] != [spare]
        assert spare not in worker_processes()
    finally:
        release_workers(workers)
    assert worker_processes() == []


def test_a_backend_under_another_python_gets_a_fresh_worker_of_that_python_not_a_spare(tmp_path):
    pool = WorkerPool(1)
    spare = pool._spares[0].process.pid
    backend, = _backends("onnxrt")
    backend.python = sys.executable  # "another" Python that has cmpx installed: its own cmpx runs, nothing linked
    workers = pool.assign([backend], PluginSettings(), str(tmp_path))
    try:
        worker = workers[backend.name]
        assert worker.process.pid != spare and worker.python == sys.executable
        assert worker.process.args[:2] == [sys.executable, "-c"] and "cmpx.transport.worker" in worker.process.args
        assert worker_processes() == [worker.process.pid]  # found like any worker, and the spare is stopped
        hello = supervisor.wait_replies([worker], "hello", "start", 60)[backend.name]
        assert hello["python"] == sys.executable and hello["cmpx"] == os.path.dirname(cmpx.__file__)
    finally:
        release_workers(workers)
    assert worker_processes() == []


def test_spares_left_over_are_stopped_once_the_backends_have_workers():
    pool = WorkerPool(3)
    workers = pool.assign(_backends("onnxrt"), PluginSettings())
    try:
        assert worker_processes() == [workers["onnxrt#0"].process.pid]
    finally:
        release_workers(workers)


@pytest.mark.parametrize("args", [
    ["run", EXAMPLE, "--backend", "onnxrt", "--backend", "nope"],  # an unknown backend, found after spawning
    ["run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref", "--atol", "abc"],
    ["run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref", "--input-shapes", "Q:[1]"],
])
def test_a_run_refused_after_its_spares_started_leaves_no_worker(args):
    process = subprocess.Popen([sys.executable, "-m", "cmpx", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=REPO)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 2, out + err
    assert err.startswith("Error: ") and "Traceback" not in err
    assert worker_processes(process.pid) == []


def test_a_run_through_the_console_entry_passes_and_leaves_no_worker():
    process = subprocess.Popen([sys.executable, "-m", "cmpx", "run", EXAMPLE, "--backend", "onnxrt", "--backend",
                                "onnxref"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, out + err
    assert "PASSED | 1 comparison(s)" in out
    assert worker_processes(process.pid) == []


def _environ(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [entry.split(b"=", 1) for entry in f.read().split(b"\0") if b"=" in entry]
    return {key.decode(): value.decode() for key, value in pairs}


@pytest.mark.parametrize("user_value, expected", [(None, "4"), ("28", "28")])
def test_workers_quiet_idle_blas_threads_unless_the_user_chose(monkeypatch, user_value, expected):
    if user_value is None:
        monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", user_value)
    worker = supervisor.spawn_worker(worker_environment())
    try:
        # /proc/PID/environ is the new program's only once the child has exec'd: wait until the worker says hello
        assert supervisor.wait_replies([worker], "hello", "start", 60)[worker.name]["op"] == "hello"
        assert _environ(worker.process.pid)["OPENBLAS_THREAD_TIMEOUT"] == expected
    finally:
        supervisor.release(worker)


def test_the_coordinator_quiets_its_own_blas_threads_before_importing_numpy():
    probe = ("import atexit, os, sys\n"
             "atexit.register(lambda: print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'), 'numpy' in sys.modules))\n"
             "sys.argv[1:] = ['--version']\n"
             "from cmpx.cli.launch import main\n"
             "main()\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.splitlines()[-1] == "4 False"


def test_the_run_is_done_by_the_workers_started_before_plugin_discovery(tmp_path):
    spy = tmp_path / "spy.txt"
    done = subprocess.run([sys.executable, "-m", "cmpx", "-p", "cmpx_test_spy", "run", EXAMPLE, "--backend", "onnxrt",
                           "--backend", "onnxref", "--compare", "simple", "spy"], capture_output=True, text=True,
                          cwd=REPO, env=dict(os.environ, CMPX_TEST_SPY_FILE=str(spy)), timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = [line.split() for line in spy.read_text().splitlines()]
    # two backends: their fork server is already alive (importing numpy) while plugins load, and forks both workers
    assert seen[0][0] == "import" and len(seen[0]) == 2 and seen[0][1].startswith("server:"), seen
    compared = {tuple(line) for line in seen if line[0] == "compare"}
    assert len(compared) == 1 and len(next(iter(compared))) == 4 and next(iter(compared))[-1] == seen[0][1], seen


def test_the_run_of_one_backend_is_done_by_the_spare_started_before_plugin_discovery(tmp_path):
    spy = tmp_path / "spy.txt"
    done = subprocess.run([sys.executable, "-m", "cmpx", "-p", "cmpx_test_spy", "run", EXAMPLE, "--backend", "onnxrt",
                           "--load-outputs", _saved_onnxref_run(tmp_path), "--compare", "simple", "spy"],
                          capture_output=True, text=True, cwd=REPO, env=dict(os.environ, CMPX_TEST_SPY_FILE=str(spy)),
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = [line.split() for line in spy.read_text().splitlines()]
    assert seen[0][0] == "import" and len(seen[0]) == 2 and seen[0][1].isdigit(), seen  # the spare, already alive
    assert {tuple(line) for line in seen if line[0] == "compare"} == {("compare", *seen[0][1:])}


def _saved_onnxref_run(tmp_path) -> str:
    path = tmp_path / "onnxref.json"
    done = subprocess.run([sys.executable, "-m", "cmpx", "run", EXAMPLE, "--backend", "onnxref", "--backend", "onnxrt",
                           "--save-outputs", str(path)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return str(path)


@pytest.fixture
def signals_kept():
    """launch.main() in this process ignores SIGINT, SIGTERM and SIGHUP for its exit, as the console script must:
    put this test process's own handlers back, or every process a later test starts inherits SIGINT ignored (the
    sweep Ctrl-C test then failed in a full run, never alone)."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_spares_that_cannot_be_spawned_only_lose_the_head_start(monkeypatch, capsys, signals_kept):
    from cmpx.cli import launch

    real_spawn, calls = supervisor.spawn_worker, []

    def spawn_failing_first(env=None):
        calls.append(env)
        if len(calls) == 1:
            raise OSError(11, "Resource temporarily unavailable")
        return real_spawn(env)

    def no_fork_server(env):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(supervisor, "spawn_worker", spawn_failing_first)
    monkeypatch.setattr(forking, "ForkServer", no_fork_server)  # two backends: spares only without a fork server
    monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", "4")  # restored afterwards, as launch sets it in os.environ
    monkeypatch.setattr(sys, "argv", ["cmpx", "run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref"])
    with pytest.raises(SystemExit) as exited:
        launch.main()
    assert exited.value.code == 0, capsys.readouterr()
    assert len(calls) == 3  # the first spare failed, the second was taken, then the run spawned its other worker
    assert worker_processes() == []


def test_an_interrupt_before_the_cli_is_ready_exits_130_without_a_traceback(monkeypatch, capsys, signals_kept):
    from cmpx.cli import launch
    from cmpx.cli.main import cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "main", interrupted)
    monkeypatch.setenv("OPENBLAS_THREAD_TIMEOUT", "4")
    monkeypatch.setattr(sys, "argv", ["cmpx", "run", EXAMPLE, "--backend", "onnxrt", "--backend", "onnxref"])
    with pytest.raises(SystemExit) as exited:
        launch.main()
    assert exited.value.code == 130
    assert capsys.readouterr().err == "Interrupted.\n"
    assert worker_processes() == []  # the spares started for the two backends are stopped


def test_the_top_level_help_lists_every_command_without_importing_any_or_discovering_plugins():
    """``cmpx --help`` is start-up time users wait for: the commands' summaries come from the group's table, so
    no command module is imported, no plugin discovered, run's options not built."""
    probe = ("import sys\n"
             "from cmpx.cli.main import LAZY_COMMANDS, cli\n"
             "code = cli.main(['--help'], standalone_mode=False)\n"
             "loaded = [m for m in ('pluggy', 'cmpx.plugin.manager', 'cmpx.cli.run', 'cmpx.options.grammar',\n"
             "                      'cmpx.cli.env_cmd', 'cmpx.cli.reduce_cmd', 'cmpx.cli.sweep_cmd',\n"
             "                      'cmpx.cli.tolerances_cmd') if m in sys.modules]\n"
             "print('LOADED', loaded, sorted(LAZY_COMMANDS))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "LOADED [] ['env', 'precision', 'reduce', 'run', 'sweep', 'tolerances']" in done.stdout, done.stdout
    listed = dict(line.split(None, 1) for line in done.stdout.split("Commands:\n")[1].splitlines()
                  if line.startswith("  ") and not line.startswith("    "))
    assert listed["run"] == "Run a model on several backends and compare the outputs."
    assert set(listed) == {"env", "plugins", "precision", "reduce", "run", "sweep", "tensors", "tolerances"}


@pytest.mark.parametrize("name", ["env", "reduce", "run", "sweep", "tolerances"])
def test_a_lazy_command_is_the_real_command_when_named_and_keeps_its_summary(name):
    import click

    from cmpx.cli.invocation import Invocation
    from cmpx.cli.main import LAZY_COMMANDS, cli

    ctx = click.Context(cli, obj=Invocation())
    command = cli.get_command(ctx, name)
    assert command is not None and command.name == name and command.callback is not None
    assert command.get_short_help_str(200) == LAZY_COMMANDS[name]
    assert name in cli.list_commands(ctx)
