"""cmpx sweep on a real Ray cluster of two nodes started as a user would (``ray start``): a head, and a second node
in a mount namespace of its own (``unshare -m``) where the sweep's model path holds another model. A cell that
runs there must say so, naming the host, and never pass that model off as the fingerprinted one; with
--ship-models it runs the model's bytes sent through Ray's object store instead (issue 31, item 4). A cell on Ray
computes with its run's threads, not Ray's OMP_NUM_THREADS=1 (item 5).
Skipped, saying why, where Ray is not installed or a mount namespace cannot be made (it needs root)."""

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from conftest import REPO
from sweep_zoo import THREAD_PROBE, descendants, summary, verdicts, write_zoo

pytest.importorskip("ray", reason="Ray is not installed: pip install 'cmpx[ray]' (.ci/run installs it)")

pytestmark = pytest.mark.xdist_group("ray")

RAY = os.path.join(os.path.dirname(sys.executable), "ray")


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _node_ports() -> list[str]:
    """Every port a node listens on, free ones: on a shared machine Ray's fixed defaults may be another's."""
    ports = _free_ports(12)
    return ["--node-manager-port", str(ports[0]), "--object-manager-port", str(ports[1]),
            "--dashboard-agent-listen-port", str(ports[2]), "--dashboard-agent-grpc-port", str(ports[3]),
            "--runtime-env-agent-port", str(ports[4]), "--metrics-export-port", str(ports[5]),
            "--worker-port-list", ",".join(map(str, ports[6:]))]


def _can_unshare() -> str | None:
    if shutil.which("unshare") is None:
        return "no unshare(1)"
    done = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True)
    return None if done.returncode == 0 else f"unshare -m fails here: {done.stderr.strip()}"


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _stop(process: subprocess.Popen) -> None:
    """Kill a `ray start --block` and every process of its node (all started by this test), and wait until they
    are gone: its own way out (SIGTERM) takes 20 s on a busy machine."""
    pids = {process.pid} | descendants(process.pid)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait()
    deadline = time.monotonic() + 15
    while any(_state(pid) not in ("Z", "gone") for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)


def _start(command: list[str], env: dict[str, str], seconds: float = 90) -> subprocess.Popen:
    """Start a Ray node with ``ray start --block`` and wait until it says it runs."""
    process = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    said: list[str] = []
    ready = threading.Event()

    def read() -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            said.append(line)
            if "Ray runtime started" in line:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + seconds
    while not ready.wait(0.2):
        if process.poll() is not None or time.monotonic() > deadline:
            _stop(process)
            raise AssertionError("ray start did not start:\n" + "".join(said))
    return process


@pytest.fixture
def two_nodes(tmp_path):
    """A head (1 CPU) and a node (1 CPU, resource 'elsewhere') whose zoo/conv.onnx is another model's file."""
    reason = _can_unshare()
    if reason:
        pytest.skip(reason)
    sweep = write_zoo(tmp_path, names=("conv", "gather"), runs="""
[[runs]]
name = "here"
args = ["--backend", "onnxrt", "--backend", "onnxref", "--data-loader-script", "probe.py"]
threads = 2

[[runs]]
name = "there"
args = ["--backend", "onnxrt", "--backend", "onnxref"]
resources = {elsewhere = 1}
""")
    sweep.write_text(sweep.read_text().replace("zoo/*.onnx", "zoo/conv.onnx"))
    (tmp_path / "probe.py").write_text(THREAD_PROBE)
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    # HOME: a ~/.ray/auth_token of the user's (or of another Ray on the machine) is not this cluster's
    env = dict(os.environ, RAY_TMPDIR=temp, RAY_USAGE_STATS_ENABLED="0", HOME=temp)
    env.pop("RAY_ADDRESS", None)
    gcs, = _free_ports(1)
    started = []
    try:
        started.append(_start([RAY, "start", "--head", "--block", "--port", str(gcs), "--num-cpus", "1",
                               "--include-dashboard=false", *_node_ports()], env))
        join = [RAY, "start", "--block", "--address", f"127.0.0.1:{gcs}", "--num-cpus", "1", "--resources",
                '{"elsewhere": 1}', *_node_ports()]
        model, other = tmp_path / "zoo" / "conv.onnx", tmp_path / "zoo" / "gather.onnx"
        script = f"mount --bind {shlex.quote(str(other))} {shlex.quote(str(model))} && exec {shlex.join(join)}"
        started.append(_start(["unshare", "-m", "--propagation", "private", "sh", "-c", script], env))
        yield sweep, f"127.0.0.1:{gcs}", env
    finally:
        for process in reversed(started):
            _stop(process)
        shutil.rmtree(temp, ignore_errors=True)


def test_a_node_whose_path_holds_another_model_fails_that_cell_naming_the_host_until_the_model_is_shipped(
        tmp_path, two_nodes):
    sweep, address, env = two_nodes
    out = tmp_path / "out"
    command = [sys.executable, "-m", "cmpx", "sweep", str(sweep), "--out", str(out), "--executor", "ray",
               "--ray-address", address]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, env=env, timeout=240)
    assert done.returncode == 3, done.stdout + done.stderr  # a cell without a verdict
    assert verdicts(out) == {("zoo/conv.onnx", "here"): "passed", ("zoo/conv.onnx", "there"): "usage error"}
    there = next(c for c in summary(out)["cells"] if c["run"] == "there")
    host = socket.gethostname()
    assert there["failure"]["message"].startswith(
        f"model file {tmp_path / 'zoo' / 'conv.onnx'} on {host} is not the one the sweep fingerprinted (SHA-256 ")
    assert there["report"] is None and there["host"] == host
    # the 1-CPU Ray task computed with its run's 2 threads, not the OMP_NUM_THREADS=1 Ray gives such a task
    assert (tmp_path / "seen.txt").read_text().splitlines() == ["2 2 2"]

    # Such a result is never kept: the same sweep runs it again, here with the model's bytes shipped through Ray's
    # object store, so that node runs the fingerprinted model whatever its path holds.
    shipped = subprocess.run([*command, "--ship-models"], capture_output=True, text=True, cwd=REPO, env=env,
                             timeout=240)
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    assert "1 kept from an earlier sweep, 1 to run" in shipped.stdout
    assert verdicts(out) == {("zoo/conv.onnx", "here"): "passed", ("zoo/conv.onnx", "there"): "passed"}
    assert list(tmp_path.glob("cmpx-shipped-*")) == [] and not any(
        name.startswith("cmpx-shipped-") for name in os.listdir(tempfile.gettempdir()))  # the copies are gone
