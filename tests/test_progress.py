"""Backends report what they are doing during a long load (Backend.progress); the coordinator shows it on the
terminal's status line next to the backend's name."""

import io
import os
from pathlib import Path

from cmpx.plan import BackendPlan, RunPlan
from cmpx.comparison.compare import ComparisonSettings
from cmpx.plugin.manager import PluginSettings, make_plugin_manager
from cmpx.reports.terminal import Progress
from cmpx.reports.text import TextReporter
from cmpx.testing.leaks import worker_processes
from cmpx.transport import supervisor
from cmpx_trt.build_progress import BuildPhases

EXAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "models" / "conv.onnx")


def test_a_backends_progress_reaches_the_coordinator_while_it_waits():
    settings = PluginSettings(extra=("cmpx_test_progress",))
    plugins = make_plugin_manager(extra=settings.extra)
    chatty = BackendPlan("chatty", plugins.backends.get("chatty"), {})
    worker = supervisor.assign(supervisor.spawn_worker(dict(os.environ)), chatty, settings)
    seen = []
    try:
        supervisor.send(worker, supervisor.load_request("load", 1, chatty, EXAMPLE, ()), "load")
        reply = supervisor.wait_replies([worker], "ready", "load", 60, {"chatty": 1},
                                        on_wait=lambda pending, elapsed, status: seen.append(status.get("chatty")))
        assert reply["chatty"]["op"] == "ready", reply
        assert worker.status == ""  # cleared once the request is answered
    finally:
        supervisor.release(worker)
    texts = [text for text in seen if text]
    assert len(set(texts)) >= 3 and set(texts) <= {"step 1/4", "step 2/4", "step 3/4", "step 4/4"}
    assert texts == sorted(texts)  # in the order the backend said them
    assert worker_processes() == []


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_the_status_line_shows_each_backends_progress_next_to_its_name():
    terminal = FakeTerminal()
    plan = RunPlan(None, (), (), None, ComparisonSettings([]), {})
    reporter = TextReporter(plan, lambda *a, **k: None, progress=Progress.for_terminal(terminal))
    reporter.waiting("loading", ["onnxrt", "trt"], 42.0, {"trt": "building: Building engine 2/4"})
    assert "loading: onnxrt, trt (building: Building engine 2/4) 42.0 s" in terminal.getvalue()


def test_a_run_with_a_chatty_backend_passes_and_the_status_never_reaches_a_pipe(run_cli):
    result = run_cli("run", EXAMPLE, "--backend", "chatty", "--backend", "onnxrt", "-p", "cmpx_test_progress", "-v")
    assert result.exit_code == 0, result.output
    assert "step" not in result.output
    assert "a warning from the framework" not in result.output  # a worker's own output needs -vv


def test_very_verbose_shows_what_each_worker_printed(run_cli):
    result = run_cli("run", EXAMPLE, "--backend", "chatty", "--backend", "onnxrt", "-p", "cmpx_test_progress", "-vv")
    assert result.exit_code == 0, result.output
    assert "output of chatty's worker:\n        chatty: a warning from the framework" in result.output
    assert "output of onnxrt's worker" not in result.output  # it printed nothing


def test_tensorrt_build_phases_become_one_line():
    phases = BuildPhases()
    assert phases.start("Building engine", None, 4) == "Building engine 0/4"
    assert phases.step("Building engine", 0) == "Building engine 1/4"
    assert phases.start("Tactic selection", "Building engine", 120) == "Building engine 1/4 > Tactic selection 0/120"
    assert phases.step("Tactic selection", 36) == "Building engine 1/4 > Tactic selection 37/120"
    assert phases.finish("Tactic selection") == "Building engine 1/4"
    assert phases.start("Tactic selection", "Building engine", 5) == "Building engine 1/4 > Tactic selection 0/5"
    assert phases.step("unknown phase", 3) == "Building engine 1/4 > Tactic selection 0/5"
    phases.finish("Tactic selection")
    assert phases.finish("Building engine") == ""
