import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from cmpx import shm
from cmpx.cli.main import cli

HERE = Path(__file__).resolve().parent
PLUGIN_DIR = HERE / "plugins"
REPO = HERE.parent

# Test plugins must be importable here (-p in the coordinator) and in every worker (a fresh interpreter).
sys.path.insert(0, str(PLUGIN_DIR))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGIN_DIR), os.environ.get("PYTHONPATH")]))

sys.path.insert(0, str(HERE))
import modelgen  # noqa: E402


def worker_processes(parent: int | None = None) -> list[int]:
    """PIDs of live cmpx workers started by ``parent`` (default: this process)."""
    parent = os.getpid() if parent is None else parent
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"cmpx.worker" in argv and state != "Z":
            position = argv.index(b"cmpx.worker")  # python -m cmpx.worker FD_IN FD_OUT PARENT_PID [SETUP]
            if argv[position + 3:position + 4] == [str(parent).encode()]:
                found.append(int(entry))
    return found


@pytest.fixture
def no_leaks():
    """Fails the test if it leaves a cmpx shared-memory segment or a worker process behind."""
    before = set(shm.list_segments())
    yield
    assert set(shm.list_segments()) - before == set(), "shared-memory segments leaked"
    assert worker_processes() == [], "worker processes leaked"


@pytest.fixture
def run_cli(no_leaks):
    """Invoke the real CLI in-process (workers are real subprocesses); returns the click Result."""
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)

    return invoke


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
    return subprocess.run([sys.executable, "-c", "from cmpx.cli.main import main; main()", *map(str, args)],
                          capture_output=True, text=True, env=full_env, timeout=timeout, cwd=REPO)
