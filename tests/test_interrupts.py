"""The coordinator interrupted or killed: workers end, shared memory is released."""

import os
import signal
import subprocess
import sys
import time

import pytest

from cmpx.transport import shm
from cmpx.testing.leaks import worker_processes
from conftest import REPO


def workers_of(parent: int) -> list[int]:
    return worker_processes(parent)


def start_hanging_run(model: str) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "cmpx", "run", model, "--backend", "onnxrt",
         "--backend", "faulty", "-p", "cmpx_test_faulty", "--faulty-fault", "infer:hang"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
        env=dict(os.environ, PYTHONUNBUFFERED="1"))
    seen = []
    for line in process.stdout:  # wait until both workers loaded and inference is under way
        seen.append(line)
        if line.startswith("loaded faulty"):
            break
    assert any(line.startswith("loaded faulty") for line in seen), seen
    time.sleep(0.3)
    return process


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_stops_workers_and_releases_memory_within_two_seconds(models, sig):
    process = start_hanging_run(models.matmul_chain)
    assert workers_of(process.pid) and shm.list_segments(f"cmpx-{process.pid}-")
    started = time.monotonic()
    process.send_signal(sig)
    assert process.wait(timeout=10) == 130
    assert time.monotonic() - started < 2.5
    printed = process.stdout.read()
    assert "Interrupted" in printed and "Summary (interrupted: what finished)" in printed
    assert workers_of(process.pid) == []
    assert shm.list_segments(f"cmpx-{process.pid}-") == []


def test_workers_die_with_a_killed_coordinator_and_the_next_run_sweeps_its_segments(models, run_cli):
    process = start_hanging_run(models.matmul_chain)
    process.kill()
    process.wait()
    wait_gone_workers = time.monotonic() + 5
    while workers_of(process.pid) and time.monotonic() < wait_gone_workers:
        time.sleep(0.05)
    assert workers_of(process.pid) == []
    assert shm.list_segments(f"cmpx-{process.pid}-") != []  # nobody could clean up...
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "onnxref")
    assert result.exit_code == 0
    assert shm.list_segments(f"cmpx-{process.pid}-") == []  # ...until the next run swept them
