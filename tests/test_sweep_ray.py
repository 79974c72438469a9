"""cmpx sweep on a real Ray: a local Ray with 2 CPUs started by the test, and one started and stopped by cmpx itself.
Skipped, saying why, where the extra is not installed (.ci/run installs it)."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from cmpx.testing.leaks import fork_servers

from cmpx.sweep import window

from conftest import REPO, run_cmpx
from sweep_zoo import VERDICTS, descendants, processes_marked, processes_using, summary, verdicts, write_zoo

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'cmpx[ray]' (.ci/run installs it)")

# One local Ray per test process: in a parallel suite (-n) these tests run one after the other in one process.
pytestmark = pytest.mark.xdist_group("ray")
RAY_ORPHANS_SECONDS = 75


def _identity(pid: int) -> tuple[str, str, str] | None:
    """(start time, parent, command line) of a live process, or None where it is gone or a zombie: the start
    time tells a process from a later one given its PID."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None
    return None if fields[0] == "Z" else (fields[19], fields[1], command)


def _alive(started: dict[int, tuple[str, str, str]]) -> dict[int, tuple[str, str, str]]:
    return {pid: now for pid, then in started.items() if (now := _identity(pid)) and now[0] == then[0]}


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray with 2 CPUs for this module's tests; shut down after them, leaving no process behind."""
    before = descendants(os.getpid())
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)  # never another Ray
    yield
    # Ray's: the processes it started below this one (its GCS, raylet, agents), and theirs (its workers), but not
    # the suite's fork servers, nor the new children of a process older than Ray (a browser's renderers)
    ours = {pid: identity for pid in descendants(os.getpid()) - before if (identity := _identity(pid))}
    servers = set(fork_servers())
    started = {pid for pid, (_, parent, _) in ours.items() if int(parent) == os.getpid() and pid not in servers}
    started |= {pid for top in started for pid in descendants(top)}
    identities = {pid: identity for pid, identity in ours.items() if pid in started}
    ray.shutdown()
    # ray.shutdown gives the raylet 1 s to exit on SIGTERM, then kills it, and the GCS. Where it was killed (a busy
    # machine), its workers and agents outlive it by up to 60 s: they wait that long for the dead GCS (Ray's
    # gcs_rpc_server_reconnect_timeout_s; the agents' publish_error timeout). A process never ending still fails.
    deadline = time.monotonic() + RAY_ORPHANS_SECONDS
    while _alive(identities) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {pid: f"parent {parent}: {command}" for pid, (_, parent, command) in _alive(identities).items()}
    assert left == {}, f"processes started under these tests outlived Ray's shutdown (of {len(identities)}): {left}"


def test_ray_runs_tasks_on_the_main_thread_of_its_workers(local_ray):
    # What a cell needs (its workers die with the thread that started them); cmpx.sweep.cell falls back to a
    # runner process if this ever changes.
    def on_main_thread() -> bool:  # a local function: Ray ships it by value, not by this module's name
        import threading

        return threading.current_thread() is threading.main_thread()

    assert ray.get([ray.remote(on_main_thread).remote() for _ in range(2)]) == [True, True]


def test_a_ray_sweep_gives_the_verdicts_of_a_local_sweep(tmp_path, run_cli, local_ray, monkeypatch):
    # A window of 2 x 2 CPUs for 6 cells: cells wait in the driver until others finish (cmpx.sweep.window).
    monkeypatch.setattr(window, "MIN_WINDOW", 1)
    in_flight = []  # cells in flight after each time round the loop
    original = window.Window.take

    def take(self):
        taken = list(original(self))
        in_flight.append(self.total)
        return taken

    monkeypatch.setattr(window.Window, "take", take)
    sweep = write_zoo(tmp_path)
    on_ray = run_cli("sweep", sweep, "--out", tmp_path / "ray", "--executor", "ray")
    assert on_ray.exit_code == 1, on_ray.output
    assert max(in_flight) == 4 and len(in_flight) > 2  # the window was full, and refilled
    assert "executor ray: the Ray this process is connected to" in on_ray.output
    local = run_cli("sweep", sweep, "--out", tmp_path / "local", "--jobs", "2")
    assert local.exit_code == 1, local.output
    assert verdicts(tmp_path / "ray") == verdicts(tmp_path / "local") == VERDICTS
    ray_cells, local_cells = summary(tmp_path / "ray")["cells"], summary(tmp_path / "local")["cells"]
    assert [c["exit_code"] for c in ray_cells] == [c["exit_code"] for c in local_cells]
    assert [c["first_divergence"] for c in ray_cells] == [c["first_divergence"] for c in local_cells]
    for cell in ray_cells:  # the reports, and their pages made where the cells ran, came back through Ray
        assert (tmp_path / "ray" / cell["report"]).is_file()
        assert "cmpx report" in (tmp_path / "ray" / cell["report"]).with_name("report.html").read_text()
    assert ray.is_initialized()  # a Ray cmpx did not start is left running


def test_cmpx_starts_a_local_ray_and_shuts_it_down(tmp_path):
    # A run its local Ray cannot hold is refused before any cell: tests/test_sweep_cluster.py (each start of a
    # local Ray costs ~10 s of CPU here, so this test starts one)
    marker = uuid.uuid4().hex
    sweep = write_zoo(tmp_path, names=("gather",), runs=(
        '[[runs]]\nname = "ref"\nargs = "--backend onnxrt --backend onnxref"\n'
        '[[runs]]\nname = "one"\nargs = "--backend onnxrt --backend onnxref"\nresources = {CPU = 1}\n'))
    ray_files = tempfile.mkdtemp(prefix="rl", dir="/tmp")  # short: Ray's socket paths must stay short
    env = dict(os.environ, CMPX_TEST_MARK=marker, RAY_TMPDIR=ray_files)
    env.pop("RAY_ADDRESS", None)
    try:
        done = subprocess.run([sys.executable, "-m", "cmpx", "sweep", str(sweep), "--out", str(tmp_path / "out"),
                               "--executor", "ray", "--jobs", "2"], capture_output=True, text=True, cwd=REPO, env=env,
                              timeout=180)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "executor ray: a local Ray with 2 CPU(s), started for this sweep" in done.stdout
        assert verdicts(tmp_path / "out") == {("zoo/gather.onnx", "ref"): "passed",
                                              ("zoo/gather.onnx", "one"): "passed"}

        def left() -> list[int]:  # marked, or Ray's agents (retitled over their environment) by their files
            return sorted(set(processes_marked(marker)) | set(processes_using(ray_files)))

        deadline = time.monotonic() + RAY_ORPHANS_SECONDS  # Ray's own orphans may wait 60 s (local_ray says why)
        while left() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert left() == [], "the local Ray or a cell outlived the sweep"
    finally:
        shutil.rmtree(ray_files, ignore_errors=True)


def test_a_cluster_address_nobody_answers_at_is_exit_2_before_anything(tmp_path):
    out = tmp_path / "out"
    done = run_cmpx("sweep", write_zoo(tmp_path, names=("conv",)), "--out", out, "--executor", "ray",
                    "--ray-address", "127.0.0.1:1")  # Ray itself would retry forever
    assert done.returncode == 2
    assert done.stderr.strip() == "Error: cannot reach the Ray cluster at 127.0.0.1:1: Connection refused"
    assert not out.exists()
