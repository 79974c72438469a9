"""The crash matrix: every way a backend can die or hang, in load and in inference, through a test-only
plugin loaded with -p. Each is reported by name, phase and signal or exit code within a second of the death
(a hang: when its timeout expires), the other backends are still compared, and nothing leaks (the run_cli
fixture checks shared memory and the process table after every case)."""

import json
import os
import re
import time

import pytest

from cmpx.reports.text import TextReporter

FAULTS = {
    "segfault": "worker killed by SIGSEGV",
    "abort": "worker killed by SIGABRT",
    "exit": "worker exited with code 7",
    "sigkill": "worker killed by SIGKILL",
    "memory": "MemoryError: injected out-of-memory",
    "raise": "RuntimeError: injected failure during {phase}",
    "hang": "no answer within 3 s (--timeout); worker stopped",
}
KINDS = {"segfault": "crash", "abort": "crash", "exit": "crash", "sigkill": "crash", "memory": "error",
         "raise": "error", "hang": "timeout"}


# The faulty backend's own timeout: its load (importing onnxruntime) must fit in it on a busy machine (a parallel
# suite), so a hang is waited for 3 s.
HANG_SECONDS = 3


def run_faulty(run_cli, model, fault, tmp_path, *extra, timeout=HANG_SECONDS):
    report = tmp_path / "report.json"
    result = run_cli("run", model, "--backend", "onnxrt", "--backend", "faulty", "--backend", "onnxref",
                     "-p", "cmpx_test_faulty", "--faulty-fault", fault, "--timeout", "60", f"faulty:{timeout}",
                     "--report-json", report, *extra)
    return result, json.loads(report.read_text())


@pytest.mark.parametrize("phase", ["load", "infer"])
@pytest.mark.parametrize("kind", list(FAULTS))
def test_crash_matrix(run_cli, models, tmp_path, monkeypatch, phase, kind):
    stamp = tmp_path / "stamp"
    monkeypatch.setenv("CMPX_TEST_FAULT_STAMP", str(stamp))
    reported = []
    original = TextReporter.backend_failed
    monkeypatch.setattr(TextReporter, "backend_failed",
                        lambda self, error: (reported.append(time.time()), original(self, error))[1])
    # a hang is found by its 3 s timeout; anything else long before its 10 s one, however loaded the machine
    hangs = kind == "hang"
    result, report = run_faulty(run_cli, models.matmul_chain, f"{phase}:{kind}", tmp_path, timeout=HANG_SECONDS if hangs else 10)
    assert result.exit_code == 3, result.output
    assert f"faulty failed during {phase}: " in result.output
    assert FAULTS[kind].format(phase=phase) in result.output
    if KINDS[kind] == "crash":  # the tail of its stderr comes with it
        assert f"faulty backend: injecting {kind} during {phase}" in result.output
    assert "[iteration 0] onnxrt vs onnxref (reference)" in result.output  # the survivors are compared
    assert re.search(r"PASSED  Y: max abs", result.output)
    noticed_within = reported[0] - float(stamp.read_text())  # from the fault to the report of it
    assert noticed_within < (HANG_SECONDS + 1.5 if hangs else 5.0), noticed_within
    failure = next(b for b in report["backends"] if b["name"] == "faulty")["failure"]
    assert failure["phase"] == phase and failure["kind"] == KINDS[kind]
    assert report["pairs"][0]["backend"] == "onnxrt" and report["pairs"][0]["reference"] == "onnxref"


def test_a_hang_that_ignores_sigterm_is_killed_after_the_grace_period(run_cli, models, tmp_path, monkeypatch):
    stamp = tmp_path / "stamp"
    monkeypatch.setenv("CMPX_TEST_FAULT_STAMP", str(stamp))
    result, report = run_faulty(run_cli, models.matmul_chain, "infer:hang-ignoring-sigterm", tmp_path)
    assert result.exit_code == 3 and f"no answer within {HANG_SECONDS} s" in result.output
    assert time.time() - float(stamp.read_text()) < HANG_SECONDS + 2.0 + 1.5  # timeout, SIGTERM grace, slack


@pytest.mark.parametrize("fault, message", [
    ("infer:garbage", "protocol error: undecodable frame"),
    ("infer:truncated-frame", f"protocol error: truncated frame (14 bytes, then nothing for {HANG_SECONDS} s)"),
    ("infer:truncated-frame-exit", "protocol error: truncated frame before end of stream"),
    ("infer:oversized-frame", "protocol error: frame of 2147483647 bytes announced, over the"),
    ("load:oversized-frame", "protocol error: frame of 2147483647 bytes announced"),
])
def test_protocol_violations_are_errors_of_that_backend(run_cli, models, tmp_path, fault, message):
    started = time.monotonic()
    result, report = run_faulty(run_cli, models.matmul_chain, fault, tmp_path)
    assert result.exit_code == 3, result.output
    assert message in result.output
    assert "onnxrt vs onnxref (reference)" in result.output
    assert next(b for b in report["backends"] if b["name"] == "faulty")["failure"]["kind"] == "protocol"
    assert time.monotonic() - started < 30


def test_timeouts_per_backend(run_cli, models, tmp_path):
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "faulty", "-p",
                     "cmpx_test_faulty", "--faulty-fault", "load:hang", "--timeout", "faulty:0.5")
    assert result.exit_code == 3 and "faulty failed during load: no answer within 0.5 s" in result.output
    unknown = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "onnxref", "--timeout",
                      "trt:5")
    assert unknown.exit_code == 2
    assert "--timeout: 'trt' is not one of the backends of this run: onnxrt, onnxref" in unknown.output


def test_a_crash_in_a_later_iteration_keeps_the_earlier_ones_and_repairs_the_pairs(run_cli, models, tmp_path):
    result, report = run_faulty(run_cli, models.matmul_chain, "infer:segfault", tmp_path, "--faulty-after", "2",
                                "--iterations", "3")
    assert result.exit_code == 3, result.output
    assert "onnxrt vs faulty: 2/2 iterations passed" in result.output
    assert "faulty vs onnxref: 2/2 iterations passed" in result.output
    assert "onnxrt vs onnxref: 1/1 iterations passed" in result.output  # iteration 2, without faulty
    assert "faulty failed during infer: worker killed by SIGSEGV" in result.output


def test_processes_a_backend_forks_do_not_outlive_the_run(run_cli, models, tmp_path):
    result, _ = run_faulty(run_cli, models.matmul_chain, "load:fork-helper", tmp_path)
    assert result.exit_code == 0, result.output  # the run_cli fixture fails the test if the helper survives


def _slow_start(directory, seconds: float) -> dict:
    """An environment in which every cmpx worker's interpreter takes ``seconds`` to start (a sitecustomize that
    sleeps in worker processes only), as on a busy machine."""
    directory.mkdir(exist_ok=True)
    (directory / "sitecustomize.py").write_text(
        "import sys, time\n"
        f"if 'cmpx.transport.worker' in getattr(sys, 'orig_argv', []):\n    time.sleep({seconds})\n")
    return {"PYTHONPATH": os.pathsep.join([str(directory), os.environ.get("PYTHONPATH", "")])}


def test_the_timeout_bounds_loads_and_inferences_not_a_slow_interpreter_start(run_cli, models, tmp_path, monkeypatch):
    for key, value in _slow_start(tmp_path / "site", 1.5).items():
        monkeypatch.setenv(key, value)
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "faulty", "-p",
                     "cmpx_test_faulty", "--faulty-fault", "load:hang", "--timeout", "0.5")
    assert result.exit_code == 3, result.output
    assert "faulty failed during load: no answer within 0.5 s" in result.output  # started in 1.5 s: not a failure
    assert "onnxrt failed" not in result.output


def test_a_worker_that_never_starts_fails_at_the_start_limit(run_cli, models, tmp_path, monkeypatch):
    from cmpx.transport import live

    monkeypatch.setattr(live, "START_TIMEOUT_SECONDS", 1.0)
    for key, value in _slow_start(tmp_path / "site", 30).items():
        monkeypatch.setenv(key, value)
    started = time.monotonic()
    result = run_cli("run", models.matmul_chain, "--backend", "onnxrt", "--backend", "onnxref", "--timeout", "0.5")
    assert result.exit_code == 3, result.output
    assert "onnxrt failed during start: no answer within 1 s (the limit for starting a worker); worker stopped" in result.output
    assert time.monotonic() - started < 20
