"""One cell of a sweep, run in the calling process: the same run as ``cmpx run MODEL ARGS...``, through the public
``Session``, with its own worker processes, after checking that this node has what the sweep fingerprinted
(cmpx.sweep.node_check), with the run's thread settings (cmpx.sweep.threads).

The calling thread must be its process's main thread: cmpx's workers ask the kernel to kill them when the thread
that started them ends (PR_SET_PDEATHSIG). A local sweep calls this in a runner process of its own
(cmpx.sweep.runner); a Ray task runs on its worker process's main thread, and ``run_cell_task`` checks that.

The outcome (cmpx.sweep.outcome.CellOutcome) comes back through a pipe as one JSON line, or through Ray as it
is.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import traceback
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cmpx.errors import ExitCode
from cmpx.sweep.node_check import node_problem
from cmpx.sweep.outcome import CellOutcome
from cmpx.sweep.threads import thread_settings

if TYPE_CHECKING:
    from cmpx.transport.forking import ForkServers


def run_cell(task: dict[str, Any], servers: ForkServers | None = None) -> CellOutcome:
    """Run ``task`` (cmpx.sweep.matrix.Cell.task) here, its workers forked from ``servers`` where one serves the
    cell's environment; never raises but for a second interrupt."""
    from cmpx.errors import CmpxError
    from cmpx.report import Report
    from cmpx.outcome.report_data import RunInterrupted

    started = time.monotonic()
    lines: list[str] = []
    outcome = CellOutcome(ExitCode.INTERNAL, host=socket.gethostname(), pid=os.getpid())
    problem = node_problem(task, outcome.host or "this node")  # the model's path is absolute
    if problem is not None:  # not the inputs the sweep fingerprinted: no result to keep under that fingerprint
        return _finish(replace(outcome, exit_code=ExitCode.USAGE, failure=problem), lines, started)
    here = os.getcwd()
    try:
        os.chdir(task["cwd"])  # relative paths in the args are relative to the sweep file, as its globs are
    except OSError as exc:
        outcome = replace(outcome, exit_code=ExitCode.USAGE, failure=f"cannot enter {task['cwd']} (the sweep "
                          f"file's directory) on {outcome.host}: {exc.strerror}; every node must see the sweep's "
                          "files at the same path")
        return _finish(outcome, lines, started)
    threads = task.get("threads") or 1
    outcome = replace(outcome, threads=threads)
    try:
        _make_directories(task.get("directories", ()))
        with thread_settings(threads):
            report = _run(task, lines, servers)
        document = report.to_dict()
        outcome = replace(outcome, exit_code=report.exit_code, report=document, page=_page(document, lines))
    except RunInterrupted as exc:
        outcome = replace(outcome, exit_code=ExitCode.INTERRUPTED, failure="interrupted",
                          report=exc.report.to_dict() if isinstance(exc.report, Report) else None)
    except KeyboardInterrupt:
        outcome = replace(outcome, exit_code=ExitCode.INTERRUPTED, failure="interrupted")
    except CmpxError as exc:
        outcome = replace(outcome, exit_code=exc.exit_code, failure=str(exc))
    except Exception as exc:  # a bug, or an environment cmpx did not foresee: this cell's internal error
        lines.append(traceback.format_exc())
        outcome = replace(outcome, exit_code=ExitCode.INTERNAL,
                          failure=f"internal error: {type(exc).__name__}: {exc}")
    finally:
        os.chdir(here)
    return _finish(outcome, lines, started)


def _make_directories(directories: Iterable[str]) -> None:
    """The folders of the run's {model} paths (``--save-outputs saved/{model}``), relative to the sweep file."""
    from cmpx.errors import UsageError

    for directory in directories:
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot make {directory}, the folder of a {{model}} path in the run's args, on "
                             f"{socket.gethostname()}: {exc.strerror or exc}; choose a path there that can be "
                             "written") from None


def _page(document: dict[str, Any], lines: list[str]) -> str | None:
    """The report's HTML page, made here where cells run in parallel (no plots: a run's own --report-html has
    them); None, with a warning in the log, should it fail."""
    from cmpx.reports.html_report import render_report

    try:
        return render_report(document)
    except Exception as exc:  # a bug in the page: the cell's verdict stands, its page is missing
        lines.append(f"warning: the cell's HTML page could not be made: {type(exc).__name__}: {exc}")
        return None


def _finish(outcome: CellOutcome, lines: list[str], started: float) -> CellOutcome:
    log = "\n".join(lines + ([f"Error: {outcome.failure}"] if outcome.failure else [])) + "\n"
    return replace(outcome, seconds=time.monotonic() - started, log=log)


def _run(task: dict[str, Any], lines: list[str], servers: ForkServers | None = None):
    """The run itself: the words parsed by ``cmpx run``'s own command, a Session with the text report kept in
    ``lines``."""
    from cmpx.options.grammar import request_from_words
    from cmpx.plugin.manager import PluginSettings, make_plugin_manager
    from cmpx.reports.text import TextReporter
    from cmpx.lifecycle.session import Session

    settings = PluginSettings.from_cli(task["plugins"])
    plugins = make_plugin_manager(autoload=settings.autoload, extra=settings.extra, blocked=settings.blocked)
    request, cli = request_from_words([task["model"], *task["words"]], plugins)
    verbosity = max(0, 1 + cli["verbose"] - (1 if cli["quiet"] else 0))

    def reporter_for(plan):
        return TextReporter(plan, lines.append, debug=cli["debug"], verbosity=verbosity)

    pool = None
    if servers is not None:
        from cmpx.transport.pool import WorkerPool

        pool = WorkerPool.forked_from(servers)
    with Session(request, plugins, settings, reporter_for=reporter_for,
                 warn=lambda message: lines.append(f"warning: {message}"), pool=pool) as session:
        return session.run()


def run_cell_task(task: dict[str, Any]) -> CellOutcome:
    """A Ray task's body. Ray runs a task on its worker process's main thread; should it ever not, the cell runs
    in a runner process started from this thread instead, which keeps the cell's workers tied to a live thread.
    A model shipped through Ray's object store (--ship-models) is written to a file of this node first."""
    from cmpx.sweep.shipping import shipped_model

    with shipped_model(task) as here:
        if threading.current_thread() is threading.main_thread():
            return run_cell(here)
        from cmpx.sweep.runner_process import RunnerProcess

        runner = RunnerProcess()
        try:
            return runner.run(here)
        finally:
            runner.stop()
