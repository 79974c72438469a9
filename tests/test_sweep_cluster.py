"""cmpx sweep against a real local Ray cluster of two node processes, as a user starts one (`ray start --head`, then
`ray start --address` for a second node): a node that cannot hold a run, a resource no node has, cells whose
process or node is killed (retried; what still fails is an infrastructure failure), and a lost head. Each sweep
is a `cmpx` process of its own. The cluster lives in its own RAY_TMPDIR, so nothing here touches another Ray of
the machine (`ray.init()` with no address would connect to the last cluster started under the same RAY_TMPDIR),
and every process it started is killed at the end. Skipped, saying why, where Ray is not installed."""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from conftest import REPO
from sweep_zoo import processes_using, summary, verdicts, write_zoo

pytest.importorskip("ray", reason="Ray is not installed: pip install 'cmpx[ray]' (.ci/run installs it)")

pytestmark = pytest.mark.xdist_group("ray")

RAY = Path(sys.executable).with_name("ray")
FAULTY = "--backend onnxrt --backend faulty -p cmpx_test_faulty"


def _free_port() -> int:
    """A free port; from CMPX_TEST_RAY_PORTS (FIRST-LAST) when set, so that tests sharing a machine with other
    clusters keep to ports of their own."""
    first, _, last = os.environ.get("CMPX_TEST_RAY_PORTS", "0-0").partition("-")
    for _ in range(100):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", random.randint(int(first), int(last))))
            except OSError:
                continue
            return s.getsockname()[1]
    raise AssertionError(f"no free port in {first}-{last}")


def _processes_with(variable: str, directory: str) -> dict[int, str]:
    """Live processes whose environment holds ``variable`` (NAME=value), or that hold a file open in ``directory``
    (Ray's agents retitle themselves over their environment), with their command lines."""
    found = {}
    needle = variable.encode()
    using = set(processes_using(directory))
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in f.read().split(b"\0") and int(entry) not in using:
                    continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                found[int(entry)] = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
    return found


class Cluster:
    """A head with 2 CPUs and a second node with 1 CPU, in a RAY_TMPDIR of their own."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="rc", dir="/tmp")  # short: Ray's socket paths must stay short
        self.mark = f"RAY_TMPDIR={self.tmp}"
        # RAY_AUTH_MODE: a ~/.ray/auth_token left by another Ray of the machine otherwise breaks a second node's join
        self.env = dict(os.environ, RAY_TMPDIR=self.tmp, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
        self.env.pop("RAY_ADDRESS", None)
        self.port = _free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.head: set[int] = set()
        self.node: set[int] = set()

    def start(self) -> None:
        self._start("--head", "--port", str(self.port), "--num-cpus", "2", "--include-dashboard=false",
                    "--dashboard-port", str(_free_port()))
        self.head = {pid for pid, command in _processes_with(self.mark, self.tmp).items()
                     if "gcs_server" in command or "/raylet " in command}
        self._start("--address", self.address, "--num-cpus", "1")
        self.node = {pid for pid, command in _processes_with(self.mark, self.tmp).items()
                     if "/raylet " in command} - self.head

    def _start(self, *args: str) -> None:
        done = subprocess.run([str(RAY), "start", *args, "--disable-usage-stats", "--dashboard-agent-listen-port",
                               str(_free_port())], env=self.env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"ray start {' '.join(args)} failed:\n{done.stdout}{done.stderr}"

    def sweep(self, *args, env: dict | None = None, address: bool = True, timeout: float = 120):
        more = ["--executor", "ray"] + (["--ray-address", self.address] if address else [])
        return subprocess.run([sys.executable, "-m", "cmpx", "sweep", *map(str, args), *more], capture_output=True,
                              text=True, cwd=REPO, env=dict(self.env, **(env or {})), timeout=timeout)

    def stop(self) -> None:
        for pid in _processes_with(self.mark, self.tmp):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while _processes_with(self.mark, self.tmp) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = _processes_with(self.mark, self.tmp)
        shutil.rmtree(self.tmp, ignore_errors=True)
        assert left == {}, f"processes of the test's Ray outlived it: {left}"


@pytest.fixture(scope="module")
def cluster():
    """One two-node cluster for this module (a node takes ~3 s to start); the tests that kill part of it come
    last, in file order."""
    started = Cluster()
    try:
        started.start()
        yield started
    finally:
        started.stop()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_run_no_node_can_hold_is_refused_before_any_cell(tmp_path, cluster):
    # 3 CPUs: the cluster has 3 in all, but no node has more than 2
    sweep = write_zoo(tmp_path, '[[runs]]\nname = "big"\nargs = "--backend onnxrt --backend onnxref"\n'
                      'resources = {CPU = 3}\n', names=("gather",))
    done = cluster.sweep(sweep, "--out", tmp_path / "out")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "Error: run 'big' needs CPU 3 on one node, and no node of the cluster holds that (its 2 node(s): CPU 1; "
        "CPU 2) (the Ray cluster; change the run's resources, or use a cluster with such a node)"]
    assert not (tmp_path / "out" / "summary.json").exists()


def test_without_an_address_cmpx_starts_its_own_ray_not_the_last_one_of_the_machine(tmp_path, cluster):
    # The test's cluster is this RAY_TMPDIR's current one (ray_current_cluster): ray.init() with no address
    # would join it (and refuse num_cpus); cmpx starts a Ray of its own, which refuses what its 2 CPUs cannot hold.
    sweep = write_zoo(tmp_path, '[[runs]]\nname = "big"\nargs = "--backend onnxrt --backend onnxref"\n'
                      'resources = {CPU = 3}\n', names=("gather",))
    assert (Path(cluster.tmp) / "ray" / "ray_current_cluster").is_file()
    done = cluster.sweep(sweep, "--out", tmp_path / "out", "--jobs", "2", address=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        "Error: run 'big' needs CPU 3 on one node, and no node of the cluster holds that (its 1 node(s): CPU 2) "
        "(the local Ray started for this sweep; change the run's resources, or use a cluster with such a node)"]


def test_a_cell_waiting_for_a_resource_no_node_has_times_out_naming_it(tmp_path, cluster):
    sweep = write_zoo(tmp_path, '[[runs]]\nname = "ref"\nargs = "--backend onnxrt --backend onnxref"\n'
                      '[[runs]]\nname = "trt"\nargs = "--backend onnxrt --backend onnxref"\n'
                      'resources = {trt10 = 1}\n', names=("gather",))
    out = tmp_path / "out"
    started = time.monotonic()
    done = cluster.sweep(sweep, "--out", out, "--pending-timeout", "2")
    assert done.returncode == 6, done.stdout + done.stderr
    assert time.monotonic() - started < 60
    need = ("CPU 1 and trt10 1 on one node, and no node of the cluster holds that (its 2 node(s): CPU 1, trt10 0; "
            "CPU 2, trt10 0)")
    assert f"warning: run 'trt' needs {need}: its cells wait for a node that has it, up to 2 s (--pending-timeout)" \
        in done.stderr
    assert verdicts(out) == {("zoo/gather.onnx", "ref"): "passed",
                             ("zoo/gather.onnx", "trt"): "infrastructure failure"}
    trt = next(cell for cell in summary(out)["cells"] if cell["run"] == "trt")
    assert trt["exit_code"] == 6
    assert trt["failure"]["message"].startswith("infrastructure failure: waited ")
    assert trt["failure"]["message"].endswith(f"s (--pending-timeout) for a node: it needs {need}")
    assert 'message="infrastructure failure: ' in (out / "junit.xml").read_text()


def test_infrastructure_failures_are_retried_and_a_cells_own_failure_is_not(tmp_path, cluster):
    # "once": the process running the cell (the Ray worker) is killed on the first try only, as an OOM kill
    # would; "always": on every try; "crash": the cell's own backend dies, which is its verdict (exit 3)
    records = {name: tmp_path / f"{name}.txt" for name in ("once", "always", "crash")}
    runs = (f'[[runs]]\nname = "once"\nargs = "{FAULTY} --faulty-fault load:kill-runner '
            f'--faulty-record {records["once"]} --faulty-times 1"\n'
            f'[[runs]]\nname = "always"\nargs = "{FAULTY} --faulty-fault load:kill-runner '
            f'--faulty-record {records["always"]}"\n'
            f'[[runs]]\nname = "crash"\nargs = "{FAULTY} --faulty-fault infer:sigkill '
            f'--faulty-record {records["crash"]}"\n')
    sweep = write_zoo(tmp_path, runs, names=("gather",))
    out = tmp_path / "out"
    done = cluster.sweep(sweep, "--out", out)
    assert done.returncode == 6, done.stdout + done.stderr  # not a verdict: an infrastructure failure
    assert verdicts(out) == {("zoo/gather.onnx", "once"): "passed",
                             ("zoo/gather.onnx", "always"): "infrastructure failure",
                             ("zoo/gather.onnx", "crash"): "backend failed"}
    assert len(_lines(records["once"])) == 1  # killed once, then passed on its retry
    assert len(_lines(records["always"])) == 3  # the first try and Ray's 2 retries
    assert len(_lines(records["crash"])) == 1  # never retried
    always = next(cell for cell in summary(out)["cells"] if cell["run"] == "always")
    assert always["failure"]["message"].startswith(
        "infrastructure failure: the Ray worker process running it died, on each of its tries (Ray runs a cell "
        "again up to 2 times after such a failure): WorkerCrashedError: ")
    document = summary(out)
    assert document["exit_code"] == 6 and document["cluster_failure"] is None

    again = cluster.sweep(sweep, "--out", out)  # verdicts are kept, an infrastructure failure is not
    assert "2 kept from an earlier sweep, 1 to run" in again.stdout, again.stdout + again.stderr
    assert again.returncode == 6 and len(_lines(records["always"])) == 6


def test_a_cell_killed_by_rays_memory_monitor_on_each_try_is_an_infrastructure_failure(tmp_path):
    # A Ray of cmpx's own whose memory monitor finds every node over its threshold: each try is killed. Ray
    # would retry such a kill without end; cmpx bounds it as the other system failures (else: no end, a timeout)
    sweep = write_zoo(tmp_path, '[[runs]]\nname = "ref"\nargs = "--backend onnxrt --backend onnxref"\n',
                      names=("gather",))
    ray_of_its_own = Cluster()  # not started: its RAY_TMPDIR, and the cleanup of what the sweep leaves
    try:
        done = ray_of_its_own.sweep(sweep, "--out", tmp_path / "out", "--jobs", "1", address=False, timeout=240,
                                    env={"RAY_memory_usage_threshold": "0.01", "RAY_memory_monitor_refresh_ms": "100"})
    finally:
        ray_of_its_own.stop()
    assert done.returncode == 6, done.stdout + done.stderr
    cell = summary(tmp_path / "out")["cells"][0]
    assert cell["verdict"] == "infrastructure failure"
    assert cell["failure"]["message"].startswith(
        "infrastructure failure: killed for lack of memory, on each of its tries (Ray runs a cell again up to 2 "
        "times after such a failure): OutOfMemoryError: ")


def test_a_node_killed_under_a_cell_is_survived_by_a_retry(tmp_path, cluster):
    # Three slow cells of 1 CPU on nodes of 2 + 1 CPUs: one runs on the second node, which is killed under it
    record = tmp_path / "infer.txt"
    sweep = write_zoo(tmp_path, f'[defaults]\nargs = ["--iterations", "4"]\n[[runs]]\nname = "slow"\n'
                      f'args = "{FAULTY} --faulty-fault infer:sleep --faulty-record {record}"\n')
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "cmpx", "sweep", str(sweep), "--out", str(out), "--executor",
                                "ray", "--ray-address", cluster.address], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, cwd=REPO, env=cluster.env)
    try:
        deadline = time.monotonic() + 60
        while len({line.split()[1] for line in _lines(record)}) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len({line.split()[1] for line in _lines(record)}) == 3, "the three cells did not start"
        for pid in cluster.node:
            os.kill(pid, signal.SIGKILL)
        printed, _ = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 0, printed
    assert set(verdicts(out).values()) == {"passed"}
    assert len({line.split()[1] for line in _lines(record)}) == 4  # the killed node's cell ran again


def test_a_lost_head_ends_the_sweep_with_the_finished_cells_summarized(tmp_path, cluster):
    record = tmp_path / "hang.txt"
    sweep = write_zoo(tmp_path, '[[runs]]\nname = "ref"\nargs = "--backend onnxrt --backend onnxref"\n'
                      f'[[runs]]\nname = "hang"\nargs = "{FAULTY} --faulty-fault infer:hang --faulty-record '
                      f'{record}"\n', names=("gather",))
    out = tmp_path / "out"
    # Ray would end the driver after this many seconds without its head (exit 1); cmpx gives up after half
    env = dict(cluster.env, RAY_gcs_rpc_server_reconnect_timeout_s="16", CMPX_TEST_MARK=uuid.uuid4().hex)
    process = subprocess.Popen([sys.executable, "-m", "cmpx", "sweep", str(sweep), "--out", str(out), "--executor",
                                "ray", "--ray-address", cluster.address], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=REPO, env=env)
    try:
        deadline = time.monotonic() + 60
        while not (_lines(record) and (out / "cells" / "zoo__gather.onnx--ref" / "cell.json").exists()) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _lines(record), "the hanging cell did not start"
        for pid in cluster.head:
            os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        printed, errors = process.communicate(timeout=60)
    finally:
        process.kill()
    assert process.returncode == 6, printed + errors
    assert time.monotonic() - killed < 30, printed + errors  # 8 s to give up, then Ray's shutdown
    assert errors.splitlines()[-1].startswith("Error: lost the Ray cluster: its head (GCS at ")
    assert errors.splitlines()[-1].endswith(
        f"has not answered for 8 s (Connection refused); 1 of 2 cells have results, kept in {out}, the others are "
        "listed as not run: the same command runs them once the cluster is back")
    document = summary(out)
    assert document["exit_code"] == 6 and document["cluster_failure"].startswith("lost the Ray cluster")
    assert verdicts(out) == {("zoo/gather.onnx", "ref"): "passed", ("zoo/gather.onnx", "hang"): "not run"}
    assert "<skipped" in (out / "junit.xml").read_text()
    assert "Stopped: lost the Ray cluster" in (out / "summary.md").read_text()
    assert json.loads((out / "cells" / "zoo__gather.onnx--ref" / "cell.json").read_text())["exit_code"] == 0
