"""``Session``: the one owner of a run's lifecycle. Both ``cmpx run`` and ``cmpx.run()`` go through it.

    preflight   check every option that needs neither the model nor a file            (cmpx.lifecycle.preflight)
    start       take a worker per backend from the pool; each imports its framework   (cmpx.transport.pool)
                (under another Python for NAME@PYTHON, the worker code linked in)     (cmpx.transport.foreign)
    describe    a model in a backend's own format is described by that backend        (cmpx.transport.describing)
    plan        read the model and saved runs, make data and transformed models       (cmpx.lifecycle.planner)
    execute     load, infer, compare iteration by iteration                           (cmpx.lifecycle.execution)
    report      the Report, the reporter's summary, the report files                  (cmpx.report, cmpx.reports)
    release     workers (their process groups too), then the run's space: segments, scratch directories, lock

The session holds what it started from ``start`` on, and releases all of it when it ends, however it ends.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cmpx.errors import OutputFailed, UsageError
from cmpx.outcome.report_data import RunInterrupted
from cmpx.lifecycle.planner import build_plan
from cmpx.lifecycle.preflight import preflight
from cmpx.report import Report
from cmpx.reports.reporter import Reporter, Reporters, SilentReporter
from cmpx.transport import runspace
from cmpx.transport.pool import WorkerPool, release_workers

if TYPE_CHECKING:
    from cmpx.plan import BackendPlan, RunPlan
    from cmpx.plugin.manager import PluginSet, PluginSettings
    from cmpx.lifecycle.preflight import Preflight
    from cmpx.reports.figures import FigureCollector
    from cmpx.reports.json_report import JsonReportWriter
    from cmpx.options.request import RunRequest
    from cmpx.transport.supervisor import Worker

ReporterFactory = Callable[["RunPlan"], Reporter]


class Session:
    """One run of ``request``. Use it as a context manager and call ``run()`` once::

        with Session(request, plugins, settings, reporter_for=make_reporter) as session:
            report = session.run()

    ``reporter_for(plan)`` makes the reporter once the plan exists; ``warn(message)`` receives the warnings found
    before that (while planning); ``pool`` supplies the workers (spares started early by the ``cmpx`` script).
    """

    def __init__(self, request: RunRequest, plugins: PluginSet, settings: PluginSettings, *,
                 reporter_for: ReporterFactory | None = None, warn: Callable[[str], None] | None = None,
                 pool: WorkerPool | None = None, verbosity: int = 1):
        self.request = request
        self.plugins = plugins
        self.settings = settings
        self.reporter_for = reporter_for or (lambda plan: SilentReporter())
        self.warn = warn or (lambda message: None)
        self.pool = pool
        self.verbosity = verbosity  # of the --log-file text report
        self._log: Any = None
        self.warnings: list[str] = []
        self.workers: dict[str, Worker] = {}
        self.reporter: Reporter | None = None
        self.space: runspace.RunSpace | None = None
        self.figures: FigureCollector | None = None  # draws the plots as the run goes, when asked for
        self._scratch: str | None = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def run(self) -> Report:
        """Every step of the lifecycle; returns the Report. Raises UsageError (or another CmpxError) for a problem
        found before any inference, BackendFailed when a model in a backend's own format cannot be described,
        and RunInterrupted (holding the partial report) on Ctrl-C, also in its first seconds (planning, starting
        workers): then the report holds no result, its backends those asked for. Bad data found after some
        iterations (a loader failing on a later feed) is a Report of what finished, ``stopped`` saying why (exit 2)."""
        checked: Preflight | None = None
        try:
            checked = preflight(self.request, self.plugins, self.settings)
            return self._run(checked)
        except RunInterrupted:
            raise
        except KeyboardInterrupt:
            raise RunInterrupted(self._unstarted(checked)) from None

    def _unstarted(self, checked: Preflight | None) -> Report:
        return unstarted_report(self.request, checked, self.warnings)

    def _run(self, checked: Preflight) -> Report:
        if self.request.save_error_plots or self.request.report_html:
            from cmpx.reports.figures import SAMPLE_POINTS, plots_wanted

            if plots_wanted(self.request, self._warn):  # the comparison samples elements for the plots
                checked = replace(checked, comparison=replace(checked.comparison, samples=SAMPLE_POINTS))
        runspace.sweep_orphans()  # what dead runs of this user left behind
        self.space = runspace.RunSpace()
        self._scratch = self.space.scratch_directory()  # transformed models, worker code for other Pythons
        # The workers start now, before anything heavy is imported here, and import their frameworks while this
        # process reads the model and makes data; if that finds a problem they are stopped before loading anything.
        self.workers = (self.pool or WorkerPool()).assign(checked.backends, self.settings,
                                                          self._worker_code(checked.backends, self._scratch))
        described = None
        # a model in its backends' own format: the first backend describes it
        if checked.model_format is not None and self.request.model:
            from cmpx.transport.describing import describe_model

            first = checked.backends[0]
            described = describe_model(self.workers[first.name], first, self.request.model,
                                       checked.timeouts[first.name])
        plan, feeds = build_plan(checked, warn=self._warn, scratch=self._scratch, described=described)
        from cmpx.lifecycle.execution import execute
        from cmpx.outcome.results import RunResult

        shown = self.reporter_for(plan)
        if self.request.log_file:  # the text report, once more, into a file
            shown = self._logged(shown, plan, self.request.log_file)
        stream: JsonReportWriter | None = None
        if self.request.report_json:
            from cmpx.reports.json_report import JsonReportWriter

            stream = JsonReportWriter(self.request.report_json, plan)
        reporters = [*([stream] if stream else []), shown, _WarningsKept(self.warnings)]
        if checked.comparison.samples:
            from cmpx.reports.figures import FigureCollector

            self.figures = FigureCollector(plan, self.request.save_error_plots, bool(self.request.report_html))
            reporters.append(self.figures)
        self.reporter = Reporters(*reporters)
        result = RunResult()
        try:
            execute(plan, feeds, self.reporter, self.workers, result, self.space.prefix)
        except KeyboardInterrupt:
            report = Report(plan, result, self.warnings, interrupted=True, request=self.request)
            self._finish(report, shown, stream)
            raise RunInterrupted(report) from None
        except UsageError as exc:  # a later feed was bad (its loader raised, a wrong shape): report what finished
            if not result.iterations:
                raise
            report = Report(plan, result, self.warnings, request=self.request, stopped=str(exc))
            self._finish(report, shown, stream)
            return report
        finally:
            self._show_worker_output()
        report = Report(plan, result, self.warnings, request=self.request)
        self._finish(report, shown, stream)
        return report

    def _finish(self, report: Report, shown: Reporter, stream: JsonReportWriter | None) -> None:
        """Write the report files (a file that cannot be written is recorded in the report, which then exits 2),
        the JSON report last so that it holds the others' fate, then tell the reporter."""
        from cmpx.comparison.coverage import unfulfilled

        for message in unfulfilled(self.request, report.plan, report.result):
            (self.reporter or shown).warning(message)
        written: list[tuple[str, str]] = []
        for write in (self._write_junit, self._write_figures):
            try:
                written += write(report)
            except OutputFailed as exc:
                report.output_failures.append(str(exc))
        if stream is not None:
            try:
                stream.finish(report)
                written.append(("the JSON report", stream.path))
            except OutputFailed as exc:
                report.output_failures.append(str(exc))
        shown.finished(report)
        for what, path in written:
            shown.wrote(what, path)

    def _worker_code(self, backends: Sequence[BackendPlan], scratch: str) -> str | None:
        """For backends under another Python: a directory in this run's scratch space linking the worker code they
        import from here (used where cmpx is not installed there; see cmpx.transport.foreign)."""
        elsewhere = [backend for backend in backends if backend.python is not None]
        if not elsewhere:
            return None
        from cmpx.transport.foreign import link_worker_code, worker_modules

        directory = os.path.join(scratch, "worker-code")
        link_worker_code(directory, worker_modules(elsewhere, self.settings))
        return directory

    def _logged(self, shown: Reporter, plan: RunPlan, path: str) -> Reporter:
        from cmpx.errors import OutputFailed as _Failed
        from cmpx.reports.text import TextReporter

        try:
            self._log = open(path, "w", encoding="utf-8")
        except OSError as exc:
            raise _Failed(f"--log-file {path}: {exc.strerror}") from None
        for message in self.warnings:  # found while planning, before the log existed
            self._log.write(f"warning: {message}\n")

        def write(text: str) -> None:
            self._log.write(text + "\n")
            self._log.flush()

        return Reporters(shown, TextReporter(plan, write, verbosity=self.verbosity))

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        self.warn(message)

    def _write_junit(self, report: Report) -> list[tuple[str, str]]:
        if not self.request.junit:  # an interrupted run's too: what finished, marked interrupted
            return []
        from cmpx.reports.junit import write_junit_report

        write_junit_report(self.request.junit, report)
        return [("the JUnit report", self.request.junit)]

    def _write_figures(self, report: Report) -> list[tuple[str, str]]:
        """The plots (drawn as the run went; the per-layer profile now) and the HTML report that embeds them."""
        request = self.request
        if not (self.figures or request.report_html):  # an interrupted run's too, marked so
            return []
        written = []
        document = report.to_dict()
        try:
            pictures = self.figures.finish(document) if self.figures is not None else []
        except OutputFailed as exc:  # the plots could not all be written: the HTML report still can
            report.output_failures.append(str(exc))
            pictures = []
        if request.save_error_plots and self.figures is not None and self.figures.written:
            written.append((f"{len(self.figures.written)} error plot(s)", request.save_error_plots))
        if request.report_html:
            from cmpx.reports.html_report import write_html_report

            left_out = self.figures.left_out if self.figures is not None else 0
            write_html_report(request.report_html, document, pictures, plots=self.figures is not None,
                              figures_left_out=left_out)
            written.append(("the HTML report", request.report_html))
        return written

    def _show_worker_output(self) -> None:
        """Hand the reporter what each worker printed (framework warnings, the backend's own prints), before the
        logs close with the workers."""
        for name, worker in self.workers.items():
            if not worker.closed and self.reporter is not None:
                text = worker.stderr_text().strip()
                if text:
                    self.reporter.worker_output(name, text)

    def release(self) -> None:
        """Stop every worker the session took (their process groups too), then remove the run's segments, scratch
        directories and lock; safe to call more than once."""
        workers, self.workers = self.workers, {}
        if self._log is not None:
            self._log.close()
            self._log = None
        try:
            release_workers(workers)
        finally:
            if self.space is not None:
                self.space.close()


class _WarningsKept(SilentReporter):
    """Keeps the warnings of the execution for the Report."""

    def __init__(self, warnings: list[str]):
        self.warnings = warnings

    def warning(self, message: str) -> None:
        self.warnings.append(message)


def unstarted_report(request: RunRequest | None, checked: Preflight | None = None,
                     warnings: Sequence[str] = ()) -> Report:
    """The report of a run interrupted before its plan existed (Ctrl-C in its first seconds): nothing ran; its
    backends are those asked for once the request was checked."""
    from cmpx.comparison.compare import ComparisonSettings
    from cmpx.plan import RunPlan
    from cmpx.outcome.results import RunResult

    plan = (RunPlan(None, (), checked.backends, request.reference if request else None, checked.comparison,
                    checked.timeouts) if checked is not None else RunPlan(None, (), (), None, ComparisonSettings([]), {}))
    return Report(plan, RunResult(), list(warnings), interrupted=True, request=request)
