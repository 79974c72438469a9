import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# CI machines are small and shared: a cold first draw can take over a second. That says nothing about the code
# under test, so neither generation speed nor per-example time may fail a property test; its assertions still do.
settings.register_profile("cmpx", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("cmpx")

# A suite started in the background of a script (as CI may start it) inherits SIGINT ignored, as every background
# job of a non-interactive shell does, and so would every cmpx it starts, which then rightly ignores Ctrl-C. The
# tests that press Ctrl-C need it delivered: a handler here is reset to the default in each process started.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)



def interruptible() -> None:
    """``preexec_fn`` of a process a test presses Ctrl-C at: SIGINT at its default and unblocked, whatever this
    test process inherited (ignored in a background job, or blocked in the thread that starts it)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# Every test run starts fresh interpreters (each run's workers, cmpx as a command, sweep runners) that import cmpx's
# modules. Where PYTHONDONTWRITEBYTECODE is set (as on the project's shared machine) their bytecode is never cached
# and each process compiles them again: ~0.25 s of CPU per cmpx command (117 modules), ~15 ms per worker, over
# a suite of a thousand runs. Let them cache it (in __pycache__, which git ignores); what runs is the same source.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

HERE = Path(__file__).resolve().parent
PLUGIN_DIR = HERE / "plugins"
REPO = HERE.parent

# Test plugins must be importable here (-p in the coordinator) and in every worker (a fresh interpreter).
sys.path.insert(0, str(PLUGIN_DIR))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("PYTHONPATH")]))

from cmpx.testing import models as modelgen  # noqa: E402


@pytest.fixture
def no_leaks(cmpx_no_leaks):
    """Fails the test if it leaves a cmpx shared-memory segment or a worker process behind (cmpx's own fixture)."""
    yield


@pytest.fixture
def run_cli(cmpx_cli):
    """The real CLI in-process with real worker processes: cmpx's own pytest plugin fixture, which also fails
    the test if a worker or a shared-memory segment outlives the run."""
    return cmpx_cli


@pytest.fixture
def models(tmp_path):
    """Paths of small generated models, written on first use."""

    class Models:
        def __getattr__(self, name):
            path = tmp_path / f"{name}.onnx"
            if not path.exists():
                modelgen.save(getattr(modelgen, name)(), path)
            return str(path)

    return Models()


def run_cmpx(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the installed `cmpx` entry point as a separate process."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "cmpx", *map(str, args)],
                          capture_output=True, text=True, env=full_env, timeout=timeout, cwd=REPO)


@pytest.fixture(scope="session")
def cmpx_here(cmpx_fork_server):
    """``cmpx`` run in this process, answering as ``run_cmpx`` does for the command (returncode, stdout, stderr),
    its workers forked from the session's fork server: for tests that run many real models through the real CLI and
    check what it says, where a command per run would spend its time starting interpreters. The leak checks are
    ``run_cli``'s (function-scoped); this one also serves module-scoped fixtures."""
    from click.testing import CliRunner

    from cmpx.cli.invocation import Invocation
    from cmpx.cli.main import cli
    from cmpx.options.argv import prescan
    from cmpx.transport.pool import WorkerPool, worker_environment

    def invoke(*args: object, env: dict | None = None, timeout: float = 0) -> subprocess.CompletedProcess:
        words = [str(a) for a in args]
        environment = dict(worker_environment(), **(env or {}))
        pool = WorkerPool(server=cmpx_fork_server.for_environment(environment))
        result = CliRunner().invoke(cli, words, env=env, catch_exceptions=False,
                                    invocation=Invocation(prescan(words), pool))
        return subprocess.CompletedProcess(words, result.exit_code, result.stdout, result.stderr)

    return invoke


@pytest.fixture(scope="session")
def headless_chromium():
    """One headless Chromium for this test process's browser tests (tests/browser.py), closed at the end; None
    where it is not installed."""
    from browser import Browser, find_chromium

    binary = find_chromium()
    if binary is None:
        yield None
        return
    browser = Browser(binary)
    yield browser
    browser.close()


@pytest.fixture(scope="session")
def fork_servers():
    """A ``cmpx.ForkServers`` for the tests that call ``cmpx.run`` on model after model (``fork_servers=``)."""
    import cmpx

    with cmpx.ForkServers() as servers:
        yield servers


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one test process per CPU, plus one. The Ray tests run as one group in one process (they share a
    local Ray) for about two minutes, mostly waiting on the cluster (a node's start, a lost head's reconnect limit):
    with a process per CPU, that process left a CPU idle for as long."""
    return (os.cpu_count() or 1) + 1


def pytest_collection_modifyitems(config, items):
    """Tests marked gpu need a CUDA device and TensorRT; elsewhere they are skipped, saying why."""
    from cmpx_trt.probe import cuda_problem

    reason = cuda_problem()
    if reason is None:
        try:
            import tensorrt
        except ImportError:
            tensorrt = None
        if getattr(tensorrt, "__file__", None) is None:  # tensorrt-stubs alone make an empty namespace package
            reason = "TensorRT is not installed (pip install 'cmpx[trt]')"
    if reason is None:
        return
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=f"needs a GPU with TensorRT: {reason}"))
